import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { migrate } from '../src/db/migrate.ts';
import { openPostgresStore } from '../src/db/postgres-store.ts';
import { resources } from '../src/resources/registry.ts';
import { openTestStore } from './support/harness.ts';

const migrationFiles = async () =>
  (await readdir(fileURLToPath(new URL('../src/db/migrations/', import.meta.url)))).filter((f) => f.endsWith('.sql')).sort();

test('migrating an up-to-date store applies nothing', async () => {
  const { store, drop } = await openTestStore('pglite');
  try {
    assert.deepEqual(await migrate(store), []);
    const applied = await store.query<{ name: string }>('select name from pds_migrations order by name');
    assert.deepEqual(applied.map((r) => r.name), await migrationFiles());
  } finally {
    await drop();
  }
});

test('every table under a tenant policy is forced to row-level security and indexed by university_id', async () => {
  const { store, drop } = await openTestStore('pglite');
  try {
    const tables = await store.query<{ relname: string; forced: boolean; indexed: boolean }>(`
      select c.relname, c.relforcerowsecurity as forced,
        exists (select 1 from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
                where i.indrelid = c.oid and a.attname in ('university_id', 'id')
                  and (a.attname = 'university_id' or c.relname = 'universities')) as indexed
      from pg_class c where c.oid in (select (schemaname || '.' || tablename)::regclass from pg_policies where policyname = 'tenant_scope')`);
    // The 17 tenant tables, tenants (the per-university lock rows), idempotency_keys, change_tombstones and universities.
    assert.equal(tables.length, 21);
    assert.deepEqual(tables.filter((t) => !t.forced || !t.indexed).map((t) => t.relname), []);
  } finally {
    await drop();
  }
});

test('every index of a tenant table leads with university_id, but a primary key (one row by its id) and the service-wide lookups of accounts and stored answers', async () => {
  const { store, drop } = await openTestStore('pglite');
  try {
    // An index led by another column let a read filtering on another university's id fetch its
    // rows before row-level security dropped them, in time that grew with their number.
    const indexes = await store.query<{ name: string }>(`
      select ic.relname as name
      from pg_index i join pg_class ic on ic.oid = i.indexrelid join pg_class c on c.oid = i.indrelid
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
      where c.oid in (select (schemaname || '.' || tablename)::regclass from pg_policies where policyname = 'tenant_scope')
        and c.relname <> 'universities' and not i.indisprimary and a.attname <> 'university_id'
      order by 1`);
    // Erased addresses are refused service-wide (ACCOUNT_DELETED), the operator lists every
    // account, and stored write answers expire service-wide.
    assert.deepEqual(indexes.map((r) => r.name), ['accounts_created_idx', 'accounts_erased_email_idx', 'idempotency_keys_created_idx']);
  } finally {
    await drop();
  }
});

/** What pds_tenant holds beyond pds_app: the address register, which a university's writes claim in and partner reads never see (016). */
const REGISTER = 'email_register';

test("pds_tenant has pds_app's grants, and for each of pds_app's policies a twin bound to one university; the register is pds_tenant's alone", async () => {
  const { store, drop } = await openTestStore('pglite');
  try {
    const grants = (role: string) => store.query<{ relname: string; privilege_type: string }>(
      `select c.relname, a.privilege_type from pg_class c, aclexplode(c.relacl) a
       where c.relnamespace = 'public'::regnamespace and a.grantee = $1::regrole order by 1, 2`, [role]);
    const tenantGrants = await grants('pds_tenant');
    assert.deepEqual(tenantGrants.filter((g) => g.relname !== REGISTER), await grants('pds_app'));
    assert.deepEqual(tenantGrants.filter((g) => g.relname === REGISTER).map((g) => g.privilege_type), ['INSERT', 'SELECT']);
    const [{ usage }] = await store.query<{ usage: boolean }>(`select has_schema_privilege('pds_tenant', 'public', 'usage') as usage`);
    assert.equal(usage, true);
    // pds_app's policies, and pds_tenant's with the one university read back as the scope's list.
    const policies = (role: string, suffix: string) => store.query(
      `select tablename, left(policyname, length(policyname) - length($2)) as name, permissive, cmd,
         replace(qual, '= pds_university()', '= ANY (pds_scope())') as qual,
         replace(with_check, '= pds_university()', '= ANY (pds_scope())') as with_check
       from pg_policies where schemaname = 'public' and roles = array[$1]::name[] order by 1, 2`, [role, suffix]);
    const twins = await policies('pds_tenant', '_one');
    assert.deepEqual(twins.filter((p) => p.tablename !== REGISTER), await policies('pds_app', ''));
    assert.deepEqual(twins.filter((p) => p.tablename === REGISTER).map((p) => p.name), ['register_claim', 'register_read']);
    assert.ok(twins.length >= 20, `${twins.length} policies`);
    // Each twin names the one university; none reads the scope's list.
    const scoped = await store.query(`select policyname from pg_policies where 'pds_tenant' = any(roles) and (qual like '%pds_scope%' or with_check like '%pds_scope%')`);
    assert.deepEqual(scoped, []);
    // Bound by its policies alone: not a member of pds_app, whose policies would otherwise apply
    // too, joined by OR; no superuser, no bypass.
    const [role] = await store.query(`select pg_has_role('pds_tenant', 'pds_app', 'member') as member, rolsuper, rolbypassrls
      from pg_roles where rolname = 'pds_tenant'`);
    assert.deepEqual({ ...role }, { member: false, rolsuper: false, rolbypassrls: false });
  } finally {
    await drop();
  }
});

test("every resource's columns are its relation's, and every column it does not derive is its table's, of the same type", async () => {
  const { store, drop } = await openTestStore('pglite');
  try {
    const typeOf = async (relation: string) => new Map((await store.query<{ name: string; type: string }>(
      `select attname as name, format_type(atttypid, atttypmod) as type from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped`,
      [relation])).map((c) => [c.name, c.type]));
    for (const resource of resources) {
      const [relation, table] = [await typeOf(resource.relation), await typeOf(resource.table)];
      for (const column of resource.columns) {
        assert.ok(relation.has(column.name), `${resource.relation}.${column.name}`);
        if (!column.derived) assert.equal(table.get(column.name), relation.get(column.name), `${resource.table}.${column.name}`);
        else assert.ok(!table.has(column.name), `${resource.table}.${column.name} is stored, not derived`);
      }
    }
  } finally {
    await drop();
  }
});

// Concurrency needs a server; PGlite is one session.
if (process.env.TEST_DATABASE_URL) test('two instances migrating one new PostgreSQL database at once apply each file exactly once', async () => {
  const fresh = await openTestStore('postgres', { migrated: false });
  const second = openPostgresStore(fresh.url!, 2);
  try {
    const [a, b] = await Promise.all([migrate(fresh.store), migrate(second)]);
    assert.deepEqual([...a, ...b].sort(), await migrationFiles());
    const applied = await fresh.store.query<{ name: string }>('select name from pds_migrations order by name');
    assert.deepEqual(applied.map((r) => r.name), await migrationFiles());
    const [policies] = await fresh.store.query<{ n: number }>(`select count(*)::int as n from pg_policies where tablename = 'students'`);
    // tenant_scope, its twin tenant_scope_one and operator_all, once each.
    assert.equal(policies.n, 3);
  } finally {
    await second.close();
    await fresh.drop();
  }
});
