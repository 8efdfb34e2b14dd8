/** Tokens for the demo data set of src/domain/demo-data.ts: what `npm start` prints and the operator's demo call answers. */
import { DEMO_DEFAULTS, type DemoOrganisations, demoExists, demoOrganisations, loadDemoData } from './demo-data.ts';
import type { Queryable } from '../db/store.ts';
import { issueToken } from './tokens.ts';

export interface DemoUniversity {
  id: string;
  name: string;
  short_name: string;
  read_token: string;
  write_token: string;
}

export interface DemoResult {
  seed: number;
  students: number;
  consortium: { id: string; name: string; read_token: string };
  universities: DemoUniversity[];
}

async function withTokens(tx: Queryable, university: DemoOrganisations['universities'][number], labels: { read: string; write: string }): Promise<DemoUniversity> {
  const read = await issueToken(tx, { universityId: university.id, canWrite: false, label: labels.read });
  const write = await issueToken(tx, { universityId: university.id, canWrite: true, label: labels.write });
  return { ...university, read_token: read.token, write_token: write.token };
}

/** Fresh tokens for the demo's first university, for a restart that prints how to call the service. */
export async function issueDemoStartTokens(tx: Queryable): Promise<DemoUniversity> {
  const { universities: [first] } = await demoOrganisations(tx);
  await tx.query(`update tokens set revoked_at = now() where label = 'demo start' and revoked_at is null`);
  return withTokens(tx, first, { read: 'demo start', write: 'demo start' });
}

/** The demo data set of `seed` with a read and a write token per university and a consortium token. */
async function demoWithTokens(tx: Queryable, seed: number, students: number): Promise<DemoResult> {
  const { consortium, universities } = await demoOrganisations(tx, seed);
  const tokens: DemoUniversity[] = [];
  for (const university of universities) tokens.push(await withTokens(tx, university, { read: 'demo read', write: 'demo write' }));
  const consortiumToken = await issueToken(tx, { consortiumId: consortium.id, label: 'demo consortium' });
  return { seed, students, consortium: { ...consortium, read_token: consortiumToken.token }, universities: tokens };
}

/** Loads the demo data set of `options.seed` (src/domain/demo-data.ts) and issues its tokens. */
export async function loadDemo(tx: Queryable, options: { students?: number; seed?: number } = {}): Promise<DemoResult> {
  const { students, seed } = await loadDemoData(tx, options);
  return demoWithTokens(tx, seed, students);
}

/**
 * The demo data set of `seed` loaded already, with fresh tokens, or null: a data set is its
 * seed's, so asking again answers the same ids. `students` counts the consortium members'
 * students as they stand.
 */
export async function loadedDemo(tx: Queryable, seed: number = DEMO_DEFAULTS.seed): Promise<DemoResult | null> {
  if (!await demoExists(tx, seed)) return null;
  const { consortium } = await demoOrganisations(tx, seed);
  const [{ n }] = await tx.query<{ n: string }>(
    'select count(*)::text as n from students s join universities u on u.id = s.university_id where u.consortium_id = $1', [consortium.id]);
  return demoWithTokens(tx, seed, Number(n));
}
