/**
 * CORS in a real browser (headless Chromium): a page served from one origin reads the partner
 * API on another with the headers real clients add (supabase-js's X-Client-Info and apikey,
 * postgrest-js's X-Retry-Count and, after `.schema()`, Accept-Profile). The preflight allows the
 * headers it is asked for, as PostgREST's does; PDS_CORS_ORIGINS without the page's origin
 * makes the browser refuse the answer.
 */
import assert from 'node:assert/strict';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { AppSettings } from '../src/http/app.ts';
import { launchChromium } from './support/chromium.ts';
import { Harness } from './support/harness.ts';

/** What the page's fetch saw: the answer, or the browser's refusal to show it. */
type PageFetch = { status: number; contentRange: string | null; rows: unknown[] } | { refused: string };

const originOf = (server: { address(): AddressInfo | string | null }) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** A partner's web app: a blank page of its own origin. */
async function startPartnerPage(): Promise<Server> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Partner app</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** Reads the cohorts from the page, with the headers supabase-js and postgrest-js send. */
function fetchCohortsFromPage(page: Page, apiOrigin: string, token: string): Promise<PageFetch> {
  return page.evaluate(async ({ url, token }) => {
    try {
      const response = await fetch(url, {
        headers: {
          Authorization: `Bearer ${token}`,
          apikey: token,
          'X-Client-Info': 'supabase-js-web/2.50.0',
          'X-Retry-Count': '0',
          'Accept-Profile': 'public',
          Prefer: 'count=exact',
        },
      });
      return { status: response.status, contentRange: response.headers.get('content-range'), rows: await response.json() };
    } catch (error) {
      return { refused: String(error) };
    }
  }, { url: `${apiOrigin}/v1/cohorts?select=id,name&order=id`, token });
}

describe('CORS from a page in headless Chromium', () => {
  let browser: Browser;
  let pageServer: Server;
  let page: Page;
  const services: Harness[] = [];

  /** The service listening on its own port, with the demo data. */
  async function startService(settings: Partial<AppSettings> = {}): Promise<{ h: Harness; origin: string; token: string }> {
    const h = await Harness.start('pglite', { demoStudents: 5, settings });
    services.push(h);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    return { h, origin: originOf(h.app.server), token: h.demo!.universities[0].read_token };
  }

  before(async () => {
    pageServer = await startPartnerPage();
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(originOf(pageServer));
  });
  after(async () => {
    await browser?.close();
    pageServer?.close();
    for (const h of services) await h.close();
  });

  test('any origin (the default): the read succeeds, with its rows and the exposed Content-Range', async () => {
    const { h, origin, token } = await startService();
    assert.notEqual(origin, originOf(pageServer), 'the page and the API are different origins');
    const cohorts = await h.sql<{ id: string; name: string }>(
      'select id, name from cohorts where university_id = $1 order by id', [h.demo!.universities[0].id]);
    assert.ok(cohorts.length > 0);

    const result = await fetchCohortsFromPage(page, origin, token);
    assert.ok('status' in result, `the browser refused the answer: ${JSON.stringify(result)}`);
    assert.equal(result.status, 200);
    assert.deepEqual(result.rows, cohorts);
    assert.equal(result.contentRange, `0-${cohorts.length - 1}/${cohorts.length}`);
  });

  test('PDS_CORS_ORIGINS listing the page\'s origin: the read succeeds', async () => {
    const { origin, token } = await startService({ corsOrigins: [originOf(pageServer)] });
    const result = await fetchCohortsFromPage(page, origin, token);
    assert.ok('status' in result, `the browser refused the answer: ${JSON.stringify(result)}`);
    assert.equal(result.status, 200);
  });

  test('PDS_CORS_ORIGINS without the page\'s origin: the browser refuses the answer', async () => {
    const { origin, token } = await startService({ corsOrigins: ['https://partner-app.example'] });
    const result = await fetchCohortsFromPage(page, origin, token);
    assert.ok('refused' in result, `the page read the answer: ${JSON.stringify(result)}`);
    assert.match(result.refused, /TypeError: Failed to fetch/);
  });
});
