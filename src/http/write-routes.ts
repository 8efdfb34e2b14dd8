/**
 * PUT, POST and PATCH on /v1/students and /v1/cohorts: batches of up to 500 rows with one
 * outcome per row. HTTP 200 means the batch was processed; the rows say how each went.
 * `Prefer: tx=rollback` makes it a dry run: the same answer, nothing written. An Idempotency-Key
 * makes a retry safe for every method: the answer is kept, and a repeat gets it back
 * (src/domain/idempotency-keys.ts). A dry run writes nothing, its key neither: it is checked, not kept.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../db/database.ts';
import type { Queryable } from '../db/store.ts';
import {
  type KeyedRequest, PURGE_INTERVAL_MS, type StoredAnswer, claimKey, completeKey, idempotencyKeyOf, purgeExpiredKeys, releaseKeyPersistently, requestHash,
} from '../domain/idempotency-keys.ts';
import { apiError } from '../errors.ts';
import { JSON_CONTENT_TYPE, requireJsonAccept } from '../query/media-types.ts';
import { parseWritePreferences } from '../query/preferences.ts';
import { WRITABLE_RESOURCES, type WritableResource } from '../resources/write-shapes.ts';
import { type BatchAnswer, type WriteMode, batchRows } from '../writes/batch.ts';
import { writeCohorts, writeStudents } from '../writes/batches.ts';
import { requireWriteToken } from './auth.ts';
import { noteBatch, notesOf } from './request-notes.ts';
import { RESPONSE_HEADERS } from './response-headers.ts';

const MODES: Record<'PUT' | 'POST' | 'PATCH', WriteMode> = { PUT: 'put', POST: 'post', PATCH: 'patch' };

/**
 * A write without a JSON Content-Type is 415 even when it has no body, which the body parsers
 * (src/http/json-bodies.ts) let through as none.
 */
function requireJson(request: FastifyRequest): void {
  const type = request.headers['content-type'] ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw apiError('UNSUPPORTED_MEDIA_TYPE');
  }
}

const WRITERS: Record<WritableResource, typeof writeStudents | typeof writeCohorts> = {
  students: writeStudents,
  cohorts: writeCohorts,
};

const sendAnswer = (reply: FastifyReply, answer: StoredAnswer) =>
  reply.code(answer.status).headers(answer.headers).type(JSON_CONTENT_TYPE).send(answer.body);

export function registerWriteRoutes(app: FastifyInstance, deps: { db: Database }): void {
  for (const resource of WRITABLE_RESOURCES) {
    for (const method of ['PUT', 'POST', 'PATCH'] as const) {
      // No body schema: rows are validated one by one into per-row outcomes (src/writes/).
      app.route({
        method,
        url: `/${resource}`,
        // After the write limit counted it (src/http/app.ts), so a write refused whole carries its headers.
        onRequest: requireWriteToken,
        handler: async (request, reply) => {
          requireJson(request);
          const { tx, preferenceApplied } = parseWritePreferences(request.headers.prefer);
          const dryRun = tx === 'rollback';
          requireJsonAccept(request.headers.accept);
          const key = idempotencyKeyOf(request.headers['idempotency-key']);
          const principal = request.principal;
          const headers: Record<string, string> = preferenceApplied.length > 0 ? { [RESPONSE_HEADERS.preferenceApplied]: preferenceApplied.join(', ') } : {};
          const answerOf = (result: BatchAnswer): StoredAnswer => ({ status: 200, headers, body: JSON.stringify(result) });
          const write = (beforeCommit?: (tx: Queryable, answer: BatchAnswer) => Promise<void>) =>
            WRITERS[resource](deps.db, principal.universityId!, MODES[method], request.body, { dryRun, beforeCommit });
          if (key === null || dryRun) {
            const result = await write();
            // The metrics and access log count written rows; a dry run wrote none.
            if (!dryRun) noteBatch(request, resource, result);
            return sendAnswer(reply, answerOf(result));
          }
          // A body refused whole (400, 413) never began: it claims no key and is not kept.
          batchRows(request.body, resource);
          const keyed: KeyedRequest = {
            universityId: principal.universityId!,
            tokenId: principal.tokenId,
            key,
            requestHash: requestHash({ method, resource, prefer: request.headers.prefer, body: request.body }),
          };
          const claim = await claimKey(deps.db, keyed, new Date());
          if (claim.kind === 'replay') {
            // Written before, and counted then: the metrics do not count its rows again.
            notesOf(request).idempotentReplay = true;
            return sendAnswer(reply, { ...claim.answer, headers: { ...claim.answer.headers, [RESPONSE_HEADERS.idempotentReplayed]: 'true' } });
          }
          let answer: StoredAnswer;
          try {
            const result = await write(async (batchTx, batchAnswer) => {
              answer = answerOf(batchAnswer);
              await completeKey(batchTx, keyed, claim.claimId, answer);
            });
            noteBatch(request, resource, result);
          } catch (error) {
            // The batch's transaction rolled back: nothing was written, so a retry must run it again.
            await releaseKeyPersistently(deps.db, keyed, claim.claimId, (releaseError) =>
              request.log.warn({ err: releaseError }, 'idempotency key not released; its lease frees it'));
            throw error;
          }
          // The very text that was stored: a repeat gets the same bytes.
          return sendAnswer(reply, answer!);
        },
      });
    }
  }
  schedulePurge(app, deps.db);
}

/** Each instance deletes expired keys now and then; the first purge runs one interval after start. */
function schedulePurge(app: FastifyInstance, db: Database): void {
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = purgeExpiredKeys(db, new Date()).catch((error: unknown) => app.log.warn({ err: error }, 'idempotency key purge failed'));
  }, PURGE_INTERVAL_MS).unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await running;
  });
}
