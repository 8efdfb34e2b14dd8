/**
 * The HTTP edge below the routes: answers Node's parser gives before Fastify sees a request
 * (malformed request line or headers, header overflow, slow clients), Fastify's own framework
 * errors, the request id, and closing connections whose body was not read. Every answer
 * carries the documented body `{ code, message, details, hint }` (docs/decisions.md, Errors).
 */
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, apiError } from '../errors.ts';
import { JSON_CONTENT_TYPE } from '../query/media-types.ts';
import { notesOf } from './request-notes.ts';
import { RESPONSE_HEADERS } from './response-headers.ts';

/** Node's name of the request header the id may come in (its names are lower case). */
const REQUEST_ID_HEADER = RESPONSE_HEADERS.requestId.toLowerCase();

/** An incoming X-Request-Id is kept only when it is a short token safe in headers and logs. */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** How long a socket answered at parser level may stay open to let the client read the answer. */
const CLIENT_ERROR_LINGER_MS = 1_000;

function requestIdOf(request: IncomingMessage): string {
  const incoming = request.headers[REQUEST_ID_HEADER];
  return typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** A uri-host with an optional port (RFC 3986, section 3.2.2); empty is one too. */
const HOST_VALUE = /^(?:\[[\w:.~!$&'()*+,;=-]+\]|[\w.~!$&'()*+,;=%-]*)(?::\d*)?$/;

/**
 * Whether the request has the Host RFC 9112 (section 3.2) requires: exactly one, with a valid
 * value, or none in HTTP/1.0. Any other is 400 there.
 */
function hostIsValid(request: IncomingMessage): boolean {
  let hosts = 0;
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i].length === 4 && request.rawHeaders[i].toLowerCase() === 'host') hosts += 1;
  }
  if (hosts === 0) return request.httpVersion !== '1.1';
  return hosts === 1 && HOST_VALUE.test(request.headers.host ?? '');
}

function parserErrorToApiError(error: NodeJS.ErrnoException): ApiError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return apiError('REQUEST_TIMEOUT');
    case 'HPE_HEADER_OVERFLOW':
      return apiError('HEADERS_TOO_LARGE');
    case 'HPE_INVALID_METHOD':
      return apiError('BAD_REQUEST', 'method');
    default:
      return apiError('BAD_REQUEST', 'syntax');
  }
}

/**
 * Ends the socket (after `last`, if given) and destroys it once the client had time to read what
 * was written, reading and dropping what it still sends meanwhile: closing at once with unread
 * input would reset the connection and lose the answer.
 */
function endLingering(socket: Socket, last?: string): void {
  if (last === undefined) socket.end();
  else socket.end(last);
  setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
}

/** Writes the answer and closes the connection once the client had time to read it. */
function writeRaw(socket: Socket, answer: ApiError): void {
  const body = JSON.stringify(answer.toBody());
  const headers = Object.entries(answer.headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  // Date, as an origin server with a clock must send (RFC 9110, section 6.6.1).
  endLingering(socket, `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\nDate: ${new Date().toUTCString()}\r\n`
    + `Content-Type: ${JSON_CONTENT_TYPE}\r\n${headers}`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** What a socket has carried: its first request, its last with the response, and the responses not yet finished. */
interface SocketExchanges {
  readonly first: IncomingMessage;
  last: { readonly request: IncomingMessage; readonly response: ServerResponse };
  /** Pipelined requests are answered in order: a raw answer waits for these. */
  readonly open: Set<ServerResponse>;
}

const exchanges = new WeakMap<Socket, SocketExchanges>();

/**
 * Sockets answered raw, or about to be: the answer ends the connection, so requests parsed
 * behind it never run (a PUT pipelined behind an `Expect: teapot` was written, its client told
 * only 417), and the parser's further errors on the same input are not answered again (each
 * answered anew skipped the linger and reset the connection, losing every answer before it).
 */
const answeredRaw = new WeakSet<Socket>();

/**
 * Has the socket closed as writeRaw's are (endLingering) once Node has written the answer: Node's
 * http server then calls `destroySoon` (its resOnFinish; test/http-edge.test.ts notices if it
 * stops), which destroyed the connection at once, so a client still sending the body met a reset
 * and Node's fetch lost a 413 for EPIPE in 2 to 7 of 10 batches over the size limit. Requests
 * parsed behind the body meanwhile never run, as behind a raw answer: their answers could not be
 * sent.
 */
function lingerAfterAnswer(socket: Socket): void {
  answeredRaw.add(socket);
  socket.destroySoon = () => endLingering(socket);
}

function trackExchange(request: IncomingMessage, response: ServerResponse): void {
  if (answeredRaw.has(request.socket)) return;
  let carried = exchanges.get(request.socket);
  if (!carried) exchanges.set(request.socket, carried = { first: request, last: { request, response }, open: new Set() });
  carried.last = { request, response };
  carried.open.add(response);
  const { open } = carried;
  response.once('close', () => open.delete(response));
}

/** The responses still being given on the socket to requests received whole. */
const pendingResponses = (socket: Socket) => [...(exchanges.get(socket)?.open ?? [])].filter((response) => response.req.complete);

/** Whether a request on the socket, received whole, has no answer begun yet. */
const beingWorkedOn = (socket: Socket) => pendingResponses(socket).some((response) => !response.headersSent);

function writeAfterPending(socket: Socket, answer: ApiError): void {
  const pending = pendingResponses(socket);
  if (pending.length > 0) {
    let left = pending.length;
    for (const response of pending) response.once('close', () => { if (--left === 0) writeAfterPending(socket, answer); });
  } else if (socket.writable) {
    writeRaw(socket, answer);
  } else {
    socket.destroy();
  }
}

/**
 * Answers raw, once per socket, after the responses still being given on it to requests
 * received whole, so that a pipelining client reads each answer where it belongs. Written at
 * once, a parser's 400 for a later request took the place of an earlier one's answer (a PUT that
 * had committed) or was spliced into a page being streamed. A request whose body was still
 * arriving is the one answered: its own handler never gets the rest of it.
 */
function answerRaw(socket: Socket, answer: ApiError): void {
  if (answeredRaw.has(socket)) return;
  answeredRaw.add(socket);
  const arriving = requestArriving(socket);
  if (arriving) rawAnswers.set(arriving, answer);
  writeAfterPending(socket, answer);
}

/** The raw answers routed requests got while their bodies were arriving (rawAnswerOf). */
const rawAnswers = new WeakMap<IncomingMessage, ApiError>();

/**
 * The raw answer the request got while its body was arriving (a 408), if it did: its route then
 * fails to read the body, and the error handler (src/http/errors.ts) reports this answer, where
 * the access log and the metrics said 400 INVALID_BODY, an answer never sent.
 */
export const rawAnswerOf = (request: IncomingMessage): ApiError | undefined => rawAnswers.get(request);

/** The routed request on the socket whose body is still arriving, unanswered: a raw answer is its answer. */
function requestArriving(socket: Socket): IncomingMessage | undefined {
  const last = exchanges.get(socket)?.last;
  return last && !last.request.complete && !last.response.headersSent ? last.request : undefined;
}

/** A raw answer is logged as a `client error` line unless it is a routed request's, whose own access-log line gives it. */
function logRawAnswer(app: FastifyInstance, socket: Socket, fields: Record<string, unknown>): void {
  if (!requestArriving(socket)) app.log.info(fields, 'client error');
}

/**
 * Answers a socket Node has handed over bare (a CONNECT), whose error is then the listener's to
 * handle: unhandled, a reset crashed the process. Node no longer drives the responses in flight
 * on it, so with any the socket is closed instead: waiting for them held a streamed page, its
 * transaction and the shutdown for ever.
 */
export function answerDetached(socket: Socket, answer: ApiError): void {
  socket.on('error', () => socket.destroy());
  socket.resume();
  if (pendingResponses(socket).length > 0 || answeredRaw.has(socket)) socket.destroy();
  else answerRaw(socket, answer);
}

/** Node's parser rejected the bytes: there is no request object, so the answer is written raw. */
function answerClientError(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || answeredRaw.has(socket)) return;
  const answer = parserErrorToApiError(error);
  logRawAnswer(this, socket, { code: answer.code, parserError: error.code });
  // Input still arriving is read and dropped until the socket closes.
  socket.resume();
  answerRaw(socket, answer);
}

/** Errors Fastify raises before routing, e.g. a path whose percent-encoding is not UTF-8. */
function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const answer = error.code === 'FST_ERR_BAD_URL'
    ? apiError('BAD_REQUEST', 'encoding')
    : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? apiError('URI_TOO_LONG', 'segment')
      : apiError('BAD_REQUEST', 'route');
  notesOf(request).errorCode = answer.code;
  // No hook runs for an answer given before routing: it reports itself to the access log and the
  // metrics, sent whole or cut off (src/http/answered.ts reports each request once).
  reply.raw.once('close', () => request.server.answered(request, reply));
  reply.code(answer.status).header('connection', 'close').header(RESPONSE_HEADERS.requestId, request.id)
    .type(JSON_CONTENT_TYPE).send(answer.toBody());
}

/** The server options that answer below the routes; they can only be given to Fastify(). */
export const edgeOptions = {
  genReqId: requestIdOf,
  clientErrorHandler: answerClientError,
  frameworkErrors: answerFrameworkError,
};

/** The hooks every request passes (fastify-plugin, so they are the root's and reach every route). */
export const edge = fp(async (app: FastifyInstance) => {
  // Node answers an Expect other than 100-continue itself, with an empty 417, unless asked here.
  app.server.on('checkExpectation', (request: IncomingMessage) => {
    const answer = apiError('EXPECTATION_FAILED', String(request.headers.expect));
    app.log.info({ code: answer.code }, 'client error');
    answerRaw(request.socket, answer);
  });
  // Node sends 100 Continue as soon as it has the headers, so a client was told to send a
  // 500-row batch that a wrong token, the write limit or the body's size then refused unread.
  // The interim answer now goes when the body is first read (Fastify's body parser), after every
  // check that refuses a request without reading it (RFC 9110, section 10.1.1 lets the final
  // answer come instead).
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    request.on('newListener', function continueOnRead(event: string) {
      if (event !== 'data' && event !== 'readable') return;
      request.off('newListener', continueOnRead);
      if (!response.headersSent) response.writeContinue();
    });
    app.server.emit('request', request, response);
  });
  app.server.on('request', trackExchange);
  // While closing, a further request on a keep-alive connection that has been answered before
  // gets 503 (Fastify's own has another body shape); the first request of a connection accepted
  // before the close is served, however late it reaches the router.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A socket idle for PDS_IDLE_TIMEOUT_MS (or, between requests, the keep-alive timeout) is
  // closed; one whose request's body stopped arriving, unanswered yet, is answered 408 first, as
  // the request timeout answers a body that trickles. At the defaults both are 30 s, and the
  // silent close came first. With this listener Node closes none itself. A socket whose request,
  // received whole, is still being worked on (its answer not begun, bounded by the statement and
  // store timeouts) waits for it: a demo load of 60,000 students took 30 s and lost its answer,
  // tokens and all. One whose answer waits on its client to read is closed.
  app.server.on('timeout', (socket: Socket) => {
    if (requestArriving(socket) && socket.writable && !answeredRaw.has(socket)) {
      answerRaw(socket, apiError('REQUEST_TIMEOUT'));
    } else if (!beingWorkedOn(socket)) {
      socket.destroy();
    }
  });
  app.addHook('onRequest', async (request, reply) => {
    // Parsed behind a request answered raw: that answer closes the connection, and this one never runs.
    if (answeredRaw.has(request.raw.socket)) return reply.hijack();
    const carried = exchanges.get(request.raw.socket);
    if (closing && carried && carried.first !== request.raw) {
      throw apiError('SHUTTING_DOWN').withHeaders({ connection: 'close' });
    }
    // Node's own answer to a missing Host is an empty 400; this one has the documented body.
    // Node kept the first of several Host headers, and any value.
    if (!hostIsValid(request.raw)) throw apiError('BAD_REQUEST', 'host').withHeaders({ connection: 'close' });
    // Node reads the chunks and passes the rest on undecoded: a gzip body was read as not UTF-8,
    // and a plain one labelled gzip was written (RFC 9112, section 6.1: 501).
    const codings = request.headers['transfer-encoding'];
    if (codings !== undefined && !/^\s*chunked\s*$/i.test(codings)) {
      throw apiError('TRANSFER_CODING_NOT_IMPLEMENTED', codings).withHeaders({ connection: 'close' });
    }
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header(RESPONSE_HEADERS.requestId, request.id);
    // An answer given before the body was read (401, 413, 415…) ends the connection: the rest of
    // the body is never parsed, only dropped while the connection lingers.
    if (request.raw.complete === false) {
      reply.header('connection', 'close');
      lingerAfterAnswer(request.raw.socket);
    }
  });
}, { name: 'edge' });
