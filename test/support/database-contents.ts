/** Every row of every table, as the ground truth a test compares before and after a request. */
import type { Harness } from './harness.ts';

/** Every row of every table in the public schema, as text, sorted per table. */
export async function databaseContents(h: Harness): Promise<Record<string, string[]>> {
  const tables = await h.sql<{ name: string }>(`select tablename as name from pg_tables where schemaname = 'public' order by tablename`);
  const contents: Record<string, string[]> = {};
  for (const { name } of tables) {
    const rows = await h.sql<{ row: string }>(`select to_jsonb(t)::text as row from public.${JSON.stringify(name)} t`);
    contents[name] = rows.map((r) => r.row).sort();
  }
  return contents;
}
