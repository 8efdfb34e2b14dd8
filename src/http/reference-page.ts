/**
 * The reference page at GET /docs: Swagger UI (swagger-ui-dist) renders the served OpenAPI
 * description in the browser. The service serves every asset itself from the installed package, so
 * the page works on a machine without internet, and its Content-Security-Policy lets it load
 * nothing from any other origin. Needs no token; nothing under /v1 changes.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

const require = createRequire(import.meta.url);
const RENDERER_PACKAGE = 'swagger-ui-dist/package.json';
const RENDERER_ROOT = dirname(require.resolve(RENDERER_PACKAGE));
const RENDERER_VERSION: string = (require(RENDERER_PACKAGE) as { version: string }).version;

const PAGE_PATH = '/docs';
/** The renderer's version is part of its assets' paths, so they can be cached as immutable. */
const ASSETS_PATH = `${PAGE_PATH}/assets/${RENDERER_VERSION}/`;
const INIT_SCRIPT_PATH = `${PAGE_PATH}/reference-page.js`;

/** The only files of the package that are served: what the page links. */
const RENDERER_FILES = {
  script: 'swagger-ui-bundle.js',
  styles: 'swagger-ui.css',
  icon: 'favicon-32x32.png',
} as const;
const SERVED_FILES = new Set<string>(Object.values(RENDERER_FILES).map((file) => `/${file}`));

/**
 * Nothing from another origin and no inline script or style. `img-src data:` because the
 * renderer's stylesheet draws its icons as data: URIs; `connect-src 'self'` lets it fetch the
 * description and send the requests of "Try it out".
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The page and its start script name the current assets, so a browser revalidates them each time. */
const REVALIDATE = 'no-cache';
const ONE_YEAR = '365d';

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function page(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Partner data service: API reference</title>
<link rel="icon" type="image/png" href="${ASSETS_PATH}${RENDERER_FILES.icon}">
<link rel="stylesheet" href="${ASSETS_PATH}${RENDERER_FILES.styles}">
</head>
<body>
<div id="reference"></div>
<script src="${ASSETS_PATH}${RENDERER_FILES.script}"></script>
<script src="${INIT_SCRIPT_PATH}"></script>
</body>
</html>
`;
}

/**
 * Swagger UI's defaults that reach other hosts are turned off: `validatorUrl` (a badge image from
 * validator.swagger.io) and `queryConfigEnabled` (would let `?url=` load another description).
 * Authorizations are kept in memory only.
 */
function initScript(descriptionUrl: string): string {
  const options = {
    url: descriptionUrl,
    dom_id: '#reference',
    validatorUrl: null,
    queryConfigEnabled: false,
    persistAuthorization: false,
    deepLinking: true,
    filter: true,
  };
  return `SwaggerUIBundle(${JSON.stringify(options)});\n`;
}

export async function referencePage(app: FastifyInstance, options: { descriptionUrl: string }): Promise<void> {
  const html = page();
  const script = initScript(options.descriptionUrl);

  app.get(PAGE_PATH, async (_request, reply) => {
    reply.headers({ ...SECURITY_HEADERS, 'cache-control': REVALIDATE }).type('text/html; charset=utf-8');
    return html;
  });
  app.get(INIT_SCRIPT_PATH, async (_request, reply) => {
    reply.headers({ 'x-content-type-options': 'nosniff', 'cache-control': REVALIDATE }).type('text/javascript; charset=utf-8');
    return script;
  });
  // Someone opening the service's address in a browser lands on the reference.
  app.get('/', async (_request, reply) => reply.redirect(PAGE_PATH));

  await app.register(fastifyStatic, {
    root: RENDERER_ROOT,
    prefix: ASSETS_PATH,
    decorateReply: false,
    index: false,
    dotfiles: 'ignore',
    allowedPath: (path) => SERVED_FILES.has(path),
    maxAge: ONE_YEAR,
    immutable: true,
    setHeaders: (reply) => reply.header('x-content-type-options', 'nosniff'),
  });
}
