/** The documentation's generated sections match the code that holds each fact. */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { API_DOC, renderGenerated } from '../tools/docs.ts';

test('docs/api.md is what `npm run docs` writes from the registry, the error catalogue and the limits', async () => {
  const document = await readFile(API_DOC, 'utf8');
  assert.equal(document, renderGenerated(document), 'run `npm run docs` and commit docs/api.md');
});
