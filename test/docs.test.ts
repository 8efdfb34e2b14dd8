/** The documentation's generated sections match the code that holds each fact. */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { test } from 'node:test';
import { GENERATED, renderGenerated } from '../tools/docs.ts';

for (const path of Object.keys(GENERATED)) {
  test(`${relative(process.cwd(), path)} is what \`npm run docs\` writes from the code`, async () => {
    const document = await readFile(path, 'utf8');
    assert.equal(document, renderGenerated(path, document), 'run `npm run docs` and commit the result');
  });
}
