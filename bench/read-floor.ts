/**
 * The hand-written floors of the read benchmark (README, Measured): what a capable engineer would write
 * by hand to serve the same page, node:http and postgres.js with nothing else, run as a process of
 * its own like the service and loaded by the same HTTP client. bench/read-page.ts starts it with
 * the pages to serve (READ_FLOOR_PAGES: the service's own statement for each, and the settings of
 * its scope), one per path:
 *
 *   GET /unscoped/<n>  the page's statement alone: one prepared statement, no role, no scope,
 *                      with the service's plan caching, or on Citus its executor pool and planning
 *                      (READ_FLOOR_PARAMETERS), sent where the service sends it (on Citus the
 *                      node holding the reader's shards);
 *   GET /scoped/<n>    the same statement under the service's role and scope: where the service
 *                      reads on reader sessions (PostgreSQL; on Citus one university's, on its
 *                      node), on sessions opened with their parameters and the page's scope
 *                      (startup parameters), the statement alone; else (a consortium on Citus)
 *                      in the transaction the service runs it in (SET LOCAL), written with
 *                      postgres.js's own transaction (`sql.begin`), the settings and the
 *                      statement pipelined;
 *   GET /fixed/<n>     the page's bytes from memory, read on its first request: no database after it, so
 *                      its p99 / p50 is the tail of the machine and of the load generator alone.
 *
 * Neither authenticates, counts requests, parses a query string nor plans: the floor is the
 * database's work and the bytes to the socket.
 */
import http from 'node:http';
import postgres from 'postgres';
import { type FloorPage, READ_FLOOR_BANNER } from './read-page.ts';

const pages = JSON.parse(process.env.READ_FLOOR_PAGES!) as FloorPage[];
// As many connections as the service's pool (PDS_DB_MAX_CONNECTIONS, default 10); a page's pool
// closes its sessions once its page is done.
const open = (url: string, parameters: Readonly<Record<string, string>>) => postgres(url, {
  max: 10, idle_timeout: 5, onnotice: () => {}, fetch_types: false, connection: parameters as postgres.Options<{}>['connection'],
});
// The statement alone caches plans as the service's reader sessions do; one pool per database the pages are read from.
const unscopedParameters = JSON.parse(process.env.READ_FLOOR_PARAMETERS!) as Record<string, string>;
const byUrl = new Map<string, postgres.Sql>();
const plain = pages.map((page) => {
  if (!byUrl.has(page.url)) byUrl.set(page.url, open(page.url, unscopedParameters));
  return byUrl.get(page.url)!;
});
// A pool of sessions per page whose reader session has its scope at start.
const sessions = pages.map((page) => (page.session ? open(page.url, page.session) : null));

type Rows = ({ body: string } | { row: string })[];

const serve: Record<string, (page: FloorPage, index: number) => Promise<Rows>> = {
  unscoped: (page, index) => plain[index].unsafe<Rows>(page.text, page.params as string[], { prepare: true }),
  scoped: async (page, index) => {
    const session = sessions[index];
    if (session) return session.unsafe<Rows>(page.text, page.params as string[], { prepare: true });
    const [, rows] = await plain[index].begin('read only', (tx) => [tx.unsafe(page.settings), tx.unsafe<Rows>(page.text, page.params as string[], { prepare: true })]);
    return rows;
  },
};

/** The page's bytes: the aggregated body, or its rows put in an array as the service does. */
const bodyOf = (page: FloorPage, rows: Rows) =>
  (page.asRows ? `[${(rows as { row: string }[]).map((r) => r.row).join(', ')}]` : (rows[0] as { body: string }).body);

/** Each page's bytes, read once on its first /fixed request. */
const fixed = new Map<number, Promise<Buffer>>();
const fixedBytes = (page: FloorPage, index: number) => {
  if (!fixed.has(index)) fixed.set(index, serve.unscoped(page, index).then((rows) => Buffer.from(bodyOf(page, rows))));
  return fixed.get(index)!;
};

const server = http.createServer((request, response) => {
  const [, kind, index] = (request.url ?? '').split('/');
  const page = pages[Number(index)];
  if (kind === 'fixed' && page) {
    fixedBytes(page, Number(index)).then(
      (bytes) => response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(bytes),
      (error: Error) => response.writeHead(500).end(error.message),
    );
    return;
  }
  const run = serve[kind];
  if (!page || !run) {
    response.writeHead(404).end();
    return;
  }
  run(page, Number(index)).then(
    (rows) => response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(bodyOf(page, rows)),
    (error: Error) => response.writeHead(500).end(error.message),
  );
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => console.error(`${READ_FLOOR_BANNER} ${process.env.PORT}`));
