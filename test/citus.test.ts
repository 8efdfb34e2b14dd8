/**
 * What holds only because of how the service talks to a Citus cluster (docs/scaling.md): the
 * tables are distributed, a read of one university is routed to one shard, the scope reaches
 * the workers where row-level security runs, the planned count sums the shards' estimates, and
 * two universities racing for the same addresses neither share one nor deadlock. Runs when
 * TEST_CITUS_URL names a cluster's coordinator.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import postgres from 'postgres';
import { type PlanNode, plannedRows } from '../src/query/execute.ts';
import { buildWindowStatement } from '../src/query/changes.ts';
import { planRead } from '../src/query/plan.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { type Statement, buildCountStatement, buildPageRowsStatement, buildPageStatement, buildPlannedCountStatement } from '../src/query/sql.ts';
import { resourcesByName } from '../src/resources/registry.ts';
import { type ClusterNode, nodeHoldingMost, nodeUrl } from '../src/db/citus-read-routes.ts';
import { Database } from '../src/db/database.ts';
import { NODE_READER_ROLE, openPostgresStore } from '../src/db/postgres-store.ts';
import { DEFAULT_STORE_TIMEOUTS } from '../src/db/store.ts';
import { Harness, storeBackends } from './support/harness.ts';

const planOf = (query: string, resource = 'students') => planRead(resourcesByName.get(resource)!, parseReadRequest({ queryString: query, method: 'GET' }));

/** The Task Count of every job in a text EXPLAIN, in order. */
const taskCounts = (plan: string) => [...plan.matchAll(/Task Count: (\d+)/g)].map((m) => Number(m[1]));

if (storeBackends().includes('citus')) {
  describe('the service on a Citus cluster', () => {
    let h: Harness;
    let members: string[];

    before(async () => {
      h = await Harness.start('citus', { demoStudents: 300 });
      members = h.demo!.universities.slice(0, 3).map((u) => u.id);
    });
    after(() => h.close());

    test('every tenant table is distributed by university_id in one co-location group; shared tables are reference tables', async () => {
      const tables = await h.sql<{ name: string; method: string; column: string | null; group: number }>(
        `select logicalrelid::text as name, partmethod as method, column_to_column_name(logicalrelid, partkey) as column, colocationid as group
         from pg_dist_partition order by 1`);
      const byName = new Map(tables.map((t) => [t.name, t]));
      for (const name of ['consortia', 'universities', 'tokens']) assert.equal(byName.get(name)?.method, 'n', name);
      const tenantTables = tables.filter((t) => t.column === 'university_id');
      // Every table under the tenant policy but universities (a reference table), tenants included.
      const tenantPolicyTables = await h.sql<{ name: string }>(
        `select distinct tablename::text as name from pg_policies where policyname = 'tenant_scope' and tablename <> 'universities' order by 1`);
      assert.deepEqual(tenantTables.map((t) => t.name).sort(), tenantPolicyTables.map((t) => t.name));
      assert.equal(new Set(tenantTables.map((t) => t.group)).size, 1);
      assert.equal(byName.get('email_register')?.column, 'email_hash');
    });

    test("a page of one university's students is planned as one task on one shard", async () => {
      const statement = buildPageStatement(planOf('select=id,email&order=id&limit=100'), [members[0]], { exactCount: true, body: true });
      const [row] = await h.db.asPartner({ universityIds: [members[0]] }, (tx) =>
        tx.query<{ 'QUERY PLAN': [{ Plan: { 'Distributed Query': { Job: { 'Task Count': number } } } }] }>(`explain (format json) ${statement.text}`, statement.params));
      assert.equal(row['QUERY PLAN'][0].Plan['Distributed Query'].Job['Task Count'], 1);
    });

    const explained = (statement: Statement) => h.db.asPartner({ universityIds: members }, async (tx) =>
      (await tx.query<{ 'QUERY PLAN': string }>(`explain ${statement.text}`, statement.params)).map((row) => row['QUERY PLAN']).join('\n'));
    /** The shards holding the members' rows (two members may share one). */
    const memberShards = async () => (await h.sql<{ n: number }>(
      `select count(distinct get_shard_id_for_distribution_column('students', u))::int as n from unnest($1::uuid[]) u`, [`{${members.join(',')}}`]))[0].n;

    test("a consortium's page runs on its members' shards alone and is merged on the coordinator with no subplan", async () => {
      const shards = await memberShards();
      const rows = await explained(buildPageRowsStatement(planOf('select=id,email&order=id&limit=100'), members));
      assert.doesNotMatch(rows, /Distributed Subplan/);
      assert.deepEqual(taskCounts(rows), [shards]);
      // The aggregated form, which the service sends for one university (one task), is the one Citus plans in two steps here.
      assert.match(await explained(buildPageStatement(planOf('select=id,email&order=id&limit=100'), members, { exactCount: false, body: true })), /Distributed Subplan/);
    });

    test("the change feed reads a consortium's members one statement each, each one task on its member's shard", async () => {
      for (const universityId of members) {
        // A position of the member's, which the statement also checks the history for.
        const [{ id, change_seq: seq }] = await h.sql<{ id: string; change_seq: string }>('select id, change_seq::text from students where university_id = $1 limit 1', [universityId]);
        const window = { universityId, after: [Number(seq), 'students', id] as const, through: seq };
        assert.deepEqual(taskCounts(await explained(buildWindowStatement('all', window, 100))), [1], universityId);
      }
    });

    test('a query naming no university, run through the service under a scope, returns that scope\'s rows only', async () => {
      const scope = { universityIds: [members[1]] };
      const seen = await h.db.asPartner(scope, (tx) => tx.query<{ university_id: string; n: number }>(
        'select university_id, count(*)::int as n from students group by university_id'));
      const [truth] = await h.sql<{ n: number }>('select count(*)::int as n from students where university_id = $1', [members[1]]);
      assert.ok(truth.n > 0);
      assert.deepEqual([...seen], [{ university_id: members[1], n: truth.n }]);
      const [{ all }] = await h.db.asPartner(scope, (tx) => tx.query<{ all: number }>('select count(*)::int as "all" from students_read'));
      assert.equal(all, truth.n);
    });

    /** The port of the node that ran a partner's read, as the read itself reports it. */
    const portServing = async (db: Database, universityIds: string[]) => {
      const [[port]] = await db.readAsPartner({ universityIds }, 'select inet_server_port()::text', []);
      return Number(String(port));
    };
    /** Each university's node, from the metadata Citus shows of the shards of students. */
    const nodesOf = (universityIds: string[]) => h.sql<ClusterNode & { coordinator: boolean }>(
      `select nodename as host, nodeport as port, false as coordinator from unnest($1::uuid[]) with ordinality as u(id, n)
       join citus_shards s on s.table_name = 'students'::regclass and s.shardid = get_shard_id_for_distribution_column('students', u.id)
       order by u.n`, [`{${universityIds.join(',')}}`]);

    test("a partner's read runs on the node holding its universities' shards, not on the coordinator", async () => {
      const [node] = await nodesOf([members[0]]);
      const [{ coordinator }] = await h.sql<{ coordinator: number }>('select inet_server_port() as coordinator');
      assert.notEqual(node.port, coordinator);
      assert.equal(await portServing(h.db, [members[0]]), node.port);
      // A consortium's read goes to the node holding most of its members.
      assert.equal(await portServing(h.db, members), nodeHoldingMost(await nodesOf(members))!.port);
      // PDS_CITUS_READ_NODES=off: through the coordinator.
      const throughCoordinator = openPostgresStore(h.testStore.url!, 1, undefined, { citusReadNodes: false });
      try {
        assert.equal(await portServing(new Database(throughCoordinator, 5_000), [members[0]]), coordinator);
      } finally {
        await throughCoordinator.close();
      }
    });

    test("one university's cheap page is a read of its table that Citus plans on the fast path, planned for its values on the node", async () => {
      const statement = buildPageRowsStatement(planOf('select=id,email,first_name,last_name&order=id&limit=100'), [members[0]]);
      const [node] = await nodesOf([members[0]]);
      const notices: string[] = [];
      const onNode = postgres(nodeUrl(h.testStore.url!, node), { max: 1, onnotice: (notice) => notices.push(notice.message), fetch_types: false });
      try {
        await onNode.begin(async (tx) => {
          await tx.unsafe(h.db.partnerSettings({ universityIds: [members[0]] }));
          await tx.unsafe(`set local client_min_messages = debug2`);
          await tx.unsafe(statement.text, [...statement.params]);
        });
      } finally {
        await onNode.end();
      }
      assert.ok(notices.some((message) => /fast-path router query/.test(message)), notices.join('\n'));
      // The service sends it as rows on Citus (src/query/execute.ts sentAsRows).
      assert.equal(await h.db.store.isDistributed(), true);
      // The node's sessions plan each read for its values (src/db/postgres-store.ts CITUS_NODE_PARAMETERS).
      const [[mode]] = await h.db.readAsPartner({ universityIds: [members[0]] }, `select current_setting('plan_cache_mode')`, []);
      assert.equal(String(mode), 'force_custom_plan');
    });

    test('a read sent to a node that does not hold its shard (a route older than a rebalance) still sees its scope\'s rows only', async () => {
      const [held] = await nodesOf([members[0]]);
      const [other] = await h.sql<ClusterNode>(
        `select nodename as host, nodeport as port from pg_dist_node where groupid <> 0 and nodeport <> $1 limit 1`, [String(held.port)]);
      const elsewhere = openPostgresStore(nodeUrl(h.testStore.url!, other), 1, undefined, { citusReadNodes: false });
      try {
        const db = new Database(elsewhere, 5_000);
        assert.equal(await portServing(db, [members[0]]), other.port);
        const [[seen]] = await db.readAsPartner({ universityIds: [members[0]] }, 'select json_agg(distinct university_id)::text from students', []);
        const [[count]] = await db.readAsPartner({ universityIds: [members[0]] }, 'select count(*)::text from students', []);
        const [truth] = await h.sql<{ n: string }>('select count(*)::text as n from students where university_id = $1', [members[0]]);
        assert.deepEqual(JSON.parse(String(seen)), [members[0]]);
        assert.equal(String(count), truth.n);
      } finally {
        await elsewhere.close();
      }
    });

    test('one university\'s read runs on a reader session of its node; once its shard has moved away it is refused there and sent again in a transaction: its scope\'s rows, never none', async () => {
      const university = members[0];
      const [held] = await nodesOf([university]);
      const [other] = await h.sql<ClusterNode>(
        `select nodename as host, nodeport as port from pg_dist_node where groupid <> 0 and nodeport <> $1 limit 1`, [String(held.port)]);
      const [{ shard }] = await h.sql<{ shard: string }>(`select get_shard_id_for_distribution_column('tenants', $1::uuid)::text as shard`, [university]);
      // As the database's owner, which a shard move needs. A move copies the university's shard of
      // every co-located table; on a loaded 2-core machine it (and the first read after it) took
      // longer than a request's default budget, so both get a minute: correctness is the point here.
      const patient = { ...DEFAULT_STORE_TIMEOUTS, storeWaitMs: 60_000 };
      const owner = openPostgresStore(h.testStore.url!, 1, patient);
      // A move leaves the old placement for Citus's maintenance daemon to drop; a move back onto
      // it drops it first, and fails ("leftover from the previous move could not be cleaned up")
      // while the daemon is dropping it: once in a run beside other suites. So it is tried again.
      const move = async (from: ClusterNode, to: ClusterNode): Promise<void> => {
        for (let attempt = 1; ; attempt++) {
          try {
            await owner.query(
              `select citus_move_shard_placement($1::bigint, $2::text, $3::int, $4::text, $5::int, shard_transfer_mode => 'block_writes')`,
              [shard, from.host, String(from.port), to.host, String(to.port)]);
            return;
          } catch (error) {
            if (attempt === 10 || !/leftover from the previous move/.test((error as Error).message)) throw error;
            await pause(1_000);
          }
        }
      };
      const store = openPostgresStore(h.testStore.url!, 2, patient);
      try {
        const db = new Database(store, 5_000);
        const scope = { universityIds: [university] };
        const read = async (text: string) => String((await db.readAsPartner(scope, text, [university]))[0][0]);
        const [truth] = await h.sql<{ n: string }>('select count(*)::text as n from students where university_id = $1', [university]);
        // The route is looked up now, and kept while the shard moves.
        assert.equal(await read('select current_user::text from students where university_id = $1 limit 1'), NODE_READER_ROLE);
        assert.equal(await read('select count(*)::text from students where university_id = $1'), truth.n);
        await move(held, other);
        try {
          assert.equal(await read('select count(*)::text from students where university_id = $1'), truth.n);
        } finally {
          await move(other, held);
        }
      } finally {
        await Promise.all([store.close(), owner.close()]);
      }
    });

    test('the planned count sums the shards\' estimates, not Citus\'s placeholder', async () => {
      await h.store.exec('analyze students, secondary_emails');
      const plan = planOf('');
      const scope = { universityIds: members };
      const counted = buildCountStatement(plan, members);
      const [exact] = await h.db.asPartner(scope, (tx) => tx.query<{ total: string }>(counted.text, counted.params));
      const planned = buildPlannedCountStatement(plan, members);
      const [row] = await h.db.asPartner(scope, async (tx) => {
        await tx.exec('set local citus.explain_all_tasks = on');
        return tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(planned.text, planned.params);
      });
      const placeholder = row['QUERY PLAN'][0].Plan['Plan Rows'];
      const estimate = plannedRows(row['QUERY PLAN'][0].Plan);
      assert.notEqual(estimate, placeholder);
      const total = Number(exact.total);
      assert.ok(estimate >= total / 2 && estimate <= total * 2, `estimate ${estimate} for ${total} rows`);
    });

    test('two universities racing for the same new addresses: each address goes to one, nothing deadlocks', async () => {
      const [first, second] = h.demo!.universities.slice(0, 2);
      const cohortOf = async (universityId: string) => (await h.sql<{ name: string }>(
        'select name from cohorts where university_id = $1 order by name limit 1', [universityId]))[0].name;
      const rows = async (universityId: string) => {
        const cohort = await cohortOf(universityId);
        return Array.from({ length: 200 }, (_, i) => ({
          email: `contested.${i}@race.example.org`, first_name: 'C', last_name: `Row ${i}`, cohort_name: cohort, is_alumni: false,
        }));
      };
      const put = (token: string, students: unknown[]) => h.request({
        method: 'PUT', url: '/v1/students', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ students }),
      });
      const [a, b] = await Promise.all([put(first.write_token, await rows(first.id)), put(second.write_token, (await rows(second.id)).reverse())]);
      assert.equal(a.status, 200, a.body);
      assert.equal(b.status, 200, b.body);
      assert.equal(a.json.counts.created + b.json.counts.created, 200);
      const losers = [...a.json.results, ...b.json.results].filter((r: { status: string }) => r.status === 'rejected');
      assert.equal(losers.length, 200);
      for (const r of losers) assert.ok(['EMAIL_BELONGS_TO_ANOTHER_UNIVERSITY', 'CONCURRENT_WRITE'].includes(r.code), r.code);
      const [{ shared }] = await h.sql<{ shared: number }>(
        `select count(*)::int as shared from (select email from accounts where email like 'contested.%' group by email having count(*) > 1) x`);
      assert.equal(shared, 0);
      const [{ held }] = await h.sql<{ held: number }>(`select count(*)::int as held from accounts where email like 'contested.%'`);
      assert.equal(held, 200);
    });
  });
}
