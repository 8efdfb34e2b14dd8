import { openStore } from './src/db/store.ts';
import { migrate } from './src/db/migrate.ts';
import { Database } from './src/db/database.ts';
import { loadDemo } from './src/db/demo.ts';
const store = await openStore({ databaseUrl: process.env.DATABASE_URL });
await migrate(store);
const db = new Database(store, 5000);
const n = Number(process.env.N ?? 300);
let t = Date.now();
const demo = await db.asOperator(tx => loadDemo(tx, { students: n }));
console.log('demo ms', Date.now() - t, JSON.stringify(demo).slice(0, 300));
for (const tbl of ['students','resumes','student_profiles','student_engagement_monthly','alumni','jobs','cohorts']) {
  const [r] = await db.asOperator(tx => tx.query(`select count(*)::int n, pg_size_pretty(pg_total_relation_size('${tbl}')) size from ${tbl}`));
  console.log(tbl, r);
}
const scope = { universityIds: [demo.universities[0].id] };
console.log(await db.asPartner(scope, tx => tx.query('select count(*)::int from students_read')));
console.log(await db.asPartner(scope, tx => tx.query('select json_build_object($1::text, email) ::text as j from students_read where intake_year_dummy is null limit 1', ['k'])).catch(e => e.code + e.message));
console.log(await db.asPartner(scope, tx => tx.query('select count(*)::int as n from cohorts_read where intake_year = $1', ['2020'])).catch(e => e.code + e.message));
console.log(await db.asPartner(scope, tx => tx.query('select count(*)::int as n from students_read where id = ANY($1)', ['{"a"}'])).catch(e => e.code + ' ' + e.message));
console.log(await db.asPartner(scope, tx => tx.query('EXPLAIN (FORMAT JSON) select 1 from students_read where first_name = $1', ['Ava'])).then(r => JSON.stringify(r).slice(0,200)).catch(e => e.code + ' ' + e.message));
await store.close();
