/**
 * The OpenAPI description as served: valid OpenAPI 3.1 by a real validator and by redocly lint,
 * read off the registry, the write shapes, the row codes, the catalogue and the SQLSTATE table,
 * and in step with the routes the app registers.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FastifyInstance } from 'fastify';
import { ERRORS } from '../src/errors.ts';
import { LIMITS } from '../src/limits.ts';
import { passThroughStatus } from '../src/http/sqlstates.ts';
import { resources } from '../src/resources/registry.ts';
import { WRITABLE_RESOURCES, WRITE_SHAPES } from '../src/resources/write-shapes.ts';
import { COHORT_ROW_CODES, STUDENT_ROW_CODES } from '../src/writes/row-codes.ts';
import { Harness } from './support/harness.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Method and URL of every route, read off Fastify's route tree (find-my-way's pretty print). */
function registeredRoutes(app: FastifyInstance): string[] {
  const prefixes: string[] = [];
  const routes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([^)]+)\))?$/.exec(line);
    if (!match) continue;
    prefixes.length = match[1].length / 4;
    prefixes.push(match[2]);
    if (match[3]) routes.push(...match[3].split(', ').map((method) => `${method} ${prefixes.join('')}`));
  }
  return routes;
}

/** Runs redocly lint on a document; its JSON report. */
async function redoclyLint(document: unknown): Promise<{ totals: Record<string, number>; problems: unknown[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'pds-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    await writeFile(file, JSON.stringify(document));
    const stdout = await new Promise<string>((resolve) => {
      execFile(join(root, 'node_modules/.bin/redocly'), ['lint', file, '--format=json', `--config=${join(root, 'redocly.yaml')}`], {
        cwd: root, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }, maxBuffer: 64 * 1024 * 1024,
      }, (_error, out) => resolve(out)); // a non-zero exit is a report with problems, read below
    });
    return JSON.parse(stdout);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('the OpenAPI description', () => {
  let h: Harness;
  let doc: any;
  const resolve = (ref: string) => ref.replace('#/', '').split('/').reduce((node, key) => node[key.replaceAll('~1', '/')], doc);

  before(async () => {
    h = await Harness.start('pglite', { demoStudents: 1 });
    const res = await h.get('/v1/openapi.json', null);
    assert.equal(res.status, 200);
    doc = res.json;
  });
  after(() => h.close());

  test('is OpenAPI 3.1.0 and valid by the OpenAPI 3.1 schema validator, which refuses a broken one', async () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(await new Validator().validate(structuredClone(doc)), { valid: true });
    const { info: _info, ...withoutInfo } = structuredClone(doc);
    assert.equal((await new Validator().validate(withoutInfo)).valid, false);
  });

  test('redocly lint reports no problem, and finds them in a broken copy', async () => {
    const report = await redoclyLint(doc);
    assert.deepEqual(report.problems, []);
    assert.equal(report.totals.errors, 0);
    assert.equal(report.totals.warnings, 0);
    const broken = structuredClone(doc);
    delete broken.paths['/students'].get.operationId;
    broken.servers = [];
    const brokenReport = await redoclyLint(broken);
    assert.ok(brokenReport.totals.errors >= 2, JSON.stringify(brokenReport.totals));
  });

  test('every route under /v1 has its operation or only refuses its method, and every operation has its route', async () => {
    const base = doc.servers[0].url;
    const documented = Object.entries<any>(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).filter((key) => key !== 'servers').map((method) => ({ method: method.toUpperCase(), url: item.servers ? path : `${base}${path}` })));
    for (const { method, url } of documented) assert.ok(h.app.hasRoute({ method, url }), `${method} ${url} is documented but not served`);
    const operations = new Set(documented.map(({ method, url }) => `${method} ${url}`));
    // Fastify serves HEAD beside each GET; the reads document theirs (checked against their GET below).
    const served = registeredRoutes(h.app).filter((route) => route.split(' ')[1].startsWith(`${base}/`) && !route.startsWith('HEAD '));
    assert.ok(served.includes(`GET ${base}/student_engagement_monthly`), 'nested routes are read');
    for (const route of served.filter((r) => !operations.has(r))) {
      const [method, url] = route.split(' ');
      const res = await h.request({
        method: method as 'GET', url: url.replace(':resource', 'no_such_resource').replace(':name', 'no_such_function').replace('*', 'x'), payload: '{}',
        headers: { authorization: `Bearer ${h.demo!.universities[0].read_token}`, 'content-type': 'application/json' },
      });
      assert.ok(['METHOD_NOT_ALLOWED', 'PGRST205', 'PGRST125', 'PGRST202'].includes(res.json?.code), `${route} is served but neither documented nor a refusal: ${res.status}`);
    }
    for (const operation of operations) {
      const [method, url] = operation.split(' ');
      assert.ok(served.includes(method === 'HEAD' ? `GET ${url}` : operation) || !url.startsWith(`${base}/`), operation);
    }
  });

  test('the operator API stays out; the probes resolve at the root and need no token', () => {
    assert.ok(!JSON.stringify(doc.paths).includes('/admin'));
    for (const probe of ['/healthz', '/readyz']) {
      assert.deepEqual(doc.paths[probe].servers.map((s: any) => s.url), ['/']);
      assert.deepEqual(doc.paths[probe].get.security, []);
    }
    assert.equal(doc.servers[0].url, '/v1');
  });

  test('every operation has a unique operationId; bearer security, servers, license, contact and tags are there', () => {
    const operations = Object.values<any>(doc.paths).flatMap((item) => Object.entries<any>(item).filter(([key]) => key !== 'servers').map(([, op]) => op));
    const ids = operations.map((op) => op.operationId);
    assert.ok(ids.every((id) => typeof id === 'string' && id.length > 0));
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ['getMe', 'listStudents', 'listStudentEngagementMonthly', 'upsertStudents', 'createStudents', 'updateStudents', 'upsertCohorts', 'createCohorts', 'updateCohorts']) {
      assert.ok(ids.includes(id), id);
    }
    assert.deepEqual(doc.components.securitySchemes.bearer, { ...doc.components.securitySchemes.bearer, type: 'http', scheme: 'bearer' });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
    assert.ok(doc.info.license.name && doc.info.contact.name);
    const tags = new Set(doc.tags.map((t: any) => t.name));
    assert.ok(operations.every((op) => op.tags.every((tag: string) => tags.has(tag))));
  });

  test('a named row schema per resource, the singular of its name: every column a property, none required (select narrows rows), nullability as a type list', () => {
    const rowNames = resources.map((resource) => doc.paths[`/${resource.name}`].get.responses['200'].content['application/json'].schema.items.$ref.split('/').pop());
    assert.deepEqual(rowNames, resources.map((resource) => ({
      students: 'Student', advisor_students: 'AdvisorStudent', cohorts: 'Cohort', campuses: 'Campus', resumes: 'Resume',
      student_profiles: 'StudentProfile', onboarding: 'Onboarding', alumni: 'Alumni', jobs: 'Job', universities: 'University',
      student_engagement: 'StudentEngagement', student_engagement_monthly: 'StudentEngagementMonthly', companies: 'Company', events: 'Event',
    } as Record<string, string>)[resource.name]));
    for (const resource of resources) {
      const list = doc.paths[`/${resource.name}`].get.responses['200'].content;
      const row = resolve(list['application/json'].schema.items.$ref);
      assert.equal(list['application/vnd.pgrst.object+json'].schema.$ref, list['application/json'].schema.items.$ref);
      assert.ok(list['text/csv'], `${resource.name} documents CSV`);
      assert.equal(row.required, undefined);
      assert.deepEqual(Object.keys(row.properties), resource.columns.map((c) => c.name));
      assert.match(row.description, /select/);
      for (const column of resource.columns.filter((c) => c.type !== 'jsonb')) {
        const types = [row.properties[column.name].type].flat();
        assert.equal(types.includes('null'), column.nullable, `${resource.name}.${column.name}`);
        assert.equal(row.properties[column.name].nullable, undefined, 'no OpenAPI 3.0 nullable');
      }
    }
  });

  test('reads take typed query parameters, a filter per column, Range and Prefer, and document their headers', () => {
    const parameter = (p: any) => (p.$ref ? resolve(p.$ref) : p);
    for (const resource of resources) {
      const get = doc.paths[`/${resource.name}`].get;
      const parameters = get.parameters.map(parameter);
      const named = (name: string) => parameters.find((p: any) => p.name === name);
      assert.equal(named('limit').schema.type, 'integer');
      assert.equal(named('offset').schema.type, 'integer');
      for (const name of ['select', 'order', 'or', 'and']) assert.equal(named(name).in, 'query', name);
      for (const name of ['Range', 'Prefer']) assert.equal(named(name).in, 'header', name);
      for (const column of resource.columns) assert.equal(named(column.name).schema.$ref, '#/components/schemas/Filter', column.name);
      assert.equal(new Set(parameters.map((p: any) => `${p.in} ${p.name}`)).size, parameters.length);
      assert.deepEqual(Object.keys(get.responses['200'].headers).sort(),
        ['Content-Range', 'Preference-Applied', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'X-Request-Id']);
      assert.ok(get.responses['406'], 'Accept refusals are documented');
      // HEAD: the same parameters and headers, no body.
      const head = doc.paths[`/${resource.name}`].head;
      assert.deepEqual(head.parameters, get.parameters);
      for (const status of ['200', '206']) {
        assert.deepEqual(head.responses[status].headers, get.responses[status].headers, status);
        assert.equal(head.responses[status].content, undefined, status);
      }
    }
    assert.ok(resolve(doc.paths['/students'].get.responses['429'].$ref).headers['Retry-After']);
    assert.ok(resolve(doc.paths['/students'].get.responses['503'].$ref).headers['Retry-After']);
  });

  test('batch bodies: a create row requires the create fields, a patch row its key alone, a cohort upsert row its key (the create fields on create only), and none closes its keys', () => {
    const rowOf = (resource: string, method: string) => {
      const envelope = resolve(doc.paths[`/${resource}`][method].requestBody.content['application/json'].schema.$ref);
      assert.equal(envelope.properties[resource].maxItems, LIMITS.batchRows);
      return resolve(envelope.properties[resource].items.$ref);
    };
    for (const resource of WRITABLE_RESOURCES) {
      const shape = WRITE_SHAPES[resource];
      const createFields = Object.entries(shape.fields).filter(([, field]) => field.requiredOnCreate).map(([name]) => name);
      assert.deepEqual(rowOf(resource, 'post').required, createFields, `post ${resource}`);
      assert.deepEqual(rowOf(resource, 'put').required, shape.put === 'create' ? createFields : [shape.key], `put ${resource}`);
      assert.deepEqual(rowOf(resource, 'patch').required, [shape.key]);
      for (const method of ['put', 'post', 'patch']) {
        const row = rowOf(resource, method);
        assert.deepEqual(Object.keys(row.properties), Object.keys(shape.fields));
        assert.equal(row.additionalProperties, undefined);
        assert.match(row.description, /dropped_fields/);
      }
    }
    // The spec's own lists of what a create needs.
    assert.deepEqual(rowOf('students', 'put').required.sort(), ['cohort_name', 'email', 'first_name', 'is_alumni', 'last_name']);
    assert.deepEqual(rowOf('cohorts', 'post').required.sort(), ['degree', 'display_name', 'end_date', 'intake_term', 'intake_year', 'name', 'program', 'start_date']);
    assert.deepEqual(rowOf('cohorts', 'put').required, ['name']);
    assert.match(rowOf('cohorts', 'put').description, /a row that creates needs every field a create needs/);
    // What the row rules refuse, the schemas refuse: a blank text field, a year out of range.
    const refuses = (schema: any, value: unknown) => !new Ajv2020({ strict: false }).validate(schema, value);
    const [student, cohort] = [rowOf('students', 'patch'), rowOf('cohorts', 'patch')];
    for (const [schema, blank] of [[student.properties.external_id, '  '], [cohort.properties.campus_name, ''], [student.properties.first_name, ' ']]) {
      assert.ok(refuses(schema, blank), JSON.stringify(schema));
      assert.ok(!refuses(schema, 'A-1'));
    }
    assert.ok(!refuses(student.properties.external_id, null), 'null clears it');
    assert.deepEqual([cohort.properties.intake_year.minimum, cohort.properties.intake_year.maximum], [1900, 2200]);
  });

  test('batch responses: every field always sent is required, the row codes an enumeration, the key nullable when rejected', () => {
    const ROW_CODES = { students: STUDENT_ROW_CODES, cohorts: COHORT_ROW_CODES };
    for (const resource of WRITABLE_RESOURCES) {
      const key = WRITE_SHAPES[resource].key;
      for (const method of ['put', 'post', 'patch']) {
        const response = resolve(doc.paths[`/${resource}`][method].responses['200'].content['application/json'].schema.$ref);
        assert.deepEqual(response.required, Object.keys(response.properties));
        assert.deepEqual(resolve(response.properties.counts.$ref).required, ['created', 'updated', 'unchanged', 'rejected']);
        const [written, rejected] = response.properties.results.items.oneOf.map((s: any) => resolve(s.$ref));
        assert.deepEqual(written.required.slice(0, 3), [key, 'status', 'id']);
        assert.deepEqual(written.properties[key].type, 'string');
        assert.deepEqual(rejected.required, [key, 'status', 'code', 'message']);
        assert.deepEqual(rejected.properties[key].type, ['string', 'null']);
        assert.deepEqual(rejected.properties.code.enum, Object.keys(ROW_CODES[resource]));
      }
    }
  });

  test('every operation can meet a refusal of its method: 405 METHOD_NOT_ALLOWED with Allow, in the 4XX response', () => {
    const refused = doc.components.responses.RefusedRequest;
    assert.match(refused.description, /`METHOD_NOT_ALLOWED` \(405\)/);
    assert.equal(refused.headers.Allow.$ref, '#/components/headers/Allow');
    for (const item of Object.values<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        if (method !== 'servers') assert.equal(operation.responses['4XX'].$ref, '#/components/responses/RefusedRequest', method);
      }
    }
  });

  test('the error body: every field required, code an enumeration of the catalogue and the SQLSTATEs passed through', () => {
    const error = doc.components.schemas.Error;
    assert.deepEqual(error.required, ['code', 'message', 'details', 'hint']);
    const codes = new Set<string>(error.properties.code.enum);
    // The operator API's own codes stay out, as the operator API does.
    for (const [code, definition] of Object.entries(ERRORS)) assert.equal(codes.has(code), !('operatorOnly' in definition), code);
    for (const code of ['EMAIL_TAKEN', 'TOKEN_NOT_ACTIVE', 'CAMPUS_NOT_FOUND']) assert.ok(!codes.has(code), code);
    assert.ok(!resolve(doc.paths['/students'].put.responses['409'].$ref).description.includes('EMAIL_TAKEN'));
    for (const code of ['22P02', '22007', '2201B', '42883', '42601']) assert.ok(codes.has(code), `${code} passes through`);
    for (const code of ['42501', '23505', '40001', '57014', '08006']) assert.ok(!codes.has(code), `${code} is answered with a catalogue code`);
    for (const code of codes) assert.ok(Object.hasOwn(ERRORS, code) || passThroughStatus(code) !== undefined, code);
    assert.deepEqual(error.properties.details.type, ['string', 'null']);
  });
});
