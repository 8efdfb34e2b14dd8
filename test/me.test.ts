import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { LIMITS } from '../src/limits.ts';
import { Harness, storeBackends } from './support/harness.ts';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}$/;
const ME_KEYS = ['can_write', 'created_at', 'expires_at', 'id', 'label', 'limits', 'rate_limits', 'scope'];
const READS_PER_MINUTE = 321;
const WRITES_PER_MINUTE = 45;

for (const backend of storeBackends()) {
  describe(`GET /v1/me on ${backend}`, () => {
    let h: Harness;
    let north: { id: string; name: string; read_token: string; write_token: string };

    before(async () => {
      h = await Harness.start(backend, {
        demoStudents: 10, settings: { readLimitPerMin: READS_PER_MINUTE, writeLimitPerMin: WRITES_PER_MINUTE },
      });
      north = h.demo!.universities[0];
    });
    after(() => h.close());

    const tokenId = async (secret: string) => (await h.sql<{ id: string }>(
      `select id from tokens where token_hash = $1`, [createHash('sha256').update(secret).digest('hex')]))[0].id;

    test('a write token of one university: its id, scope, write permission, expiry and limits, never the secret', async () => {
      const res = await h.get('/v1/me', north.write_token);
      assert.equal(res.status, 200, res.body);
      assert.deepEqual(Object.keys(res.json).sort(), ME_KEYS);
      assert.equal(res.json.id, await tokenId(north.write_token));
      assert.equal(res.json.label, 'demo write');
      assert.deepEqual(res.json.scope, { kind: 'university', id: north.id, name: north.name, universities: [{ id: north.id, name: north.name }] });
      assert.equal(res.json.can_write, true);
      assert.match(res.json.created_at, RFC3339);
      assert.equal(res.json.expires_at, null);
      assert.deepEqual(res.json.rate_limits, { reads_per_minute: READS_PER_MINUTE, writes_per_minute: WRITES_PER_MINUTE });
      assert.equal(res.json.limits.batch_rows, LIMITS.batchRows);
      assert.equal(res.json.limits.rows_per_response, LIMITS.rowsPerResponse);
      assert.equal(res.json.limits.body_bytes, LIMITS.bodyBytes);
      assert.equal(res.json.limits.query_string_bytes, LIMITS.maxQueryStringBytes);
      assert.ok(!res.body.includes(north.write_token));
      assert.ok(!res.body.includes(createHash('sha256').update(north.write_token).digest('hex')));
    });

    test('a consortium token: the consortium and every member university; it cannot write', async () => {
      const { consortium } = h.demo!;
      const res = await h.get('/v1/me', consortium.read_token);
      assert.equal(res.status, 200);
      const members = await h.sql<{ id: string; name: string }>('select id, name from universities where consortium_id = $1 order by name, id', [consortium.id]);
      assert.ok(members.length > 1);
      assert.deepEqual(res.json.scope, { kind: 'consortium', id: consortium.id, name: consortium.name, universities: members });
      assert.equal(res.json.can_write, false);
      // Its write attempts are refused 403, and counted against the write limit all the same.
      assert.equal(res.json.rate_limits.writes_per_minute, WRITES_PER_MINUTE);
    });

    test('a read token with an expiry shows it, in the one timestamp format', async () => {
      const issued = await h.admin('POST', '/tokens', { university_id: north.id, expires_at: '2999-01-01T00:00:00Z', label: 'expiring' });
      const res = await h.get('/v1/me', issued.json.token);
      assert.equal(res.status, 200);
      assert.equal(res.json.expires_at, '2999-01-01T00:00:00+00:00');
      assert.deepEqual([res.json.id, res.json.label, res.json.can_write], [issued.json.id, 'expiring', false]);
      assert.equal(res.json.created_at, issued.json.created_at);
    });

    test('needs a valid token; counts against the read limit; other methods are 405', async () => {
      const missing = await h.get('/v1/me', null);
      assert.equal(missing.status, 401);
      assert.equal(missing.json.code, 'UNAUTHORIZED');
      const res = await h.get('/v1/me', north.read_token);
      assert.equal(res.headers['ratelimit-limit'], String(READS_PER_MINUTE));
      const remaining = Number(res.headers['ratelimit-remaining']);
      const next = await h.get('/v1/me', north.read_token);
      assert.equal(Number(next.headers['ratelimit-remaining']), remaining - 1);
      for (const method of ['POST', 'PUT', 'DELETE'] as const) {
        const refused = await h.request({ method, url: '/v1/me', headers: { authorization: `Bearer ${north.read_token}` } });
        assert.equal(refused.status, 405, method);
        assert.equal(refused.headers.allow, 'GET, HEAD');
        assert.equal(refused.json.code, 'METHOD_NOT_ALLOWED');
      }
      assert.equal((await h.request({ method: 'HEAD', url: '/v1/me', headers: { authorization: `Bearer ${north.read_token}` } })).status, 200);
    });

    test('Accept is honoured: JSON or a wildcard is answered, anything else is 406 PGRST107', async () => {
      for (const accept of ['application/json', '*/*', 'application/*', 'text/csv;q=0.5, application/json']) {
        const res = await h.get('/v1/me', north.read_token, { accept });
        assert.equal(res.status, 200, accept);
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      }
      for (const accept of ['application/xml', 'text/csv', 'application/vnd.pgrst.object+json', 'application/json;q=0']) {
        const res = await h.get('/v1/me', north.read_token, { accept });
        assert.equal(res.status, 406, `${accept}: ${res.body}`);
        assert.equal(res.json.code, 'PGRST107');
        assert.equal(res.json.hint, 'Accept application/json.');
      }
    });

    test('the route documents itself: operationId getMe with a response schema', async () => {
      const document = (await h.get('/v1/openapi.json', null)).json;
      const operation = document.paths['/me']?.get;
      assert.equal(operation?.operationId, 'getMe');
      assert.ok(operation.responses['200']);
    });
  });
}
