/**
 * Reads that try to hurt: values that fail only when rows are produced, patterns that run away,
 * a session held by someone else on the embedded store, and counts that would show other
 * universities' statistics.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { arrayLiteral } from '../src/db/array-literal.ts';
import { StoreUnavailableError } from '../src/db/store.ts';
import { CONFIG_DEFAULTS } from '../src/config.ts';
import { LIMITS } from '../src/limits.ts';
import { ApiError } from '../src/errors.ts';
import { LargePageSlots } from '../src/query/large-pages.ts';
import { jsonNesting, searchNesting, searchTerms } from '../src/query/nesting.ts';
import { arrayLiteralElements, regexComplaint } from '../src/query/patterns.ts';
import { eventually } from './support/eventually.ts';
import { Harness, backends } from './support/harness.ts';
import { parseExposition, valueOf } from './support/prometheus.ts';

describe('the pattern guard (pure)', () => {
  test('refuses back-references, nested repetition, big bounds, many repetitions and basic syntax', () => {
    for (const pattern of ['(.+)\\1\\1\\1x', 'a\\2', '(a+)+', '(a*)*b', '((ab)*c)+', '(x(a{2})y){3}', '(?:a|b+)*', 'a{101}',
      'a{1,200}', 'a?'.repeat(LIMITS.maxPatternRepetitions + 1), '(?b)\\(a*\\)*', '***:(a+)+',
      // Expanded syntax hides a nested repetition behind spaces; extended syntax ends a bracket at
      // `\]` and so hides one inside what reads as a bracket.
      '(?x)((.{1,30}) {1,30}) {1,30}x', '(?ix)(a +) +', '(?e)[\\]((.{1,30}){1,30}){1,30}x[]]', '(?z)a']) {
      assert.ok(regexComplaint(pattern), `accepted ${pattern}`);
    }
  });

  test('accepts ordinary patterns, escapes and bracket expressions', () => {
    for (const pattern of ['^Led', '(?i)dashboard', 'a+b*c?', '(ab)+c', '[0-9]{3}-[0-9]{4}', '\\d+\\.\\d*', '[(+*]+', '[]a]+',
      '[[:alpha:]]+\\s', 'x+?y', '(a|b)c{2,5}', '\\(a+\\)+', '***=(a+)+\\1', '(?q)(.+)\\1', 'a{100}', '(?in)^led', '(?cmpstw)a+']) {
      assert.equal(regexComplaint(pattern), null, pattern);
    }
  });

  test('reads the elements of an any/all array literal as PostgreSQL does', () => {
    assert.deepEqual(arrayLiteralElements('{a, "b,c" ,"(.+)\\\\1",d\\,e}'), ['a', 'b,c', '(.+)\\1', 'd,e']);
    assert.deepEqual(arrayLiteralElements('plain'), ['plain']);
  });
});

describe('the nesting guard (pure)', () => {
  test('JSON values nest by their arrays and objects, not by brackets inside strings', () => {
    assert.equal(jsonNesting('{"a":[1,{"b":[]}]}'), 4);
    assert.equal(jsonNesting('["[[[[", "\\"[{"]'), 1);
    assert.equal(jsonNesting('plain'), 0);
  });

  test('full-text queries nest by parentheses and negations in a row, as each operator reads them', () => {
    assert.equal(searchNesting('fts', '!! ! a & (b | !(c))'), 3);
    assert.equal(searchNesting('fts', '!a & !b & !c'), 1);
    // Words, as runs of letters and digits: a weight counts as one more, never fewer.
    assert.equal(searchTerms("dashboard & (react | 'vue.js') <-> café:*A"), 6);
    assert.equal(searchNesting('wfts', '- -a -b'), 2);
    // A hyphen inside a word negates nothing; websearch_to_tsquery has no parentheses.
    assert.equal(searchNesting('wfts', 'x----y ((((z))))'), 0);
    // What websearch_to_tsquery passes over between negations: operator characters and quotes.
    assert.equal(searchNesting('wfts', '(--!--"x"---a'), 4);
    assert.equal(searchNesting('wfts', '-!-!-|-&-'), 5);
    assert.equal(searchNesting('plfts', '!!!!a'), 0);
    assert.equal(searchNesting('phfts', '((((a))))'), 0);
  });
});

describe('large page slots (pure)', () => {
  const refusal = (slots: LargePageSlots, scope: string) => {
    try {
      slots.take(scope);
      return null;
    } catch (error) {
      assert.ok(error instanceof ApiError);
      return `${error.status} ${error.code}`;
    }
  };

  test('a scope holds at most two; all scopes together half the transactions\' connections; a slot given back twice counts once', () => {
    const slots = new LargePageSlots(10);
    const a1 = slots.take('a');
    slots.take('a');
    assert.equal(refusal(slots, 'a'), '429 TOO_MANY_LARGE_PAGES');
    slots.take('b');
    slots.take('b');
    slots.take('c');
    assert.equal(refusal(slots, 'd'), '503 DATABASE_BUSY');
    a1();
    a1();
    slots.take('d');
    assert.equal(refusal(slots, 'a'), '503 DATABASE_BUSY');
  });

  test('one connection still sends one large page', () => {
    const slots = new LargePageSlots(1);
    const giveBack = slots.take('a');
    assert.equal(refusal(slots, 'b'), '503 DATABASE_BUSY');
    giveBack();
    slots.take('b');
  });
});

for (const backend of backends()) {
  describe(`hostile reads on ${backend}`, () => {
    let h: Harness;
    let consortium: string;
    const lines: string[] = [];
    before(async () => {
      // More students than a page sent whole holds (LIMITS.wholePageRows), so the consortium's pages of them stream.
      h = await Harness.start(backend, { demoStudents: 1_200, settings: { logLevel: 'warn', logStream: { write: (line) => void lines.push(line) } } });
      consortium = h.demo!.consortium.read_token;
    });
    after(() => h.close());

    /** The app's port, listening from the first call on. */
    async function listening(): Promise<number> {
      if (!h.app.server.listening) await h.app.listen({ port: 0, host: '127.0.0.1' });
      return (h.app.server.address() as AddressInfo).port;
    }

    test('a cast that fails on every row is a 400 before any byte of a 200', async () => {
      const res = await h.get('/v1/campuses?select=name::json', consortium);
      assert.equal(res.status, 400);
      assert.equal(res.json.code, '22P02');
      assert.deepEqual(Object.keys(res.json).sort(), ['code', 'details', 'hint', 'message']);
    });

    test('a large page whose cast fails on a row far past the first batch is a 400, as PostgREST answers it', async () => {
      // Every last name is a number except the last student's in id order.
      await h.sql(`update students set last_name = '7'`);
      await h.sql(`update students set last_name = 'x' where id = (select id from students where university_id <> $1 order by id desc limit 1)`, [h.demo!.universities[3].id]);
      try {
        const res = await h.get('/v1/students?select=id,last_name::int&order=id&limit=5000', consortium);
        assert.equal(res.status, 400);
        assert.equal(res.json.code, '22P02');
        // Without the failing row the same page streams, every row of it.
        const fine = await h.get('/v1/students?select=id,last_name::int&order=id&limit=5000&last_name=neq.x', consortium);
        assert.equal(fine.status, 200);
        assert.ok(fine.json.length > 100);
      } finally {
        await h.sql(`update students set last_name = 'Smith'`);
      }
    });

    test('a store failure after the status line aborts the transfer and is logged as an error', async () => {
      // The store fails the second batch of a streamed page, as a lost connection would.
      const transaction = h.store.transaction.bind(h.store);
      h.store.transaction = (fn, options) => transaction((tx) => {
        let fetches = 0;
        return fn({
          ...tx,
          query: tx.query.bind(tx),
          exec: tx.exec.bind(tx),
          queryColumns: (text, params) => (text.startsWith('FETCH') && ++fetches === 2
            ? Promise.reject(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))
            : tx.queryColumns(text, params)),
        });
      }, options);
      const answeredCount = async () => valueOf(parseExposition((await h.get('/metrics', null)).body), 'pds_http_requests_total',
        { route: '/v1/students', method: 'GET', status: '200' });
      const answeredBefore = await answeredCount();
      try {
        const port = await listening();
        const outcome = await new Promise<{ status: number; requestId: string; body: string; aborted: boolean }>((resolve, reject) => {
          const req = request({ port, path: '/v1/students?select=id,last_name&order=id&limit=5000', headers: { authorization: `Bearer ${consortium}` } }, (res) => {
            let body = '';
            let aborted = false;
            res.setEncoding('utf8');
            res.on('data', (chunk) => { body += chunk; });
            res.on('aborted', () => { aborted = true; });
            res.on('error', () => { aborted = true; });
            res.on('close', () => resolve({ status: res.statusCode!, requestId: String(res.headers['x-request-id']), body, aborted }));
          });
          req.on('error', reject);
          req.end();
        });
        assert.equal(outcome.status, 200);
        assert.ok(outcome.aborted, 'the client must see an aborted transfer');
        assert.ok(outcome.body.startsWith('[{'));
        assert.ok(!outcome.body.endsWith(']'), 'a truncated page must never look like a complete array');
        assert.throws(() => JSON.parse(outcome.body));
        await new Promise((r) => setTimeout(r, 50));
        const errors = lines.map((l) => JSON.parse(l)).filter((e) => e.level === 50);
        assert.ok(errors.some((e) => e.reqId === outcome.requestId && e.code === '57P01'), 'logged at error level with the request id');
        assert.ok(!lines.some((l) => l.includes('administrator command')), 'the failure\'s message never reaches the log');
        // Cut off, it ran no onResponse hook; it is counted all the same (src/http/answered.ts).
        assert.equal(await answeredCount(), answeredBefore + 1);
      } finally {
        h.store.transaction = transaction;
      }
    });

    test('an array literal past PostgreSQL\'s limits is a 400 with its code, not a 500', async () => {
      const token = h.demo!.universities[0].read_token;
      // PostgreSQL 17 (PGlite) finds the bound past its limit (54000); 15 finds the literal malformed first (22P02).
      for (const [query, codes] of [['secondary_emails=cs.{{{{{{{a}}}}}}}', ['54000']], ['secondary_emails=cs.[1:2147483647]={a}', ['54000', '22P02']],
        ['first_name=eq(any).{{{{{{{a}}}}}}}', ['54000']], ['graduation_year=gt(all).{{{{{{{1}}}}}}}', ['54000']]] as const) {
        const res = await h.get(`/v1/students?select=id&${query}`, token);
        assert.equal(res.status, 400, query);
        assert.ok((codes as readonly string[]).includes(res.json.code), `${query}: ${res.json.code}`);
        assert.deepEqual(Object.keys(res.json).sort(), ['code', 'details', 'hint', 'message']);
      }
    });

    test('full-text queries of more words than the limit in one read are a 400: 2,000 of them held a reader session for the whole statement timeout', async () => {
      const token = h.demo!.universities[0].read_token;
      const words = (n: number, joiner: string) => Array.from({ length: n }, (_, i) => `w${i}`).join(joiner);
      for (const [op, joiner] of [['fts', '%26'], ['plfts', '%20'], ['phfts', '%20'], ['wfts', '%20-']]) {
        const over = await h.get(`/v1/jobs?select=id&limit=1&title=${op}.${words(LIMITS.maxSearchTerms + 1, joiner)}`, token);
        assert.deepEqual([over.status, over.json.code], [400, 'QUERY_TOO_COMPLEX'], op);
        assert.match(over.json.message, new RegExp(`its full-text queries hold more than ${LIMITS.maxSearchTerms} words`));
        const at = await h.get(`/v1/jobs?select=id&limit=1&title=${op}.${words(LIMITS.maxSearchTerms, joiner)}`, token);
        assert.equal(at.status, 200, `${op}: ${at.body}`);
      }
      // The limit is the read's: conditions each within it, in a tree or side by side, are counted together.
      const half = LIMITS.maxSearchTerms / 2 + 1;
      for (const query of [`or=(title.fts.${words(half, '%26')},description.wfts.${words(half, '%20')})`,
        `title=plfts.${words(half, '%20')}&description=plfts.${words(half, '%20')}`]) {
        const res = await h.get(`/v1/jobs?select=id&limit=1&${query}`, token);
        assert.deepEqual([res.status, res.json.code], [400, 'QUERY_TOO_COMPLEX'], query.slice(0, 40));
      }
    });

    test('a JSON path, a JSON value or a full-text query nested past the limit is a 400, not a 500 that a retry cannot cure', async () => {
      const token = h.demo!.universities[0].read_token;
      const deep = LIMITS.maxNesting + 1;
      const path = '->a'.repeat(deep);
      const nested = (open: string, close: string, n: number, inner = '') => `${open.repeat(n)}${inner}${close.repeat(n)}`;
      // PostgreSQL fails the first five every time they are sent (tsquery stack too small), the
      // embedded store the sixth (its stack); the last two are only past the limit.
      for (const query of [`title=fts.${'!'.repeat(33)}a`, `title=fts(english).a|b%26c<->${'!'.repeat(30)}d`, `title=wfts.${'-'.repeat(40)}a`,
        `title=wfts.(${'-'.repeat(40)}a`, `title=wfts.${encodeURIComponent(`"x"${'-!'.repeat(40)}a`)}`,
        `title=fts.${nested('(', ')', 7000, 'a')}`, `title=fts.${'!'.repeat(deep)}a`, `description=wfts.${'- '.repeat(deep)}a`]) {
        const res = await h.get(`/v1/jobs?select=id&limit=1&${query}`, token);
        assert.deepEqual([res.status, res.json.code], [400, 'QUERY_TOO_COMPLEX'], query.slice(0, 40));
        assert.match(res.json.message, new RegExp(`query nests deeper than ${LIMITS.maxNesting} levels`));
      }
      for (const query of [`select=sections${'->a'.repeat(2000)}`, `select=id&sections${path}=is.null`, `select=id&order=sections${path}`,
        `select=id&sections=cs.${nested('[', ']', 7000)}`, `select=id&sections->a=eq.${encodeURIComponent(nested('{"a":', '}', deep, '1'))}`,
        `select=id&sections=in.(1,${nested('[', ']', deep)})`, `select=id&sections=eq(any).${encodeURIComponent(`{"${nested('[', ']', deep)}"}`)}`]) {
        const res = await h.get(`/v1/student_profiles?limit=1&${query}`, token);
        assert.deepEqual([res.status, res.json.code], [400, 'QUERY_TOO_COMPLEX'], query.slice(0, 40));
      }
      // At the limit, each is read.
      for (const [resource, query] of [['jobs', `title=fts.${'!'.repeat(LIMITS.maxNesting)}a`], ['jobs', `title=wfts.x${'-'.repeat(40)}y`],
        ['student_profiles', `sections${'->a'.repeat(LIMITS.maxNesting)}=is.null`], ['student_profiles', `sections=cs.${nested('[', ']', LIMITS.maxNesting)}`],
        ['students', `first_name=eq.${nested('[', ']', deep)}`]]) {
        const res = await h.get(`/v1/${resource}?select=id&limit=1&${query}`, token);
        assert.equal(res.status, 200, `${query.slice(0, 40)}: ${res.body}`);
      }
    });

    if (backend === 'postgres') {
      test('a token whose client stops reading its large pages holds two connections, not all: other universities still write and sign in', async () => {
        // Three months of each student, each row fifty copies of its student's id: 8 MB, more than the sockets buffer.
        const largePage = `/v1/student_engagement_monthly?select=${Array.from({ length: LIMITS.maxOutputColumns }, (_, i) => `s${i}:student_id`).join(',')}`;
        const port = await listening();
        /** The page asked for on a socket of its own, which reads the status line and headers, then no more. */
        const stalled = (token: string) => new Promise<{ head: string; socket: Socket }>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1');
          let head = '';
          const onData = (chunk: Buffer) => {
            head += chunk.toString('latin1');
            if (!head.includes('\r\n\r\n')) return;
            socket.off('data', onData);
            socket.pause();
            resolve({ head: head.slice(0, head.indexOf('\r\n\r\n')), socket });
          };
          socket.on('data', onData).on('error', reject);
          socket.write(`GET ${largePage} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\n\r\n`);
        });
        // Ten at once, as many as the transactions have connections (test/support/harness.ts).
        const pages = await Promise.all(Array.from({ length: 10 }, () => stalled(consortium)));
        try {
          const statuses = pages.map((page) => page.head.slice(9, 12)).sort();
          assert.deepEqual(statuses, [...Array(LIMITS.largePagesPerScope).fill('200'), ...Array(10 - LIMITS.largePagesPerScope).fill('429')]);
          assert.ok(pages.filter((page) => page.head.startsWith('HTTP/1.1 429')).every((page) => /\r\nretry-after: 1\r\n/i.test(page.head)));
          const refused = await h.get(largePage, consortium);
          assert.deepEqual([refused.status, refused.json.code], [429, 'TOO_MANY_LARGE_PAGES']);
          // Another university writes, and a token never seen before is looked up, each on a connection of its own.
          const college = h.demo!.universities[3];
          const write = await h.request({
            method: 'PUT', url: '/v1/cohorts', headers: { authorization: `Bearer ${college.write_token}`, 'content-type': 'application/json' },
            payload: { cohorts: [{ name: 'During the stall', display_name: 'D', program: 'P', degree: 'BA', start_date: '2030-09-01', end_date: '2031-06-30', intake_year: 2030, intake_term: 'Fall' }] },
          });
          assert.equal(write.status, 200, write.body);
          const issued = await h.admin('POST', '/tokens', { university_id: college.id, can_write: false });
          assert.equal(issued.status, 201, issued.body);
          assert.equal((await h.get('/v1/campuses?select=id', issued.json.token)).status, 200);
        } finally {
          for (const page of pages) page.socket.destroy();
        }
        // Once its clients went away, the consortium is sent its large pages again.
        let again = await h.get(largePage, consortium);
        for (let i = 0; i < 100 && again.status === 429; i++) {
          await new Promise((r) => setTimeout(r, 50));
          again = await h.get(largePage, consortium);
        }
        assert.equal(again.status, 200);
        assert.ok(again.json.length > LIMITS.wholePageRows);
      });
    }

    test('a query string near its limit is answered within the 16 KiB of headers that fetch reads: Content-Location is left out', async () => {
      const port = await listening();
      const token = h.demo!.universities[0].read_token;
      const query = `select=id&limit=1&last_name=neq.${'x'.repeat(LIMITS.maxQueryStringBytes - 40)}`;
      const long = await fetch(`http://127.0.0.1:${port}/v1/students?${query}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(long.status, 200);
      assert.equal(long.headers.get('content-location'), null);
      assert.equal((await long.json()).length, 1);
      const short = await fetch(`http://127.0.0.1:${port}/v1/students?select=id&limit=1`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(short.headers.get('content-location'), '/v1/students?limit=1&select=id');
      await short.arrayBuffer();
    });

    test('a 5xx answer\'s hint quotes its request id, whatever failed', async () => {
      const token = h.demo!.universities[0].read_token;
      // The token's lookup is cached by this first read; the page's own read then fails.
      assert.equal((await h.get('/v1/campuses?select=id', token)).status, 200);
      const { readAsReader, transaction } = h.store;
      try {
        for (const [failure, status, code] of [
          [new Error('induced by the test'), 500, 'INTERNAL'],
          [new StoreUnavailableError('ECONNRESET', 'induced by the test'), 503, 'DATABASE_UNAVAILABLE'],
        ] as const) {
          h.store.readAsReader = () => Promise.reject(failure);
          h.store.transaction = () => Promise.reject(failure);
          const res = await h.get('/v1/campuses?select=id', token, { 'x-request-id': `hint-${code}` });
          assert.deepEqual([res.status, res.json.code], [status, code]);
          assert.match(res.json.hint, new RegExp(`hint-${code}`));
          assert.ok(!res.body.includes('induced'), 'nothing of the failure reaches the body');
        }
      } finally {
        Object.assign(h.store, { readAsReader, transaction });
      }
    });

    test('a back-reference pattern is refused with 400 at once', async () => {
      const res = await h.get('/v1/resumes?select=id&limit=1&content=match.(.%2B)%5C1%5C1%5C1x', consortium);
      assert.equal(res.status, 400);
      assert.equal(res.json.code, 'PATTERN_TOO_COMPLEX');
      assert.match(res.json.message, /back-references/);
      assert.ok(res.json.hint);
    });

    test('an any/all list with a dimension prefix is checked like any other', async () => {
      const res = await h.get('/v1/resumes?select=id&limit=1&content=match(any).%5B1:1%5D=%7B%22(.%2B)%5C%5C1x%22%7D', consortium);
      assert.equal(res.status, 400);
      assert.equal(res.json.code, 'PATTERN_TOO_COMPLEX');
    });

    test('runaway patterns are refused in filters, logic trees and any/all lists', async () => {
      const long = 'a'.repeat(LIMITS.maxPatternLength + 1);
      for (const query of ['content=imatch.(a%2B)%2Bx', `content=like.*${long}*`, 'content=match.a{1,200}',
        'or=(title.eq.x,content.imatch."(e.*)*q")', 'content=match(any).{Led,"(.%2B)%5C%5C1"}', `title=ilike(all).{a*,${long}}`]) {
        const res = await h.get(`/v1/resumes?select=id&limit=1&${query}`, consortium);
        assert.equal(res.json.code, 'PATTERN_TOO_COMPLEX', query);
        assert.equal(res.status, 400, query);
      }
    });

    test('a pattern on a column the resource lacks is 42703, whatever the pattern', async () => {
      for (const pattern of ['match.(a)%5C1', 'imatch.(a%2B)%2Bx', 'match.a']) {
        const res = await h.get(`/v1/resumes?select=id&limit=1&nope=${pattern}`, consortium);
        assert.deepEqual([res.status, res.json.code], [400, '42703'], pattern);
      }
    });

    test('ordinary patterns still read', async () => {
      const res = await h.get('/v1/resumes?select=id&limit=2&content=imatch.led%20a%20(team|cross)', consortium);
      assert.equal(res.status, 200);
      assert.equal(res.json.length, 2);
      const listed = await h.get('/v1/resumes?select=id&limit=2&content=match(any).{Led,Designed}', consortium);
      assert.equal(listed.status, 200);
    });

    test('planned and estimated totals of a small scope are its exact count', async () => {
      await h.sql('analyze');
      const college = h.demo!.universities[3];
      const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from students where university_id = $1', [college.id]);
      for (const count of ['planned', 'estimated']) {
        for (const limit of [1, 2000]) {
          const res = await h.get(`/v1/students?select=id&limit=${limit}`, college.read_token, { prefer: `count=${count}` });
          assert.match(String(res.headers['content-range']), new RegExp(`/${n}$`), `${count} with limit ${limit}`);
        }
      }
    });
  });
}

describe('planned counts beyond the row cap', () => {
  // The planner's figure comes from statistics over every university's rows: off unless asked for.
  for (const [setting, plannedCounts] of [['on', true], ['off', false], ['unset', CONFIG_DEFAULTS.plannedCounts]] as const) {
    test(`PDS_PLANNED_COUNTS ${setting}`, async () => {
      const h = await Harness.start('pglite', { demoStudents: 3, settings: { plannedCounts } });
      try {
        const college = h.demo!.universities[3];
        await h.sql(`insert into campuses (university_id, name) select $1, 'Annex ' || i from generate_series(1, 12345) i`, [college.id]);
        await h.sql('analyze campuses');
        const [{ n }] = await h.sql<{ n: number }>('select count(*)::int as n from campuses where university_id = $1', [college.id]);
        const res = await h.get('/v1/campuses?select=id&limit=1', college.read_token, { prefer: 'count=planned' });
        const total = Number(/\/(\d+)$/.exec(String(res.headers['content-range']))![1]);
        if (setting === 'on') assert.ok(total > 10_000, `planned totals beyond the cap are never below 10,001 (got ${total})`);
        else assert.equal(total, n);
        assert.equal(res.headers['preference-applied'], 'count=planned');
      } finally {
        await h.close();
      }
    });
  }
});

test('the embedded store answers 503 DATABASE_BUSY instead of queueing without end', { timeout: 20_000 }, async () => {
  const h = await Harness.start('pglite', { demoStudents: 3, embeddedWaitMs: 300 });
  let release!: () => void;
  const held = h.store.transaction(() => new Promise<void>((resolve) => { release = resolve; }));
  try {
    const token = h.demo!.universities[0].read_token;
    const started = Date.now();
    const [read, health] = await Promise.all([h.get('/v1/campuses', token), h.request({ method: 'GET', url: '/healthz' })]);
    assert.ok(Date.now() - started < 3_000, 'queued requests are answered within the bound');
    assert.equal(read.status, 503);
    assert.equal(read.json.code, 'DATABASE_BUSY');
    assert.equal(read.headers['retry-after'], '1');
    assert.equal(health.status, 200, 'liveness never waits for the store');
    release();
    await held;
    assert.equal((await h.get('/v1/campuses', token)).status, 200);
  } finally {
    release();
    await h.close();
  }
});

for (const backend of backends()) {
  describe(`a streamed page past a planned total on ${backend}`, () => {
    let h: Harness;
    before(async () => {
      // A consortium with more students than a planned total counts exactly (LIMITS.rowsPerResponse) and a page streams past them.
      h = await Harness.start(backend, { demoStudents: 16_000 });
    });
    after(() => h.close());

    test('is 416 when the planned total falls short of the offset, and leaves no transaction nor large-page slot behind', async () => {
      const consortium = h.demo!.consortium.read_token;
      const [{ total }] = await h.sql<{ total: number }>('select count(*)::int as total from students where university_id = any($1::uuid[])',
        [arrayLiteral(h.demo!.universities.slice(0, 3).map((u) => u.id))]);
      const offset = LIMITS.rowsPerResponse + 100;
      assert.ok(total > offset + LIMITS.wholePageRows, `the consortium has ${total} students`);
      // Statistics taken before every last name became one they never saw: the planner expects a
      // handful, and beyond the row cap a planned total is the cap + 1, short of the offset.
      await h.sql('analyze students');
      await h.sql(`update students set last_name = 'Underestimated'`);
      const page = `/v1/students?select=id&last_name=eq.Underestimated&order=id&limit=${LIMITS.wholePageRows + 1}&offset=${offset}`;
      // Once per large-page slot of the scope and once more: each 416 opened a stream that held its slot and its transaction.
      for (let i = 0; i <= LIMITS.largePagesPerScope; i++) {
        const res = await h.get(page, consortium, { prefer: 'count=planned' });
        assert.deepEqual([res.status, res.json.code], [416, 'PGRST103'], `${res.status} ${res.headers['content-range']}`);
      }
      const exact = await h.get(page, consortium, { prefer: 'count=exact' });
      assert.equal(exact.status, 206, `${exact.status} ${exact.headers['content-range']}`);
      assert.equal(exact.json.length, LIMITS.wholePageRows + 1);
      assert.equal((await h.get('/v1/campuses?select=id', h.demo!.universities[3].read_token)).status, 200);
    });
  });
}

// Reported in a security audit: 500 requests of one token for whole 1,000-row résumé pages, whose
// client read none, held 1.75 GB and kept every other university waiting 6–10 s.
describe('requests of one token in progress at once', () => {
  let h: Harness;
  let port: number;
  const sockets: Socket[] = [];
  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 3 });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await h.close();
  });

  test(`past ${LIMITS.requestsInFlightPerToken} the token is answered 429 TOO_MANY_REQUESTS_IN_FLIGHT, until one of them ends; other tokens are served`, async () => {
    const [north] = h.demo!.universities;
    const stalled = `PUT /v1/students HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${north.write_token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`;
    for (let i = 0; i < LIMITS.requestsInFlightPerToken; i++) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(stalled);
      sockets.push(socket);
    }
    const page = (token: string) => h.get('/v1/campuses?select=id&limit=1', token);
    await eventually(async () => (await page(north.write_token)).status === 429, 5_000, 'a 429');
    const refused = await page(north.write_token);
    assert.deepEqual([refused.status, refused.json.code, refused.headers['retry-after']], [429, 'TOO_MANY_REQUESTS_IN_FLIGHT', '1']);
    assert.equal((await page(north.read_token)).status, 200);
    sockets.pop()!.destroy();
    await eventually(async () => (await page(north.write_token)).status === 200, 5_000, 'a 200 once a request ended');
  });

  test(`requests whose clients left while their token was being looked up are not counted: ${LIMITS.requestsInFlightPerToken} of them left the token refused for good (seen in a benchmark after 32 connections closed at once)`, async () => {
    const [, south] = h.demo!.universities;
    const token = (await h.admin('POST', '/tokens', { university_id: south.id })).json.token as string;
    // The embedded store's one session, held: the lookups of the new token wait for it.
    let release!: () => void;
    const released = new Promise<void>((resolve) => { release = resolve; });
    let holding!: () => void;
    const held = new Promise<void>((resolve) => { holding = resolve; });
    const holder = h.testStore.store.transaction(async () => {
      holding();
      await released;
    });
    await held;
    const left = Array.from({ length: LIMITS.requestsInFlightPerToken }, () => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`GET /v1/campuses?select=id HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      return socket;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const socket of left) socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    await holder;
    await eventually(async () => (await h.get('/v1/campuses?select=id&limit=1', token)).status !== 503, 5_000, 'the store free again');
    const after = await h.get('/v1/campuses?select=id&limit=1', token);
    assert.equal(after.status, 200, after.body);
  });
});

