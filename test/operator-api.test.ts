import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { LIMITS } from '../src/limits.ts';
import { Harness, type Response, storeBackends } from './support/harness.ts';

/** RFC 3339 with an explicit numeric offset, as the /v1 reads render a timestamptz. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}$/;
const ERROR_KEYS = ['code', 'details', 'hint', 'message'];
const COLLECTIONS = ['consortia', 'universities', 'campuses', 'resume-templates', 'accounts', 'tokens'] as const;
const TOKEN_KEYS = ['can_write', 'consortium_id', 'created_at', 'expires_at', 'id', 'label', 'last_used_at', 'revoked_at', 'scope', 'university_id'];

/** Every `…_at` value anywhere in a JSON document, with where it was found. */
function timestampFields(value: unknown, path = '$'): { path: string; value: unknown }[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => timestampFields(v, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, v]) => [
    ...(key.endsWith('_at') && v !== null ? [{ path: `${path}.${key}`, value: v }] : []),
    ...timestampFields(v, `${path}.${key}`),
  ]);
}

function expectError(res: Response, status: number, code: string, message?: RegExp) {
  assert.equal(res.status, status, res.body);
  assert.deepEqual(Object.keys(res.json).sort(), ERROR_KEYS);
  assert.equal(res.json.code, code);
  if (message) assert.match(res.json.message, message);
}

for (const backend of storeBackends()) {
  describe(`operator API on ${backend}`, () => {
    let h: Harness;
    let north: { id: string; read_token: string; write_token: string };
    let consortiumId: string;
    let serial = 0;
    const unique = (prefix: string) => `${prefix} ${backend} ${++serial}`;

    before(async () => {
      h = await Harness.start(backend, { demoStudents: 30 });
      north = h.demo!.universities[0];
      consortiumId = h.demo!.consortium.id;
    });
    after(() => h.close());

    /** Every page of a list, following `next` links. */
    async function allPages(url: string): Promise<{ pages: Response[]; items: any[] }> {
      const pages: Response[] = [];
      let next: string | null = `/admin/v1${url}`;
      while (next !== null) {
        const page = await h.request({ method: 'GET', url: next, headers: { authorization: 'Bearer test-admin-key' } });
        assert.equal(page.status, 200, page.body);
        pages.push(page);
        next = page.json.next;
      }
      return { pages, items: pages.flatMap((p) => p.json.items) };
    }

    describe('one timestamp format', () => {
      test('every timestamp of every operator response is RFC 3339 with an offset, as the reads give it', async () => {
        const checked: { path: string; value: unknown }[] = [];
        const check = (label: string, res: Response, expected: number[]) => {
          assert.ok(expected.includes(res.status), `${label}: ${res.status} ${res.body}`);
          for (const field of timestampFields(res.json)) {
            assert.match(String(field.value), RFC3339, `${label} ${field.path}`);
            checked.push(field);
          }
        };
        const consortium = await h.admin('POST', '/consortia', { name: unique('Format Alliance') });
        check('create consortium', consortium, [201]);
        const university = await h.admin('POST', '/universities', { name: unique('Format University'), consortium_id: consortium.json.id });
        check('create university', university, [201]);
        const universityId = university.json.id;
        check('create campus', await h.admin('POST', '/campuses', { university_id: universityId, name: 'Format Campus' }), [201]);
        check('create template', await h.admin('POST', '/resume-templates', { university_id: universityId, name: 'Classic' }), [201]);
        check('create account', await h.admin('POST', '/accounts', { email: `format-${backend}@example.edu`, kind: 'staff', university_id: universityId }), [201]);
        check('create cohort', await h.admin('POST', '/cohorts', {
          university_id: universityId, name: 'format-2026', display_name: 'Format 2026', program: 'Format', degree: 'BSc',
          start_date: '2026-09-01', end_date: '2029-06-30', intake_year: 2026, intake_term: 'Fall', resume_template_names: ['Classic'],
        }), [201]);
        const token = await h.admin('POST', '/tokens', { university_id: universityId, expires_at: '2999-01-01T00:00:00Z' });
        check('create token', token, [201]);
        assert.equal((await h.get('/v1/universities', token.json.token)).status, 200);
        const rotated = await h.admin('POST', `/tokens/${token.json.id}/rotate`, {});
        check('rotate token', rotated, [201]);
        assert.equal((await h.admin('DELETE', `/tokens/${rotated.json.id}`)).status, 204);
        for (const collection of COLLECTIONS) {
          const list = await h.admin('GET', `/${collection}?limit=5`);
          check(`list ${collection}`, list, [200]);
          check(`item ${collection}`, await h.admin('GET', `/${collection}/${list.json.items[0].id}`), [200]);
        }
        check('revoked and rotated tokens', await h.admin('GET', `/tokens?university_id=${universityId}`), [200]);

        const [student] = await h.sql<{ id: string }>('select id from students where university_id = $1 order by id limit 1', [north.id]);
        const secondary = `format-secondary-${backend}@example.edu`;
        await h.sql('insert into secondary_emails (email, student_id, university_id) values ($1, $2, $3)', [secondary, student.id, north.id]);
        check('verify email', await h.admin('POST', `/students/${student.id}/verify-email`, { email: secondary }), [200]);
        check('sign-in', await h.admin('POST', `/students/${student.id}/sign-in`), [200]);
        check('graduation date', await h.admin('POST', `/students/${student.id}/graduation-date`, { graduation_date: '2001-06-30' }), [200]);
        check('alumni history', await h.admin('GET', `/students/${student.id}/alumni-history`), [200]);
        check('demo', await h.admin('POST', '/demo', { students: 5, seed: 4000 + serial }), [201]);
        check('me', await h.get('/v1/me', north.read_token), [200]);

        const paths = new Set(checked.map((c) => c.path.replace(/\[\d+\]/g, '[]').replace(/^\$/, '')));
        for (const field of ['.created_at', '.expires_at', '.items[].created_at', '.items[].revoked_at', '.verified_at', '.history[].created_at']) {
          assert.ok(paths.has(field), `no ${field} was checked; saw ${[...paths].join(', ')}`);
        }

        // The reads, in the same format and with the very same text for the same record.
        for (const resource of ['students', 'universities', 'events', 'jobs']) {
          check(`read ${resource}`, await h.get(`/v1/${resource}?limit=5`, north.read_token), [200]);
        }
        const [read] = (await h.get(`/v1/universities?id=eq.${north.id}`, north.read_token)).json;
        const inspected = await h.admin('GET', `/universities/${north.id}`);
        assert.equal(inspected.json.created_at, read.created_at);
      });
    });

    describe('list and inspect', () => {
      test('each collection lists with a keyset cursor: pages in creation order, next link keeps the filters', async () => {
        const university = (await h.admin('POST', '/universities', { name: unique('Paging University') })).json;
        const created: string[] = [];
        for (const name of ['A', 'B', 'C', 'D', 'E']) {
          created.push((await h.admin('POST', '/campuses', { university_id: university.id, name: `Campus ${name}` })).json.id);
        }
        const { pages, items } = await allPages(`/campuses?university_id=${university.id}&limit=2`);
        assert.deepEqual(pages.map((p) => p.json.items.length), [2, 2, 1]);
        assert.deepEqual(items.map((c) => c.id), created);
        assert.ok(items.every((c) => c.university_id === university.id));
        assert.equal(pages[2].json.next_cursor, null);
        const second = new URL(pages[0].json.next, 'http://x');
        assert.equal(second.pathname, '/admin/v1/campuses');
        assert.equal(second.searchParams.get('university_id'), university.id);
        assert.equal(second.searchParams.get('limit'), '2');
        assert.equal(second.searchParams.get('after'), pages[0].json.next_cursor);
      });

      test('the default page is 100 records, and a limit above the maximum is refused', async () => {
        const accounts = await h.admin('GET', '/accounts');
        assert.equal(accounts.status, 200);
        const total = (await h.sql<{ n: number }>(`select count(*)::int as n from accounts where kind <> 'student'`))[0].n;
        assert.equal(accounts.json.items.length, Math.min(100, total));
        assert.equal(accounts.json.next_cursor === null, total <= 100);
        expectError(await h.admin('GET', `/accounts?limit=${LIMITS.operatorPageRows + 1}`), 400, 'INVALID_PARAMETER', /limit/);
        assert.equal((await h.admin('GET', `/accounts?limit=${LIMITS.operatorPageRows}`)).status, 200);
      });

      test('every record of a collection is reached exactly once by paging', async () => {
        for (const collection of COLLECTIONS) {
          const { items } = await allPages(`/${collection}?limit=7`);
          const table = collection === 'resume-templates' ? 'resume_templates' : collection;
          const only = collection === 'accounts' ? ` where kind <> 'student'` : '';
          const ids = await h.sql<{ id: string }>(`select id from ${table}${only} order by created_at, id`);
          assert.deepEqual(items.map((r) => r.id), ids.map((r) => r.id), collection);
        }
      });

      test('an item is the record as its list shows it; an unknown id is 404, a malformed one 400', async () => {
        for (const collection of COLLECTIONS) {
          const [first] = (await h.admin('GET', `/${collection}?limit=1`)).json.items;
          const item = await h.admin('GET', `/${collection}/${first.id}`);
          assert.equal(item.status, 200);
          assert.deepEqual(item.json, first);
          expectError(await h.admin('GET', `/${collection}/00000000-0000-4000-8000-000000000000`), 404, 'NOT_FOUND');
          expectError(await h.admin('GET', `/${collection}/not-a-uuid`), 400, 'INVALID_PARAMETER', /id/);
        }
      });

      test('a create answers the same object the item then shows', async () => {
        const consortium = await h.admin('POST', '/consortia', { name: unique('Same Alliance') });
        assert.deepEqual((await h.admin('GET', `/consortia/${consortium.json.id}`)).json, consortium.json);
        const university = await h.admin('POST', '/universities', { name: unique('Same University'), consortium_id: consortium.json.id, timezone: 'UTC' });
        assert.deepEqual((await h.admin('GET', `/universities/${university.json.id}`)).json, university.json);
        const token = await h.admin('POST', '/tokens', { consortium_id: consortium.json.id, label: 'same' });
        const { token: secret, ...record } = token.json;
        assert.match(secret, /^pds_/);
        assert.deepEqual((await h.admin('GET', `/tokens/${token.json.id}`)).json, record);
      });

      // Reported by CI: on Citus the create of a consortium's new member and the token's
      // last_used_at write, both on reference tables, deadlocked now and then (503 CONCURRENT_WRITE).
      if (backend !== 'pglite') test('an operator transaction that loses a deadlock runs once more: both sides commit', async () => {
        await h.store.exec('create table operator_deadlock_probe (id int primary key, n int not null); grant all on operator_deadlock_probe to public; insert into operator_deadlock_probe values (1, 0), (2, 0)');
        const bump = (first: number, second: number) => h.db.asOperator(async (tx) => {
          await tx.query('update operator_deadlock_probe set n = n + 1 where id = $1', [String(first)]);
          await tx.query('select pg_sleep(0.3)');
          await tx.query('update operator_deadlock_probe set n = n + 1 where id = $1', [String(second)]);
        });
        await Promise.all([bump(1, 2), bump(2, 1)]);
        assert.deepEqual(await h.sql('select id, n from operator_deadlock_probe order by id'), [{ id: 1, n: 2 }, { id: 2, n: 2 }]);
      });

      test("a consortium's new member is in its tokens' next read on this instance (it came after the token cache's 5 s)", async () => {
        const consortium = (await h.admin('POST', '/consortia', { name: unique('Growing Alliance') })).json;
        const first = (await h.admin('POST', '/universities', { name: unique('First Member'), consortium_id: consortium.id })).json;
        const token = (await h.admin('POST', '/tokens', { consortium_id: consortium.id })).json.token;
        const members = async () => (await h.get('/v1/universities?select=id&order=id', token)).json.map((u: { id: string }) => u.id);
        assert.deepEqual(await members(), [first.id]);
        const second = (await h.admin('POST', '/universities', { name: unique('Second Member'), consortium_id: consortium.id })).json;
        assert.deepEqual(await members(), [first.id, second.id].sort());
      });

      test('filters: universities by consortium and name, campuses and templates by university', async () => {
        const members = await h.sql<{ id: string }>('select id from universities where consortium_id = $1 order by created_at, id', [consortiumId]);
        const byConsortium = await allPages(`/universities?consortium_id=${consortiumId}`);
        assert.deepEqual(byConsortium.items.map((u) => u.id), members.map((u) => u.id));
        const byName = await allPages('/universities?name=NORTHFIELD');
        assert.ok(byName.items.some((u) => u.id === north.id));
        assert.ok(byName.items.every((u) => u.name.toLowerCase().includes('northfield')), JSON.stringify(byName.items));
        assert.ok(byName.items.length < (await allPages('/universities')).items.length);
        const campuses = await allPages(`/campuses?university_id=${north.id}&name=main`);
        assert.ok(campuses.items.length > 0);
        assert.ok(campuses.items.every((c) => c.university_id === north.id && /main/i.test(c.name)));
        const templates = await allPages(`/resume-templates?university_id=${north.id}`);
        const stored = await h.sql<{ n: number }>('select count(*)::int as n from resume_templates where university_id = $1', [north.id]);
        assert.equal(templates.items.length, stored[0].n);
      });

      test('accounts: staff and self-serve only, filtered by university, kind and address; the operator sees the address', async () => {
        const university = (await h.admin('POST', '/universities', { name: unique('Account University') })).json;
        const staff = (await h.admin('POST', '/accounts', { email: `Staff.${backend}@Account.edu`, kind: 'staff', university_id: university.id })).json;
        const selfServe = (await h.admin('POST', '/accounts', { email: `self.${backend}@example.com`, kind: 'self_serve', university_id: university.id })).json;
        const all = await h.admin('GET', `/accounts?university_id=${university.id}`);
        assert.deepEqual(all.json.items.map((a: any) => a.id), [staff.id, selfServe.id]);
        assert.deepEqual(Object.keys(all.json.items[0]).sort(), ['created_at', 'email', 'id', 'kind', 'university_id']);
        assert.equal(all.json.items[0].email, `staff.${backend}@account.edu`);
        const kind = await h.admin('GET', `/accounts?university_id=${university.id}&kind=self_serve`);
        assert.deepEqual(kind.json.items.map((a: any) => a.id), [selfServe.id]);
        const email = await h.admin('GET', `/accounts?email=${encodeURIComponent(` STAFF.${backend}@ACCOUNT.EDU `)}`);
        assert.deepEqual(email.json.items.map((a: any) => a.id), [staff.id]);
        // The address as the service keys it (emailKey): the final sigma as σ, whatever case it is sent in.
        const greek = (await h.admin('POST', '/accounts', { email: `ΣΟΦΙΑΣ.${backend}@account.edu`, kind: 'staff', university_id: university.id })).json;
        for (const spelling of [`σοφιας.${backend}@account.edu`, `ΣΟΦΙΑΣ.${backend}@ACCOUNT.EDU`]) {
          const found = await h.admin('GET', `/accounts?email=${encodeURIComponent(spelling)}`);
          assert.deepEqual(found.json.items.map((a: any) => a.id), [greek.id], spelling);
        }

        const [student] = await h.sql<{ id: string }>(`select id from accounts where kind = 'student' limit 1`);
        expectError(await h.admin('GET', `/accounts/${student.id}`), 404, 'NOT_FOUND');
        expectError(await h.admin('GET', '/accounts?kind=student'), 400, 'INVALID_PARAMETER', /kind/);
        const everyPage = await allPages('/accounts?limit=1000');
        assert.ok(everyPage.items.every((a) => a.kind !== 'student'));
      });

      test('an account\'s address is held to the partners\' rule: Unicode is taken, a double dot or an invisible character refused', async () => {
        const university = (await h.admin('POST', '/universities', { name: unique('Address University') })).json;
        const taken = await h.admin('POST', '/accounts', { email: `josé.${backend}@example.edu`, kind: 'staff', university_id: university.id });
        assert.equal(taken.status, 201, JSON.stringify(taken.json));
        for (const refused of [`a..b.${backend}@example.edu`, `zero\u200bwidth.${backend}@example.edu`, `x.${backend}@-example.edu`]) {
          expectError(await h.admin('POST', '/accounts', { email: refused, kind: 'staff', university_id: university.id }), 400, 'INVALID_BODY', /email/);
        }
      });

      test('tokens: scope with its name, filters by university, consortium and active; never the secret or its hash', async () => {
        const university = (await h.admin('POST', '/universities', { name: unique('Token University') })).json;
        const active = (await h.admin('POST', '/tokens', { university_id: university.id, can_write: true, label: 'sync' })).json;
        const revoked = (await h.admin('POST', '/tokens', { university_id: university.id })).json;
        const expired = (await h.admin('POST', '/tokens', { university_id: university.id, expires_at: '2999-01-01T00:00:00Z' })).json;
        assert.equal((await h.admin('DELETE', `/tokens/${revoked.id}`)).status, 204);
        const revokedAt = (await h.admin('GET', `/tokens/${revoked.id}`)).json.revoked_at;
        // A retried revocation succeeds and changes nothing: it was 404, which names an unknown id.
        assert.equal((await h.admin('DELETE', `/tokens/${revoked.id}`)).status, 204);
        assert.equal((await h.admin('GET', `/tokens/${revoked.id}`)).json.revoked_at, revokedAt);
        expectError(await h.admin('DELETE', `/tokens/${randomUUID()}`), 404, 'NOT_FOUND', /No token has that id/);
        await h.sql(`update tokens set expires_at = now() - interval '1 second' where id = $1`, [expired.id]);

        const listed = await h.admin('GET', `/tokens?university_id=${university.id}`);
        assert.deepEqual(listed.json.items.map((t: any) => t.id), [active.id, revoked.id, expired.id]);
        const [first] = listed.json.items;
        assert.deepEqual(Object.keys(first).sort(), TOKEN_KEYS);
        assert.deepEqual(first.scope, { kind: 'university', id: university.id, name: university.name });
        assert.deepEqual([first.label, first.can_write, first.revoked_at, first.last_used_at], ['sync', true, null, null]);
        assert.match(listed.json.items[1].revoked_at, RFC3339);
        for (const secret of [active.token, revoked.token, expired.token]) {
          assert.ok(!listed.body.includes(secret));
          assert.ok(!listed.body.includes(createHash('sha256').update(secret).digest('hex')));
        }

        const activeOnly = await h.admin('GET', `/tokens?university_id=${university.id}&active=true`);
        assert.deepEqual(activeOnly.json.items.map((t: any) => t.id), [active.id]);
        const inactive = await h.admin('GET', `/tokens?university_id=${university.id}&active=false`);
        assert.deepEqual(inactive.json.items.map((t: any) => t.id), [revoked.id, expired.id]);

        const consortiumTokens = await allPages(`/tokens?consortium_id=${consortiumId}`);
        assert.ok(consortiumTokens.items.length > 0);
        for (const token of consortiumTokens.items) {
          assert.deepEqual(token.scope, { kind: 'consortium', id: consortiumId, name: h.demo!.consortium.name });
          assert.equal(token.university_id, null);
        }
      });

      test('a malformed filter, an unknown parameter or a forged cursor is 400 with the documented body', async () => {
        expectError(await h.admin('GET', '/tokens?university_id=abc'), 400, 'INVALID_PARAMETER', /university_id/);
        expectError(await h.admin('GET', '/tokens?active=yes'), 400, 'INVALID_PARAMETER', /active/);
        expectError(await h.admin('GET', `/tokens?univeristy_id=${north.id}`), 400, 'INVALID_PARAMETER', /univeristy_id/);
        expectError(await h.admin('GET', `/tokens?university_id=${north.id}&university_id=${north.id}`), 400, 'INVALID_PARAMETER');
        expectError(await h.admin('GET', '/campuses?limit=0'), 400, 'INVALID_PARAMETER', /limit/);
        expectError(await h.admin('GET', '/campuses?limit=ten'), 400, 'INVALID_PARAMETER', /limit/);
        // A whole number in digits, not whatever Number() reads as one.
        for (const limit of ['0x2', '2e0', '%2B5', '5.0', '%205']) {
          expectError(await h.admin('GET', `/campuses?limit=${limit}`), 400, 'INVALID_PARAMETER', /querystring\/limit must be a whole number written in digits/);
        }
        assert.equal((await h.admin('GET', '/campuses?limit=5')).status, 200);
        expectError(await h.admin('GET', '/consortia?name='), 400, 'INVALID_PARAMETER', /name/);
        const uuid = '00000000-0000-4000-8000-000000000000';
        // Shaped like a cursor, but no instant PostgreSQL (or this service) would render.
        const impossible = ['2026-02-30T00:00:00+00:00', '0000-01-01T00:00:00+00:00', '2026-01-01T24:00:00+00:00', '2026-13-01T00:00:00+00:00',
          '2026-01-01T00:00:60+00:00', '2026-01-01T00:00:00+99:00'];
        const forged = [
          'nonsense', Buffer.from('["yesterday","x"]').toString('base64url'), Buffer.from('{}').toString('base64url'),
          ...impossible.map((createdAt) => Buffer.from(JSON.stringify([createdAt, uuid])).toString('base64url')),
        ];
        for (const cursor of forged) {
          expectError(await h.admin('GET', `/campuses?after=${cursor}`), 400, 'INVALID_PARAMETER', /after/);
        }
      });

      test('listing needs the operator key', async () => {
        const res = await h.request({ method: 'GET', url: '/admin/v1/tokens', headers: { authorization: `Bearer ${north.read_token}` } });
        expectError(res, 401, 'UNAUTHORIZED');
      });
    });

    test('a campus is named once per university, as a template is; consortia, like universities, may share a name; a blank name is refused', async () => {
      const campus = unique('Harbour campus');
      assert.equal((await h.admin('POST', '/campuses', { university_id: north.id, name: campus })).status, 201);
      // Named on Citus too, which passes the worker's error on without the constraint's fields.
      expectError(await h.admin('POST', '/campuses', { university_id: north.id, name: campus }), 409, 'CONFLICT', /^A record with name ".*" already exists\.$/);
      const missing = '00000000-0000-4000-8000-000000000003';
      expectError(await h.admin('POST', '/campuses', { university_id: missing, name: campus }), 409, 'INVALID_REFERENCE', new RegExp(`^university_id ${missing} does not exist\\.$`));
      assert.equal((await h.admin('POST', '/campuses', { university_id: h.demo!.universities[1].id, name: campus })).status, 201);
      const consortium = unique('Lakes consortium');
      assert.equal((await h.admin('POST', '/consortia', { name: consortium })).status, 201);
      assert.equal((await h.admin('POST', '/consortia', { name: consortium })).status, 201);
      // Optional text too: null leaves it empty, blank is refused as a partner's optional text is.
      for (const [url, body] of [['/consortia', { name: '   ' }], ['/campuses', { university_id: north.id, name: ' ' }], ['/universities', { name: '  ' }],
        ['/universities', { name: unique('Blank short name'), short_name: '   ' }], ['/campuses', { university_id: north.id, name: unique('Blank city'), city: '' }]] as const) {
        expectError(await h.admin('POST', url, body), 400, 'INVALID_BODY');
      }
      assert.equal((await h.sql('select id from campuses where university_id = $1 and name = $2', [north.id, campus])).length, 1);
      // Stored trimmed, so that a partner's cohort row, read trimmed, can name it.
      const spaced = await h.admin('POST', '/campuses', { university_id: north.id, name: `  ${campus} 2 ` });
      assert.deepEqual([spaced.status, spaced.json.name], [201, `${campus} 2`]);
      const cohort = {
        university_id: north.id, name: '   ', display_name: 'App', program: 'P', degree: 'BSc',
        start_date: '2030-09-01', end_date: '2033-06-30', intake_year: 2030, intake_term: 'Fall',
      };
      expectError(await h.admin('POST', '/cohorts', cohort), 400, 'INVALID_BODY');
      const created = await h.admin('POST', '/cohorts', { ...cohort, name: ` ${unique('spaced cohort')} `, campus_name: ` ${campus} 2` });
      assert.equal(created.status, 201, created.body);
      assert.equal(created.json.name, created.json.name.trim());
      // Reported in review: the create answered the operator's own list of columns (no campus_name,
      // student_count or updated_at); it answers the cohort as a partner's read of it does.
      const [read] = (await h.get(`/v1/cohorts?id=eq.${created.json.id}`, north.read_token)).json;
      assert.deepEqual(created.json, read);
      assert.deepEqual([read.campus_name, read.student_count], [`${campus} 2`, 0]);
    });

    test('an app-side cohort may repeat a name, but its dates, campus and templates are checked as a partner\'s create is', async () => {
      const cohort = {
        university_id: north.id, name: unique('app cohort'), display_name: 'App', program: 'P', degree: 'BSc',
        start_date: '2030-09-01', end_date: '2033-06-30', intake_year: 2030, intake_term: 'Fall',
      };
      const cohorts = async () => (await h.sql('select id from cohorts where university_id = $1 and name = $2', [north.id, cohort.name])).length;
      expectError(await h.admin('POST', '/cohorts', { ...cohort, end_date: '2030-09-01' }), 400, 'INVALID_DATE_RANGE', /end_date 2030-09-01 is not after start_date 2030-09-01/);
      // Year 0000 is no date, as for a partner's row: PostgreSQL would refuse it (22008).
      expectError(await h.admin('POST', '/cohorts', { ...cohort, start_date: '0000-09-01' }), 400, 'INVALID_BODY', /start_date/);
      expectError(await h.admin('POST', '/cohorts', { ...cohort, end_date: '2029-06-30' }), 400, 'INVALID_DATE_RANGE');
      expectError(await h.admin('POST', '/cohorts', { ...cohort, resume_template_names: ['No such template'] }), 400, 'UNKNOWN_TEMPLATE', /No such template/);
      expectError(await h.admin('POST', '/cohorts', { ...cohort, campus_name: 'Atlantis' }), 400, 'CAMPUS_NOT_FOUND');
      // The campus before the templates, as a partner's row is checked.
      expectError(await h.admin('POST', '/cohorts', { ...cohort, campus_name: 'Atlantis', resume_template_names: ['No such template'] }), 400, 'CAMPUS_NOT_FOUND');
      assert.equal(await cohorts(), 0);
      const template = unique('template');
      assert.equal((await h.admin('POST', '/resume-templates', { university_id: north.id, name: template })).status, 201);
      expectError(await h.admin('POST', '/cohorts', { ...cohort, resume_template_names: [template, ' '] }), 400, 'INVALID_BODY');
      // Template names trimmed and each kept once, as a partner's are.
      const spaced = await h.admin('POST', '/cohorts', { ...cohort, resume_template_names: [` ${template} `, template] });
      assert.equal(spaced.status, 201, spaced.body);
      assert.deepEqual(spaced.json.resume_template_names, [template]);
      assert.equal((await h.admin('POST', '/cohorts', cohort)).status, 201);
      assert.equal(await cohorts(), 2);
    });

    describe('rotation', () => {
      async function freshToken(body: Record<string, unknown> = {}) {
        const issued = await h.admin('POST', '/tokens', { university_id: north.id, can_write: true, label: unique('rotating'), ...body });
        assert.equal(issued.status, 201);
        return issued.json;
      }
      const storeNow = async () => Date.parse((await h.sql<{ now: string }>(`select to_json(now()) #>> '{}' as now`))[0].now);

      test('a replacement with the same scope, can_write and label; the old one works through the default 24 h grace', async () => {
        const old = await freshToken();
        assert.equal((await h.get('/v1/campuses', old.token)).status, 200);
        const before = await storeNow();
        const rotated = await h.request({ method: 'POST', url: `/admin/v1/tokens/${old.id}/rotate`, headers: { authorization: 'Bearer test-admin-key' } });
        assert.equal(rotated.status, 201, rotated.body);
        const replacement = rotated.json;
        assert.notEqual(replacement.id, old.id);
        assert.match(replacement.token, /^pds_/);
        assert.deepEqual([replacement.scope, replacement.can_write, replacement.label, replacement.expires_at], [old.scope, true, old.label, null]);
        assert.deepEqual(Object.keys(replacement).sort(), [...TOKEN_KEYS, 'token'].sort());

        const after = await storeNow();
        const oldNow = (await h.admin('GET', `/tokens/${old.id}`)).json;
        const expiry = Date.parse(oldNow.expires_at);
        assert.ok(expiry >= before + 86_400_000 - 1 && expiry <= after + 86_400_000 + 1, oldNow.expires_at);
        assert.equal(oldNow.revoked_at, null);
        assert.equal((await h.get('/v1/campuses', old.token)).status, 200);
        assert.equal((await h.get('/v1/campuses', replacement.token)).status, 200);
      });

      test('grace_seconds 0 stops the old token at once, even though this instance had it cached', async () => {
        const old = await freshToken();
        assert.equal((await h.get('/v1/campuses', old.token)).status, 200);
        const rotated = await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: 0 });
        assert.equal(rotated.status, 201);
        expectError(await h.get('/v1/campuses', old.token), 401, 'UNAUTHORIZED');
        assert.equal((await h.get('/v1/campuses', rotated.json.token)).status, 200);
      });

      test('the grace never extends an expiry that comes sooner; the replacement may get its own', async () => {
        const soon = new Date(Date.now() + 3_600_000).toISOString();
        const old = await freshToken({ expires_at: soon });
        const before = (await h.admin('GET', `/tokens/${old.id}`)).json.expires_at;
        const rotated = await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: 7_200, expires_at: '2999-01-01T00:00:00Z' });
        assert.equal(rotated.status, 201);
        assert.equal(Date.parse(rotated.json.expires_at), Date.parse('2999-01-01T00:00:00Z'));
        assert.equal((await h.admin('GET', `/tokens/${old.id}`)).json.expires_at, before);
      });

      test('rotating a revoked or expired token is 409 TOKEN_NOT_ACTIVE, an unknown one 404', async () => {
        const revoked = await freshToken();
        await h.admin('DELETE', `/tokens/${revoked.id}`);
        expectError(await h.admin('POST', `/tokens/${revoked.id}/rotate`, {}), 409, 'TOKEN_NOT_ACTIVE', /revoked/);
        const expired = await freshToken();
        await h.sql(`update tokens set expires_at = now() - interval '1 second' where id = $1`, [expired.id]);
        expectError(await h.admin('POST', `/tokens/${expired.id}/rotate`, {}), 409, 'TOKEN_NOT_ACTIVE', /expired/);
        expectError(await h.admin('POST', '/tokens/00000000-0000-4000-8000-000000000000/rotate', {}), 404, 'NOT_FOUND');
        expectError(await h.admin('POST', '/tokens/nope/rotate', {}), 400, 'INVALID_PARAMETER');
        const stored = await h.sql<{ n: number }>('select count(*)::int as n from tokens where label = $1', [revoked.label]);
        assert.equal(stored[0].n, 1);
      });

      test('grace_seconds is bounded by LIMITS, and expires_at must be in the future', async () => {
        const old = await freshToken();
        expectError(await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: LIMITS.rotationGraceSeconds + 1 }), 400, 'INVALID_BODY', /grace_seconds/);
        expectError(await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: -1 }), 400, 'INVALID_BODY', /grace_seconds/);
        expectError(await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: 'soon' }), 400, 'INVALID_BODY', /grace_seconds/);
        expectError(await h.admin('POST', `/tokens/${old.id}/rotate`, { expires_at: '2020-01-01T00:00:00Z' }), 400, 'INVALID_BODY', /expires_at/);
        assert.equal((await h.admin('GET', `/tokens/${old.id}`)).json.expires_at, null);
        const longest = await h.admin('POST', `/tokens/${old.id}/rotate`, { grace_seconds: LIMITS.rotationGraceSeconds });
        assert.equal(longest.status, 201);
      });
    });
  });
}
