/**
 * Every failure leaves in the documented body `{ code, message, details, hint }` (docs/decisions.md, Errors).
 * Database errors caused by the caller's values keep PostgreSQL's code and message, as PostgREST
 * does; anything unexpected becomes a 500 that names no table, query or stack.
 */
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, apiError } from '../errors.ts';
import { JSON_CONTENT_TYPE } from '../query/media-types.ts';
import { PATTERN_MEANINGS } from '../resources/text.ts';
import { rawAnswerOf } from './edge.ts';
import { notesOf } from './request-notes.ts';
import { databaseErrorToApiError, storeErrorClass } from './sqlstates.ts';

/**
 * Ajv's message, but naming the key a closed schema does not accept (Ajv keeps it in `params`),
 * and saying in words what a text pattern asks, where Ajv quotes the pattern.
 */
function validationMessage(error: FastifyError): string {
  const [first] = error.validation ?? [];
  const where = `${error.validationContext}${first?.instancePath}`;
  if (first?.keyword === 'additionalProperties') return `${where} does not accept the key "${String(first.params.additionalProperty)}"`;
  const meaning = first?.keyword === 'pattern' ? PATTERN_MEANINGS[String(first.params.pattern)] : undefined;
  return meaning ? `${where} ${meaning}` : error.message;
}

function fastifyErrorToApiError(error: FastifyError, request: FastifyRequest): ApiError | null {
  if (error.validation) {
    if (error.validationContext !== 'body') return apiError('INVALID_PARAMETER', validationMessage(error));
    // src/http/json-bodies.ts reads an empty body as none.
    return request.body === undefined
      ? apiError('INVALID_BODY', 'The request body is empty; send a JSON document.')
      : apiError('INVALID_BODY', `The request body is invalid: ${validationMessage(error)}.`);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return apiError('PAYLOAD_TOO_LARGE');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return apiError('INVALID_BODY', 'The request body does not match its Content-Length.');
    // A Content-Type Fastify cannot parse at all (`application/json,text/plain`, `;`) names no
    // JSON type: 415 like any other, not a 400 whose message says "Unsupported Media Type".
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return apiError('UNSUPPORTED_MEDIA_TYPE');
  }
  return null;
}

/**
 * Any other error Fastify marks as the client's (a 4xx statusCode, such as a request body whose
 * stream broke off while it was read) is a 400, not a 500; Fastify's message names no internals.
 */
function clientErrorToApiError(error: FastifyError): ApiError | null {
  const status = error.statusCode;
  if (status === undefined || status < 400 || status >= 500) return null;
  return apiError('INVALID_BODY', `The request could not be read: ${error.message}.`);
}

/** The answer for a path no route serves. */
export const endpointNotFound = (method: string, url: string) => apiError('NOT_FOUND', `No endpoint at ${method} ${url.split('?')[0]}.`);

/** The error and not-found handlers of the whole app (fastify-plugin, so they are the root's). */
export const errorHandling = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const answer = rawAnswerOf(request.raw) ?? (error instanceof ApiError
      ? error
      : fastifyErrorToApiError(error, request) ?? databaseErrorToApiError(error, request.body) ?? clientErrorToApiError(error));
    const notes = notesOf(request);
    notes.errorCode = answer?.code ?? 'INTERNAL';
    notes.storeErrorClass = storeErrorClass(error) ?? undefined;
    if (!answer) {
      request.log.error({ err: error }, 'unexpected error');
      const internal = apiError('INTERNAL').quotingRequest(request.id);
      return reply.code(internal.status).type(JSON_CONTENT_TYPE).send(internal.toBody());
    }
    const failed = answer.status >= 500;
    if (failed) request.log.warn({ err: error }, answer.code);
    const sent = failed ? answer.quotingRequest(request.id) : answer;
    return reply.code(sent.status).headers(sent.headers).type(JSON_CONTENT_TYPE).send(sent.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    notesOf(request).errorCode = 'NOT_FOUND';
    const notFound = endpointNotFound(request.method, request.url);
    reply.code(notFound.status).type(JSON_CONTENT_TYPE).send(notFound.toBody());
  });
}, { name: 'error-handling' });
