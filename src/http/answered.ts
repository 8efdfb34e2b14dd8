/**
 * "A request was answered": the one event the access log (src/http/access-log.ts) and the
 * metrics (src/http/metrics.ts) report from, once per request. Fastify's onResponse hook gives it
 * for every request that reached the router and whose answer was sent whole. An answer cut off
 * (the client went away before it or during it, or a streamed page failed) runs no onResponse
 * hook: it is reported when its connection closes, or, if that came first, when the answer is
 * handed over, so that a batch committed for a client that did not wait is logged and counted.
 * The answers Fastify has src/http/edge.ts give before routing (a path whose percent-encoding is
 * not UTF-8, a path segment over the length limit) run no hook, so they report themselves through
 * `answered` when their response closes, sent whole or cut off.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export type AnswerListener = (request: FastifyRequest, reply: FastifyReply) => void;

declare module 'fastify' {
  interface FastifyInstance {
    /** Calls `listener` once for every request, when it has been answered. */
    onAnswered(listener: AnswerListener): void;
    /** Reports that the request has been answered to every listener. */
    answered(request: FastifyRequest, reply: FastifyReply): void;
  }
}

/** Registered before the plugins that listen and before any route (fastify-plugin: the root's hook). */
export const answers = fp(async (app: FastifyInstance) => {
  const listeners: AnswerListener[] = [];
  app.decorate('onAnswered', (listener: AnswerListener) => {
    listeners.push(listener);
  });
  const reported = new WeakSet<FastifyRequest>();
  const answered = (request: FastifyRequest, reply: FastifyReply) => {
    if (reported.has(request)) return;
    reported.add(request);
    for (const listener of listeners) listener(request, reply);
  };
  app.decorate('answered', answered);
  app.addHook('onResponse', async (request, reply) => answered(request, reply));
  app.addHook('onSend', (request, reply, payload, done) => {
    const response = reply.raw;
    if (response.destroyed) answered(request, reply);
    else response.once('close', () => !response.writableFinished && answered(request, reply));
    done(null, payload);
  });
}, { name: 'answers' });
