/**
 * A database of its own on a PostgreSQL server, for one test harness or one benchmark run. On a
 * Citus coordinator (the server's maintenance database has the citus extension) the database is
 * made a cluster of its own: Citus does not propagate CREATE DATABASE by default, so it is
 * created on every node, gets the extension there, and the coordinator registers the same nodes
 * as its own maintenance database has.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

export interface ScratchDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

interface ClusterNode {
  nodename: string;
  nodeport: number;
  /** 0 is the coordinator. */
  groupid: number;
}

const urlOf = (serverUrl: string, database: string, node?: ClusterNode) => {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  if (node) {
    url.hostname = node.nodename;
    url.port = String(node.nodeport);
  }
  return url.toString();
};

async function onEach<T>(urls: readonly string[], fn: (sql: postgres.Sql) => Promise<T>): Promise<void> {
  await Promise.all(urls.map(async (url) => {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await fn(sql);
    } finally {
      await sql.end();
    }
  }));
}

export interface ScratchOptions {
  /** The database's name; a random pds_test_… by default. */
  readonly name?: string;
  /**
   * On Citus, the shard count the migration distributes the tenant tables with
   * (`citus.shard_count`, set on the database); the cluster's own (32 by default) when unset.
   */
  readonly shardCount?: number;
}

/**
 * A fresh database named `name` on `serverUrl`. Whoever holds a name holds it until `drop()`: a
 * second run given the same name (two benchmarks on one server) is refused rather than dropping
 * the first's database under it; a name left by a run that died is dropped and made anew.
 */
export async function createScratchDatabase(serverUrl: string, { name = `pds_test_${randomBytes(6).toString('hex')}`, shardCount }: ScratchOptions = {}): Promise<ScratchDatabase> {
  // The name's lock is this session's, so the admin connection lives as long as the database.
  const admin = postgres(serverUrl, { max: 1, max_lifetime: null, onnotice: () => {} });
  try {
    return await createHeld(admin, serverUrl, name, shardCount);
  } catch (error) {
    await admin.end();
    throw error;
  }
}

/** The advisory lock's name under which one setup at a time adds a Citus cluster's nodes (createHeld). */
const ADDING_NODES_LOCK = 'scratch database: adding nodes';

async function createHeld(admin: postgres.Sql, serverUrl: string, name: string, shardCount: number | undefined): Promise<ScratchDatabase> {
  const [{ held }] = await admin<{ held: boolean }[]>`select pg_try_advisory_lock(hashtext(${`scratch database ${name}`})) as held`;
  if (!held) throw new Error(`Another run is using the database ${name} on ${new URL(serverUrl).host}: wait for it to end.`);
  const [{ citus }] = await admin<{ citus: boolean }[]>`select exists (select 1 from pg_extension where extname = 'citus') as citus`;
  const nodes = citus
    ? await admin<ClusterNode[]>`select nodename, nodeport, groupid from pg_dist_node where noderole = 'primary' order by groupid`
    : [];
  const workers = nodes.filter((n) => n.groupid !== 0);
  const workerServers = workers.map((n) => urlOf(serverUrl, new URL(serverUrl).pathname.slice(1), n));
  const dropEverywhere = async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await onEach(workerServers, (sql) => sql.unsafe(`drop database if exists ${name} with (force)`));
  };
  await dropEverywhere();
  await admin.unsafe(`create database ${name}`);
  await onEach(workerServers, (sql) => sql.unsafe(`create database ${name}`));
  if (citus) {
    await onEach([urlOf(serverUrl, name), ...workers.map((n) => urlOf(serverUrl, name, n))], (sql) => sql`create extension citus`);
    const coordinator = nodes.find((n) => n.groupid === 0);
    // Adding a node copies the cluster's roles to it (worker_create_or_alter_role): two databases
    // set up at once altered one role at once on a worker, and one of them failed ("tuple
    // concurrently updated"). One setup at a time, across processes, by a lock of the server.
    await admin`select pg_advisory_lock(hashtext(${ADDING_NODES_LOCK}))`;
    try {
      await onEach([urlOf(serverUrl, name)], async (sql) => {
        if (coordinator) await sql`select citus_set_coordinator_host(${coordinator.nodename}, ${coordinator.nodeport})`;
        for (const worker of workers) await sql`select citus_add_node(${worker.nodename}, ${worker.nodeport})`;
      });
    } finally {
      await admin`select pg_advisory_unlock(hashtext(${ADDING_NODES_LOCK}))`;
    }
    if (shardCount !== undefined) {
      if (!Number.isInteger(shardCount) || shardCount < 1) throw new Error(`A shard count is a whole number above 0, not ${shardCount}.`);
      await admin.unsafe(`alter database ${name} set citus.shard_count = ${shardCount}`);
    }
  }
  return {
    url: urlOf(serverUrl, name),
    async drop() {
      await dropEverywhere();
      await admin.end();
    },
  };
}
