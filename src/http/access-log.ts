/**
 * One access-log line per request, written when it is answered (Fastify's own two lines are
 * off): request id, method, route template, status, duration, body bytes, who asked (token id and
 * its university or consortium), the error code of an error answer, a write batch's counts, and
 * `idempotent_replay` on a write answered with the stored answer of its Idempotency-Key, and
 * `cut_off` on an answer not sent whole.
 * Never the URL, a query value, a body value, a token or a key: nothing personal reaches the log.
 */
import { Readable, Transform, pipeline } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { notesOf, routeTemplate } from './request-notes.ts';

/** Body bytes sent so far, by request: counted as a streamed page passes. */
const bodyBytes = new WeakMap<FastifyRequest, { sent: number }>();

/** The payload as sent, with its bytes counted into `counter`. */
function counted(payload: unknown, counter: { sent: number }): unknown {
  if (payload instanceof Readable) {
    const through = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        counter.sent += chunk.length;
        done(null, chunk);
      },
    });
    // Destroying either end (the client went away, the page failed) destroys the other.
    pipeline(payload, through, () => {});
    return through;
  }
  if (typeof payload === 'string' || Buffer.isBuffer(payload)) counter.sent = Buffer.byteLength(payload);
  return payload;
}

/** The Content-Length of an answer no onSend hook counted (one given before routing). */
function contentLength(reply: FastifyReply): number {
  const length = Number(reply.getHeader('content-length'));
  return Number.isInteger(length) ? length : 0;
}

function accessLine(request: FastifyRequest, reply: FastifyReply) {
  const { errorCode, batch, idempotentReplay } = notesOf(request);
  // Set only on the partner API, once its token was accepted.
  const principal = request.principal ?? null;
  return {
    method: request.method,
    route: routeTemplate(request),
    status: reply.statusCode,
    duration_ms: Math.round(reply.elapsedTime * 10) / 10,
    bytes: request.method === 'HEAD' ? 0 : bodyBytes.get(request)?.sent ?? contentLength(reply),
    token_id: principal?.tokenId ?? null,
    university_id: principal?.universityId ?? null,
    consortium_id: principal?.consortiumId ?? null,
    error_code: errorCode ?? null,
    ...(batch ? { batch: { resource: batch.resource, ...batch.counts } } : {}),
    ...(idempotentReplay ? { idempotent_replay: true } : {}),
    // The answer was not sent whole: the client went away, or a streamed page failed (src/http/answered.ts).
    ...(reply.raw.writableFinished ? {} : { cut_off: true }),
  };
}

/** Registered before any route (fastify-plugin, so its hook is the root's and reaches every route and the 404 handler). */
export const accessLog = fp(async (app: FastifyInstance) => {
  app.addHook('onSend', async (request, _reply, payload) => {
    const counter = { sent: 0 };
    bodyBytes.set(request, counter);
    return counted(payload, counter);
  });
  app.onAnswered((request, reply) => request.log.info(accessLine(request, reply), 'request completed'));
}, { name: 'access-log', dependencies: ['answers'] });
