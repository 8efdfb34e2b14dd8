import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../src/errors.ts';
import { parseFilter, parseLogicTree } from '../src/query/filters.ts';
import { parseOrder, parseSelect } from '../src/query/query-params.ts';
import { canonicalQueryString, decodeQueryString } from '../src/query/query-string.ts';
import { parseReadRequest } from '../src/query/read-request.ts';
import { planPage, planRead } from '../src/query/plan.ts';
import { resourcesByName } from '../src/resources/registry.ts';

const field = (name: string) => ({ name, jsonPath: [] });
const parse = (queryString: string, headers: { range?: string; prefer?: string; accept?: string } = {}) =>
  parseReadRequest({ queryString, rangeHeader: headers.range, preferHeader: headers.prefer, acceptHeader: headers.accept, method: 'GET' });
/** The read planned against students: where the headers' refusals come, in PostgREST's order. */
const plan = (queryString: string, headers: { range?: string; prefer?: string; accept?: string } = {}) =>
  planRead(resourcesByName.get('students')!, parse(queryString, headers));

function assertApiError(fn: () => unknown, status: number, code: string) {
  assert.throws(fn, (error: unknown) => error instanceof ApiError && error.status === status && error.code === code);
}

describe('decoding the query string', () => {
  test('percent-decodes once and turns + into a space; %2C and , are the same character', () => {
    assert.deepEqual(decodeQueryString('name=eq.Ann+Lee&id=in.(1%2C2)&q=a%2Bb'), [['name', 'eq.Ann Lee'], ['id', 'in.(1,2)'], ['q', 'a+b']]);
  });
  test('the canonical query string: parameters in key order by their decoded keys, each as sent, repeats in their order, a key without = dropped', () => {
    assert.equal(canonicalQueryString('select=id&order=id&limit=2&email=not.is.null'), 'email=not.is.null&limit=2&order=id&select=id');
    assert.equal(canonicalQueryString('last_name=eq.b&%66irst_name=eq.a+b&last_name=neq.c&flag&id=gt.1'), '%66irst_name=eq.a+b&id=gt.1&last_name=eq.b&last_name=neq.c');
    assert.equal(canonicalQueryString(''), '');
  });
  // Reported in an audit: PostgREST separates parameters by `;` as by `&` (http-types' parseQueryReplacePlus).
  test('; separates parameters as & does; an escaped %3B is data', () => {
    assert.deepEqual(decodeQueryString('last_name=eq.Comma;limit=1&x=in.(a%3Bb)'), [['last_name', 'eq.Comma'], ['limit', '1'], ['x', 'in.(a;b)']]);
    assert.equal(canonicalQueryString('order=id;limit=2'), 'limit=2&order=id');
  });
  test('a key without = is dropped; one with an empty value is kept', () => {
    assert.deepEqual(decodeQueryString('debug&x='), [['x', '']]);
  });
  test('malformed escapes are kept as text rather than failing', () => {
    assert.deepEqual(decodeQueryString('name=eq.100%'), [['name', 'eq.100%']]);
  });
});

describe('filters', () => {
  test('the top-level value is the literal rest of the string', () => {
    assert.deepEqual(parseFilter(field('name'), 'eq.a.b,c(d)"x"').operation, { kind: 'compare', op: 'eq', quantifier: null, value: 'a.b,c(d)"x"' });
    assert.deepEqual(parseFilter(field('name'), 'eq.').operation, { kind: 'compare', op: 'eq', quantifier: null, value: '' });
  });
  test('not. negates once', () => {
    const filter = parseFilter(field('score'), 'not.gt.5');
    assert.equal(filter.negated, true);
    assertApiError(() => parseFilter(field('score'), 'not.not.gt.5'), 400, 'PGRST100');
  });
  test('operators are lower-case words from the fixed set', () => {
    for (const op of ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'match', 'imatch', 'isdistinct', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxr', 'nxl', 'adj']) {
      assert.equal(parseFilter(field('x'), `${op}.1`).operation.kind, 'compare', op);
    }
    assertApiError(() => parseFilter(field('x'), 'EQ.1'), 400, 'PGRST100');
    assertApiError(() => parseFilter(field('x'), 'equals.1'), 400, 'PGRST100');
    assertApiError(() => parseFilter(field('x'), '5'), 400, 'PGRST100');
  });
  test('in-lists: quoted elements with backslash escapes, spaces after commas are data', () => {
    assert.deepEqual(parseFilter(field('name'), 'in.( Bob, Alice,"Carol, Jr.","a\\"b\\\\c",\\x)').operation,
      { kind: 'in', values: ['Bob', ' Alice', 'Carol, Jr.', 'a"b\\c', '\\x'] });
    assert.deepEqual(parseFilter(field('id'), 'in.()').operation, { kind: 'in', values: [] });
    assert.deepEqual(parseFilter(field('id'), 'in.("")').operation, { kind: 'in', values: [] });
    assert.deepEqual(parseFilter(field('id'), 'in.( ,3)').operation, { kind: 'in', values: ['', '3'] });
    assertApiError(() => parseFilter(field('id'), 'in.(1,2'), 400, 'PGRST100');
    assertApiError(() => parseFilter(field('id'), 'in.("a"'), 400, 'PGRST100');
  });
  // Reported in review: PostgREST reads a quoted element whose closing quote is not followed by
  // `,` or `)` as unquoted text (pListElement); the service answered 400.
  test('in-lists: a quoted element not ended by its closing quote is unquoted text, quotes included, as PostgREST reads it', () => {
    assert.deepEqual(parseFilter(field('name'), 'in.("a"b,"c")').operation, { kind: 'in', values: ['"a"b', 'c'] });
    assert.deepEqual(parseFilter(field('name'), 'in.("a,"b")').operation, { kind: 'in', values: ['"a', 'b'] });
    assert.deepEqual(parseFilter(field('name'), 'in.("a" ,b)').operation, { kind: 'in', values: ['"a" ', 'b'] });
  });
  // Reported in an audit: a quote that never closes was 400, where PostgREST reads the element
  // as unquoted text; and a space before `(` was 400, where PostgREST skips it (`lexeme`).
  test('in-lists: a quote that never closes is unquoted text; spaces before ( are skipped', () => {
    assert.deepEqual(parseFilter(field('name'), 'in.("Bob,Zoë)').operation, { kind: 'in', values: ['"Bob', 'Zoë'] });
    assert.deepEqual(parseFilter(field('name'), 'in.(x,"a\\)').operation, { kind: 'in', values: ['x', '"a\\'] });
    assert.deepEqual(parseFilter(field('name'), 'in. \t(a,b)').operation, { kind: 'in', values: ['a', 'b'] });
  });
  test('is takes null, not_null, true, false, unknown in any case', () => {
    assert.deepEqual(parseFilter(field('x'), 'is.NULL').operation, { kind: 'is', value: 'null' });
    assert.deepEqual(parseFilter(field('x'), 'is.not_null').operation, { kind: 'is', value: 'not_null' });
    assertApiError(() => parseFilter(field('x'), 'is.nil'), 400, 'PGRST100');
  });
  test('any/all only after the quantifiable operators', () => {
    assert.deepEqual(parseFilter(field('x'), 'like(any).{A*,B*}').operation, { kind: 'compare', op: 'like', quantifier: 'any', value: '{A*,B*}' });
    assertApiError(() => parseFilter(field('x'), 'neq(any).{1}'), 400, 'PGRST100');
  });
  test('full-text operators take an optional language', () => {
    assert.deepEqual(parseFilter(field('x'), 'fts(french).amour').operation, { kind: 'fts', op: 'fts', language: 'french', value: 'amour' });
    assert.deepEqual(parseFilter(field('x'), 'wfts.carol or bob').operation, { kind: 'fts', op: 'wfts', language: null, value: 'carol or bob' });
    assert.equal((parseFilter(field('x'), 'fts(français).amour').operation as { language: string }).language, 'français');
    // A configuration's name is an identifier, as PostgREST parses it.
    for (const filter of ['fts().amour', 'fts(a-b).amour', 'plfts(french.amour']) assertApiError(() => parseFilter(field('x'), filter), 400, 'PGRST100');
  });
});

describe('logic trees', () => {
  test('values end at , or ) unless quoted or a {…} literal', () => {
    const tree = parseLogicTree('or', false, '(name.eq."Carol, Jr.",tags.cs.{a,b},id.in.(1,2),score.not.is.null, not.and(a.gt.1,a.lt.9))');
    assert.equal(tree.children.length, 5);
    assert.deepEqual(tree.children[0], { kind: 'filter', field: field('name'), negated: false, operation: { kind: 'compare', op: 'eq', quantifier: null, value: 'Carol, Jr.' } });
    assert.deepEqual((tree.children[1] as any).operation.value, '{a,b}');
    assert.deepEqual((tree.children[2] as any).operation.values, ['1', '2']);
    assert.equal((tree.children[3] as any).negated, true);
    assert.deepEqual({ ...(tree.children[4] as any), children: undefined }, { kind: 'tree', op: 'and', negated: true, children: undefined });
  });
  test('the spec\'s documented OR group spells an item `<col>=<op>.<value>` as well as `<col>.<op>.<value>`', () => {
    const tree = parseLogicTree('or', false, '(cohort_id.eq.7,co_advisor_ids=cs.{a1},id=not.in.(1,2))');
    assert.deepEqual(tree.children[1], { kind: 'filter', field: field('co_advisor_ids'), negated: false, operation: { kind: 'compare', op: 'cs', quantifier: null, value: '{a1}' } });
    assert.deepEqual(tree.children[2], parseLogicTree('or', false, '(id.not.in.(1,2))').children[0]);
    assertApiError(() => parseLogicTree('or', false, '(id=.eq.1)'), 400, 'PGRST100');
    // A JSON key ends at `=`, as PostgREST's unquoted keys do: it took `0=eq` as the key.
    const json = parseLogicTree('or', false, '(skills->>0=eq.Python,sections->>a=eq.eq.x)');
    assert.deepEqual(json.children.map((child: any) => [child.field.jsonPath.map((step: any) => step.key), child.operation.op, child.operation.value]),
      [[['0'], 'eq', 'Python'], [['a'], 'eq', 'eq.x']]);
  });
  test('an empty tree, an unquoted comma in a value and trailing text are parse errors', () => {
    assertApiError(() => parseLogicTree('or', false, '()'), 400, 'PGRST100');
    assertApiError(() => parseLogicTree('or', false, '(name.eq.Carol, Jr.,id.eq.1)'), 400, 'PGRST100');
    assertApiError(() => parseLogicTree('and', false, '(id.eq.1,id.neq.2))'), 400, 'PGRST100');
  });
  // Reported in review: PostgREST skips spaces and tabs around every parenthesis (its `lexeme`).
  test('spaces and tabs after a tree\'s or an in-list\'s closing parenthesis are skipped', () => {
    assert.deepEqual(parseLogicTree('or', false, '(id.eq.1,and(id.gt.0, id.lt.9) )\t '), parseLogicTree('or', false, '(id.eq.1,and(id.gt.0,id.lt.9))'));
    assert.deepEqual(parseFilter(field('name'), 'in.(a,b) \t').operation, { kind: 'in', values: ['a', 'b'] });
    assert.deepEqual(parseFilter(field('name'), 'in.( ) ').operation, { kind: 'in', values: [] });
  });
  test('a tree\'s value is unquoted text when its quote or brace does not close it, as PostgREST reads it', () => {
    const values = (tree: string) => parseLogicTree('or', false, tree).children.map((c) => (c.kind === 'filter' && c.operation.kind === 'compare' ? c.operation.value : null));
    assert.deepEqual(values('(name.eq."Ada"x,name.eq."Bob")'), ['"Ada"x', 'Bob']);
    assert.deepEqual(values('(tags.cs.{a,tags.cs.{b})'), ['{a', '{b}']);
    assert.deepEqual(values('(tags.cs.{a,b},name.eq.{c)'), ['{a,b}', '{c']);
    assert.deepEqual(values('(name.eq."Bob,name.eq.Zoë)'), ['"Bob', 'Zoë']);
  });
  test('a tree skips spaces before an in-list\'s ( and after an is keyword, as PostgREST does', () => {
    assert.deepEqual(parseLogicTree('or', false, '(name.in. (a,b),x.is.null\t ,x.not.is.TRUE )'),
      parseLogicTree('or', false, '(name.in.(a,b),x.is.null,x.not.is.true)'));
    assertApiError(() => parseLogicTree('or', false, '(x.is.null y)'), 400, 'PGRST100');
  });
  test('text after an in-list\'s closing parenthesis is a parse error, as after a tree\'s', () => {
    assertApiError(() => parseFilter(field('name'), 'in.(Ravi)junk'), 400, 'PGRST100');
    assertApiError(() => parseFilter(field('name'), 'not.in.("a,b"),c'), 400, 'PGRST100');
    assert.deepEqual(parseFilter(field('name'), 'in.(Ravi,"a)b")').operation, { kind: 'in', values: ['Ravi', 'a)b'] });
  });
  test('the error message quotes the tree as sent, with the column of the fault', () => {
    try {
      parseLogicTree('or', false, '(id.eq.1,id.zz.2)');
      assert.fail('expected a parse error');
    } catch (error) {
      assert.ok(error instanceof ApiError);
      assert.equal(error.message, '"failed to parse logic tree (or(id.eq.1,id.zz.2))" (line 1, column 15)');
    }
  });
  test('nesting deeper than the cap is refused', () => {
    const nested = (depth: number) => `(${'or('.repeat(depth)}id.eq.1${')'.repeat(depth + 1)}`;
    assert.equal(parseLogicTree('or', false, nested(8)).kind, 'tree');
    assertApiError(() => parseLogicTree('or', false, nested(12)), 400, 'QUERY_TOO_COMPLEX');
  });
});

describe('select and order', () => {
  test('columns, aliases, casts and JSON paths', () => {
    assert.deepEqual(parseSelect('id,fullName:first_name,year::text,sections->0->>title,t:sections->>"a.b"'), [
      { kind: 'field', alias: null, field: field('id'), cast: null },
      { kind: 'field', alias: 'fullName', field: field('first_name'), cast: null },
      { kind: 'field', alias: null, field: field('year'), cast: 'text' },
      { kind: 'field', alias: null, field: { name: 'sections', jsonPath: [{ arrow: '->', key: '0', isIndex: true }, { arrow: '->>', key: 'title', isIndex: false }] }, cast: null },
      { kind: 'field', alias: 't', field: { name: 'sections', jsonPath: [{ arrow: '->>', key: 'a.b', isIndex: false }] }, cast: null },
    ]);
    assert.deepEqual(parseSelect('sections->"0"->-1'), [
      { kind: 'field', alias: null, field: { name: 'sections', jsonPath: [{ arrow: '->', key: '0', isIndex: false }, { arrow: '->', key: '-1', isIndex: true }] }, cast: null },
    ]);
    assert.deepEqual(parseSelect(''), [{ kind: 'star' }]);
  });
  test('embedding and aggregates are refused with PostgREST codes', () => {
    assertApiError(() => parseSelect('id,cohorts(name)'), 400, 'PGRST200');
    for (const select of ['id,cohorts!inner(name),c!fk!left(id,x(y))', 'cohorts!my-fk(name)', 'cohorts!"x y"(name)', 'cohorts("a)b")']) {
      assertApiError(() => parseSelect(select), 400, 'PGRST200');
    }
    // Only a well-formed embedding is refused as one; a malformed one is a syntax error.
    for (const select of ['first_name!inner', 'cohorts(name', 'c!(x)', 'c!a!b!c(x)', 'cohorts(name)x']) assertApiError(() => parseSelect(select), 400, 'PGRST100');
    assertApiError(() => parseSelect('count()'), 400, 'PGRST123');
    assertApiError(() => parseSelect('id.sum()'), 400, 'PGRST123');
  });
  test('order terms with direction and null placement', () => {
    assert.deepEqual(parseOrder('a.desc.nullslast,b,c.nullsfirst'), [
      { field: field('a'), direction: 'desc', nulls: 'last' },
      { field: field('b'), direction: null, nulls: null },
      { field: field('c'), direction: null, nulls: 'first' },
    ]);
    assertApiError(() => parseOrder('id.up'), 400, 'PGRST100');
    assertApiError(() => parseOrder('id.descc'), 400, 'PGRST100');
  });
});

describe('request-level parameters', () => {
  test('repeated filters are all kept; the first select and order win; the last limit wins', () => {
    const syntax = parse('id=gt.1&id=lt.4&select=id&select=email&order=id&order=email&limit=5&limit=7');
    assert.equal(syntax.conditions.length, 2);
    assert.deepEqual(syntax.select, [{ kind: 'field', alias: null, field: field('id'), cast: null }]);
    assert.equal(syntax.order[0].field.name, 'id');
    assert.equal(syntax.limit, 7n);
  });
  test('embed-addressed parameters are kept for the planner to refuse', () => {
    assert.deepEqual(parse('cohorts.name=eq.x&cohorts.order=id').embedReferences.map((r) => r.parameter), ['cohorts.name', 'cohorts.order']);
  });
  test('non-integer limits and casts in filter keys are parse errors', () => {
    assertApiError(() => parse('limit=abc'), 400, 'PGRST100');
    assertApiError(() => parse('score::text=eq.7'), 400, 'PGRST100');
  });
  test('the Range header counts only in its two PostgREST forms', () => {
    assert.deepEqual(parse('', { range: '0-9' }).rangeHeader, { first: 0n, last: 9n });
    assert.deepEqual(parse('', { range: '5-' }).rangeHeader, { first: 5n, last: null });
    assert.equal(parse('', { range: 'items=0-9' }).rangeHeader, null);
  });
  test('Prefer: the first count wins; unknown preferences fail only under handling=strict', () => {
    assert.equal(parse('', { prefer: 'count=planned, count=exact' }).count, 'planned');
    assert.deepEqual(parse('', { prefer: 'handling=strict, count=exact' }).preferenceApplied, ['count=exact', 'handling=strict']);
    assert.equal(parse('', { prefer: 'count=none' }).count, null);
    assertApiError(() => plan('', { prefer: 'handling=strict, count=none' }), 400, 'PGRST122');
  });
  // Reported in an audit: PostgREST takes its known preferences under strict handling on a read.
  test('Prefer under handling=strict: PostgREST\'s preferences that change nothing for a read are taken, unechoed; their unknown values are refused', () => {
    for (const prefer of ['max-affected=1', 'return=representation', 'resolution=merge-duplicates', 'missing=default', 'tx=rollback']) {
      assert.deepEqual(parse('', { prefer }).preferenceApplied, [], prefer);
      assert.deepEqual(plan('', { prefer: `handling=strict, ${prefer}` }).preferenceApplied, ['handling=strict'], prefer);
    }
    for (const prefer of ['max-affected=many', 'return=everything', 'tx=maybe']) {
      assertApiError(() => plan('', { prefer: `handling=strict, ${prefer}` }), 400, 'PGRST122');
    }
  });
  test('Prefer: timezone=UTC, the zone answers are in, is honoured; another is not applied', () => {
    assert.deepEqual(parse('', { prefer: 'timezone=UTC, handling=strict, count=exact' }).preferenceApplied, ['count=exact', 'handling=strict', 'timezone=UTC']);
    assert.deepEqual(parse('', { prefer: 'timezone=Europe/Paris' }).preferenceApplied, []);
    assertApiError(() => plan('', { prefer: 'handling=strict, timezone=Mars/Base' }), 400, 'PGRST122');
    assertApiError(() => plan('', { prefer: 'handling=strict, timezone=Europe/Paris' }), 400, 'PGRST122');
  });
  test('Prefer as RFC 7240 writes it: names in any case, spaces around =, quoted values, parameters dropped, commas inside quotes kept', () => {
    for (const prefer of ['COUNT=exact', 'count = exact', 'count="exact"', 'count=exact; x=1', 'count=EXACT']) {
      assert.equal(parse('', { prefer }).count, 'exact', prefer);
    }
    assert.deepEqual(parse('', { prefer: 'x="a,b", count=planned' }).preferenceApplied, ['count=planned']);
    // A quote left open does not swallow the rest of the header.
    assert.deepEqual(parse('', { prefer: 'return=minimal, foo="bar, count=exact' }).preferenceApplied, ['count=exact']);
    assert.throws(() => plan('', { prefer: 'Handling = strict, Foo="a, b"' }),
      (error: unknown) => error instanceof ApiError && error.code === 'PGRST122' && error.details === 'Invalid preferences: Foo="a, b"');
  });
  // Reported in review: a bad range lost to a bad Accept (406), and a preference refused under
  // handling=strict won over both; PostgREST checks the range with the request, then negotiates
  // Accept in its plan, then refuses the preferences.
  test('refusals come in PostgREST\'s order: syntax, range (416), embed (PGRST108), Accept (406), strict preferences (PGRST122), names (42703), offset past bigint (22003)', () => {
    const bad = { accept: 'text/html', prefer: 'handling=strict, foo=bar' };
    assertApiError(() => plan('limit=x&offset=-1', bad), 400, 'PGRST100');
    assertApiError(() => plan('select=nosuch&limit=-1&cohorts.order=id', bad), 416, 'PGRST103');
    assertApiError(() => plan('select=nosuch', { ...bad, range: '3-1' }), 416, 'PGRST103');
    assertApiError(() => plan('select=nosuch&cohorts.order=id', bad), 400, 'PGRST108');
    assertApiError(() => plan('select=nosuch', bad), 406, 'PGRST107');
    assertApiError(() => plan('select=nosuch&offset=99999999999999999999', { prefer: bad.prefer }), 400, 'PGRST122');
    assertApiError(() => plan('select=nosuch&offset=99999999999999999999'), 400, '42703');
    assertApiError(() => plan('offset=99999999999999999999'), 400, '22003');
  });
  test('a query string over the cap is refused with 414', () => {
    assertApiError(() => parse(`id=in.(${'1,'.repeat(9000)}1)`), 414, 'URI_TOO_LONG');
  });
});

describe('the page: limit, offset and Range intersected', () => {
  const big = (n: number | null) => (n === null ? null : BigInt(n));
  const page = (limit: number | null, offset: number | null, rangeHeader: { first: number; last: number | null } | null = null) =>
    planPage({ limit: big(limit), offset: big(offset), rangeHeader: rangeHeader && { first: BigInt(rangeHeader.first), last: big(rangeHeader.last) } });
  test('defaults to the first 10,000 rows and cuts larger limits to 10,000', () => {
    assert.deepEqual(page(null, null), { offset: 0n, limit: 10_000 });
    assert.deepEqual(page(20_000, 5), { offset: 5n, limit: 10_000 });
  });
  test('header and parameters intersect', () => {
    assert.deepEqual(page(10, null, { first: 1, last: 3 }), { offset: 1n, limit: 3 });
    assert.deepEqual(page(null, 2, { first: 1, last: 3 }), { offset: 2n, limit: 2 });
  });
  test('limit=0 is a count-only page; a negative offset is ignored', () => {
    assert.deepEqual(page(0, 4), { offset: 0n, limit: 0 });
    assert.deepEqual(page(3, -2), { offset: 0n, limit: 3 });
  });
  test('offsets and ranges past 2^53 are kept exact', () => {
    assert.deepEqual(planPage({ limit: null, offset: 9223372036854775807n, rangeHeader: null }), { offset: 9223372036854775807n, limit: 10_000 });
    assert.deepEqual(planPage({ limit: null, offset: null, rangeHeader: { first: 9007199254740993n, last: 9007199254740997n } }), { offset: 9007199254740993n, limit: 5 });
  });
  test('a negative limit and an inverted Range are 416 PGRST103, each with PostgREST\'s details', () => {
    const negativeLimit = 'Limit should be greater than or equal to zero.';
    const lowerAboveUpper = 'The lower boundary must be lower than or equal to the upper boundary in the Range header.';
    const details = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        assert.ok(error instanceof ApiError);
        assert.equal(error.status, 416);
        assert.equal(error.code, 'PGRST103');
        return error.details;
      }
      assert.fail('no error');
    };
    assert.equal(details(() => page(-1, null)), negativeLimit);
    assert.equal(details(() => page(null, null, { first: 5, last: 2 })), lowerAboveUpper);
    // A Range that is not empty itself, left empty by offset and limit.
    assert.equal(details(() => page(null, 20, { first: 0, last: 9 })), negativeLimit);
    assert.equal(details(() => page(1, 2, { first: 0, last: 1 })), negativeLimit);
  });
});
