/**
 * "A request was answered": the one event the access log (src/http/access-log.ts) and the
 * metrics (src/http/metrics.ts) report from. Fastify's onResponse hook gives it for every request
 * that reached the router. The answers Fastify has src/http/edge.ts give before routing (a path
 * whose percent-encoding is not UTF-8, a path segment over the length limit) run no hook, so
 * they report themselves through `answered` once their response has finished.
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
  app.decorate('answered', (request: FastifyRequest, reply: FastifyReply) => {
    for (const listener of listeners) listener(request, reply);
  });
  app.addHook('onResponse', async (request, reply) => app.answered(request, reply));
}, { name: 'answers' });
