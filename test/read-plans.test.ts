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

test('a read naming no derived column comes from the resource\'s table; one naming one, in its output, a filter, a logic tree or the order, from its read view', () => {
  const relationOf = (resource: string, queryString: string) => planRead(resourcesByName.get(resource)!, parseReadRequest({ queryString, method: 'GET' })).relation;
  assert.equal(relationOf('students', 'select=id,email,first_name,last_name&order=id&limit=100'), 'students');
  assert.equal(relationOf('students', 'select=id,graduation_date&last_name=in.(Smith,Kim)&is_alumni=is.false&order=last_name'), 'students');
  assert.equal(relationOf('students', ''), 'students_read');
  assert.equal(relationOf('students', 'select=id,secondary_emails'), 'students_read');
  assert.equal(relationOf('students', 'select=id&secondary_emails=cs.{a@b.org}'), 'students_read');
  assert.equal(relationOf('cohorts', 'select=id&or=(name.eq.x,and(campus_name.eq.y,id.not.is.null))'), 'cohorts_read');
  assert.equal(relationOf('cohorts', 'select=id&order=student_count.desc'), 'cohorts_read');
  assert.equal(relationOf('cohorts', 'select=id,name,campus_id'), 'cohorts');
  assert.equal(relationOf('jobs', 'select=id'), 'jobs');
});
