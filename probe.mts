import { PGlite } from '@electric-sql/pglite';
const t0 = Date.now();
const db = await PGlite.create();
console.log('create ms', Date.now() - t0);
console.log((await db.query('select version()')).rows);
await db.exec(`create role app nologin; create table t(id int, u int); alter table t enable row level security; alter table t force row level security;
create policy p on t to app using (u = any(string_to_array(nullif(current_setting('x.scope', true),''),',')::int[])); grant select on t to app; insert into t values (1,1),(2,2);`);
const r = await db.transaction(async tx => {
  await tx.query(`select set_config('role','app',true), set_config('x.scope',$1,true), set_config('statement_timeout','100',true)`, ['1']);
  return (await tx.query('select * from t')).rows;
});
console.log(r, (await db.query('select current_user')).rows);
try { await db.transaction(async tx => { await tx.query(`select set_config('statement_timeout','100',true)`); await tx.query('select pg_sleep(1)'); }); } catch (e) { console.log('timeout?', (e as any).code, (e as any).message); }
const t1 = Date.now(); const dump = await db.dumpDataDir('gzip'); console.log('dump', dump.size, Date.now()-t1);
const t2 = Date.now(); const db2 = await PGlite.create({ loadDataDir: dump }); await db2.query('select 1'); console.log('load ms', Date.now()-t2);
console.log((await db2.query('select count(*) from t')).rows);
