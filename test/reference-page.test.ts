/**
 * The reference page at /docs (src/http/reference-page.ts), opened in real headless Chromium
 * (Debian's `chromium` package driven by playwright-core): it renders the served description,
 * shows the students operations, loads nothing from another host and logs no error.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { launchChromium } from './support/chromium.ts';
import { Harness } from './support/harness.ts';

const STUDENT_METHODS = ['get', 'put', 'post', 'patch'] as const;
const RENDER_TIMEOUT_MS = 30_000;
/** By extension; JavaScript under either of its registered names (RFC 9239 prefers text/javascript). */
const CONTENT_TYPES: Record<string, RegExp> = { js: /^(text|application)\/javascript$/, css: /^text\/css$/, png: /^image\/png$/ };

interface Operation { summary?: string }

/** The summaries of the students read and write operations, as the served description gives them. */
function studentSummaries(description: { paths: Record<string, Record<string, Operation>> }): string[] {
  // The resource's own path, not its change feed's (/changes/students).
  const studentPaths = Object.keys(description.paths).filter((path) => path === '/students');
  assert.equal(studentPaths.length, 1, `one students path in the description, found ${JSON.stringify(studentPaths)}`);
  const operations = description.paths[studentPaths[0]];
  return STUDENT_METHODS.map((method) => {
    const summary = operations[method]?.summary;
    assert.ok(summary, `the description gives ${method.toUpperCase()} ${studentPaths[0]} a summary`);
    return summary;
  });
}

describe('the reference page', () => {
  let h: Harness;
  let origin: string;
  before(async () => {
    h = await Harness.start('pglite');
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  });
  after(() => h.close());

  test('renders the students operations in headless Chromium, loading nothing from another host', async () => {
    const description = await (await fetch(`${origin}/v1/openapi.json`)).json();
    const summaries = studentSummaries(description);

    const browser = await launchChromium();
    try {
      const context = await browser.newContext();
      const requested: string[] = [];
      context.on('request', (request) => requested.push(request.url()));
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));

      const response = await page.goto(`${origin}/docs`);
      assert.equal(response?.status(), 200);
      for (const summary of summaries) {
        await page.getByText(summary, { exact: true }).filter({ visible: true }).first().waitFor({ timeout: RENDER_TIMEOUT_MS });
      }
      await page.waitForLoadState('networkidle');

      assert.ok(requested.includes(`${origin}/v1/openapi.json`), 'the page renders the served description');
      const elsewhere = requested.filter((url) => new URL(url).origin !== origin);
      assert.deepEqual(elsewhere, [], 'every request goes to the service itself');
      assert.deepEqual(problems, [], 'the page logs no error');
    } finally {
      await browser.close();
    }
  });

  test('the page has a restrictive Content-Security-Policy and is revalidated; the renderer\'s assets are immutable', async () => {
    const pageResponse = await h.get('/docs', null);
    assert.equal(pageResponse.status, 200);
    assert.match(String(pageResponse.headers['content-type']), /^text\/html; charset=utf-8/);
    assert.equal(pageResponse.headers['cache-control'], 'no-cache');
    const csp = String(pageResponse.headers['content-security-policy']);
    const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name, sources]));
    assert.deepEqual(directives.get('default-src'), ["'none'"]);
    for (const name of ['script-src', 'style-src', 'connect-src']) assert.deepEqual(directives.get(name), ["'self'"], name);

    const assets = [...pageResponse.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
    assert.ok(assets.length >= 3, 'the page links its script, stylesheet and icon');
    for (const asset of assets) {
      assert.ok(asset.startsWith('/docs/'), `${asset} is served by the service`);
      const response = await h.get(asset, null);
      assert.equal(response.status, 200, asset);
      assert.equal(response.headers['x-content-type-options'], 'nosniff', asset);
      assert.match(String(response.headers['content-type']).split(';')[0], CONTENT_TYPES[asset.split('.').pop()!], asset);
      if (asset.includes('/assets/')) assert.equal(response.headers['cache-control'], 'public, max-age=31536000, immutable', asset);
      else assert.equal(response.headers['cache-control'], 'no-cache', asset);
    }
  });

  test('only the linked files of the renderer are served; / redirects to the page, which stays out of the description', async () => {
    const pageResponse = await h.get('/docs', null);
    const assetsFolder = pageResponse.body.match(/src="(\/docs\/assets\/[^"]+\/)[^"/]+"/)?.[1];
    assert.ok(assetsFolder, 'the page loads its script from /docs/assets/<version>/');
    for (const unlinked of ['index.html', 'package.json', 'swagger-initializer.js', '']) {
      const response = await h.get(`${assetsFolder}${unlinked}`, null);
      assert.equal(response.status, 404, `${assetsFolder}${unlinked}`);
      assert.equal(response.json.code, 'NOT_FOUND');
    }

    const root = await h.get('/', null);
    assert.equal(root.status, 302);
    assert.equal(root.headers.location, '/docs');

    const description = (await h.get('/v1/openapi.json', null)).json;
    // A path at the root has the root's server; '/' under the partner API's server is /v1/, which is described.
    const pagePaths = Object.entries<{ servers?: unknown }>(description.paths)
      .filter(([path, item]) => (path === '/' && item.servers !== undefined) || path.startsWith('/docs'));
    assert.deepEqual(pagePaths, []);
  });
});
