/**
 * Request bodies are JSON, parsed here for every route. Fastify's own parsers answered a body
 * with a `__proto__` key, or with a syntax error, in one sentence that named neither ("Body is
 * not valid JSON but content-type is set to 'application/json'"), refused an empty body even on a
 * route that reads none (an operator's DELETE sent with a JSON Content-Type was 400 and did not
 * revoke), and read `text/plain` bodies as strings, which an operator route then refused as not an
 * object (400 rather than 415).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import secureJson from 'secure-json-parse';
import { apiError } from '../errors.ts';
import { LIMITS } from '../limits.ts';

/**
 * The body as JSON, or INVALID_BODY saying what is wrong with it. Keys that would reach an
 * object's prototype when copied (`__proto__`, `constructor.prototype`) are refused: secure-json-parse
 * finds them, and answers null for them (`safe`), which only the text `null` means otherwise.
 */
export function parseJsonBody(text: string): unknown {
  if (nestsDeeperThan(text, LIMITS.bodyDepth)) {
    throw apiError('INVALID_BODY', `The request body nests arrays and objects more than ${LIMITS.bodyDepth} deep.`);
  }
  let parsed: unknown;
  try {
    parsed = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error', safe: true });
  } catch (error) {
    // V8's message quotes the text around the fault.
    throw apiError('INVALID_BODY', `The request body is not valid JSON: ${(error as Error).message.replace(/\.$/, '')}.`);
  }
  if (parsed === null && text.trim() !== 'null') {
    throw apiError('INVALID_BODY', 'The request body holds a "__proto__" or "constructor.prototype" key, which the service refuses.');
  }
  return parsed;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const [OPEN_ARRAY, CLOSE_ARRAY, OPEN_OBJECT, CLOSE_OBJECT] = [0x5b, 0x5d, 0x7b, 0x7d];

/**
 * Whether the text's arrays and objects nest more than `limit` deep, read before it is parsed.
 * A body nested 5,000 deep overflowed the stack of the canonical JSON an Idempotency-Key's hash
 * is taken of (a 500), and nothing the service reads lies deeper than a few levels. Measured on
 * the parsed value, the limit came too late: JSON.parse of 2,000,000 nested brackets (3.8 MiB,
 * under the size limit) took 1.4 s, where 1,300,000 empty arrays side by side take 0.3 s, and
 * held every other request that long; measured on the text, that body is refused in 4–7 ms.
 * Strings are skipped by `indexOf` to their closing quote: the scan of a 500-row batch of 110 KB
 * takes 0.2–0.4 ms, about what JSON.parse of it takes (1,000 runs of each).
 */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // The closing quote is the next one after an even run of backslashes.
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return false;
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

/** A JSON body of nothing but whitespace is no body. */
const isEmpty = (text: string) => !/\S/.test(text);

/**
 * JSON exchanged between systems is UTF-8 (RFC 8259, section 8.1; a charset parameter has no
 * effect). Bytes that are not UTF-8 are refused: decoded leniently, each became U+FFFD and was
 * stored so, as a Latin-1 `é` in an address was, and two different bodies read as one. A leading
 * byte order mark is skipped, as RFC 8259 lets a parser do (and as secure-json-parse did).
 */
const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeJsonBody(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw apiError('INVALID_BODY', 'The request body is not valid UTF-8, the one encoding of JSON between systems (RFC 8259).');
  }
}

export const jsonBodies = fp(async (app: FastifyInstance) => {
  app.removeAllContentTypeParsers();
  // A route that needs a body refuses no body in its own words.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    try {
      // Compressed bodies are not decoded: a gzipped batch was refused as "not valid UTF-8", and a
      // plain one labelled gzip was written (RFC 9110, section 8.4: 415).
      const contentEncoding = request.headers['content-encoding']?.trim();
      if (contentEncoding && contentEncoding.toLowerCase() !== 'identity') {
        // RFC 9110, section 12.5.3: the refusal names the codings taken.
        throw apiError('UNSUPPORTED_MEDIA_TYPE', contentEncoding).withHeaders({ 'accept-encoding': 'identity' });
      }
      const text = decodeJsonBody(bytes as Buffer);
      done(null, isEmpty(text) ? undefined : parseJsonBody(text));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  // Any other Content-Type is 415 with a body, refused unread (src/http/edge.ts then closes the
  // connection), and no body without one (fetch labels an empty DELETE body text/plain, and
  // sends neither Content-Length nor Transfer-Encoding, which HTTP/1.1 reads as no body).
  app.addContentTypeParser('*', (request, _body, done) => {
    const { 'content-length': length, 'transfer-encoding': encoding } = request.headers;
    if (encoding === undefined && (length === undefined || length === '0')) done(null, undefined);
    else done(apiError('UNSUPPORTED_MEDIA_TYPE'), undefined);
  });
}, { name: 'json-bodies' });
