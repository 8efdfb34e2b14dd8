import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/errors.ts';
import { planRead } from '../src/query/plan.ts';
import { readPlanOf } from '../src/query/read-plans.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import type { ReadRequestInput } from '../src/query/read-request.ts';
import { resourcesByName } from '../src/resources/registry.ts';

const students = resourcesByName.get('students')!;
const cohorts = resourcesByName.get('cohorts')!;
const page: ReadRequestInput = { queryString: 'select=id,email&order=id&limit=100', method: 'GET' };

test('a repeated read request is planned once, and its plan is the one parsing and planning give', () => {
  const first = readPlanOf(students, page);
  assert.equal(readPlanOf(students, { ...page }), first);
  assert.deepEqual(first, planRead(students, parseReadRequest(page)));
});

test('every input of the plan is part of its key: resource, method, Range, Prefer (one header or several), Accept, query string', () => {
  const variants: [typeof students, ReadRequestInput][] = [
    [students, page],
    [cohorts, { ...page, queryString: 'order=id&limit=100' }],
    [students, { ...page, method: 'HEAD' }],
    [students, { ...page, rangeHeader: '0-9' }],
    [students, { ...page, preferHeader: 'count=exact' }],
    [students, { ...page, preferHeader: ['count=exact', 'handling=lenient'] }],
    [students, { ...page, acceptHeader: 'text/csv' }],
    [students, { ...page, queryString: 'select=id&order=id&limit=100' }],
  ];
  const plans = variants.map(([resource, input]) => readPlanOf(resource, input));
  assert.equal(new Set(plans).size, variants.length);
  for (const [i, [resource, input]] of variants.entries()) assert.deepEqual(plans[i], planRead(resource, parseReadRequest(input)));
});

test('a request that fails is refused each time it comes, not remembered', () => {
  const bad: ReadRequestInput = { queryString: 'select=no_such_column', method: 'GET' };
  for (let i = 0; i < 2; i++) assert.throws(() => readPlanOf(students, bad), ApiError);
});
