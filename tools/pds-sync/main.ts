/**
 * pds-sync: pushes a SIS export (CSV files of cohorts and students) to the partner data service,
 * cohorts first, in batches, with retries, a progress display, a report of the rows to read
 * (rejected, or applied with notes) and a summary.
 * A client of the HTTP API: from the service's code it takes only shared definitions (the write
 * shapes, the batch limit, the row outcomes). Everything it is given is checked and every file
 * read before the first request.
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command } from 'commander';
import { LIMITS } from '../../src/limits.ts';
import type { WritableResource } from '../../src/resources/write-shapes.ts';
import type { StudentRowCode } from '../../src/writes/row-codes.ts';
import { type BatchResponse, backoffMs, sendBatch } from './client.ts';
import { type InputFile, type InputRow, readInputFile } from './csv-input.ts';
import { SyncInputError, SyncRequestError } from './errors.ts';
import { type Flags, type SyncPlan, declareOptions, neededFields, resolvePlan } from './options.ts';
import { BarProgress, LineProgress, type Progress } from './progress.ts';
import { type Reported, type Tally, emptyTally, startRejectReport, summaryTable, writeRejectReport } from './report.ts';

/** The process's exit status. */
const EXIT = {
  /** Every row was processed and none was rejected. */
  ok: 0,
  /** Bad input (nothing was sent), or the service refused or stayed unavailable (the sync stopped there). */
  failed: 1,
  /** Every row was processed; some were rejected (see the reject report). */
  rejectedRows: 2,
} as const;

/** Cohorts go first: a student can only name a cohort that exists. A new writable resource must be placed. */
const SYNC_ORDER: Record<WritableResource, number> = { cohorts: 0, students: 1 };

const chunks = <T>(items: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

interface Outcome {
  readonly tallies: Map<WritableResource, Tally>;
  /** The rows the report lists: the rejected ones and those applied with notes. */
  readonly reported: Reported[];
  /** Names of the cohorts a dry run reported it would create. */
  readonly cohortsCreated: Set<string>;
}

/** A row a retry can help: it lost a race for its address to another write (the row code says "retry the row"). */
const RACED = 'CONCURRENT_WRITE' satisfies StudentRowCode;

/**
 * One batch's answer, its raced rows sent again, on their own, until they are decided, the
 * attempts run out or the run is stopped; each resend has a key of its own (`<batch>.<resend>`),
 * so a continued run repeats it. The answer's results and counts are the rows' last outcomes,
 * also when a resend fails (`failure`): the batch was written, and its answer is reported.
 */
async function answerBatch(plan: SyncPlan, resource: WritableResource, rows: readonly InputRow[], batch: number, progress: Progress, stopping: AbortSignal):
  Promise<{ response: BatchResponse; failure: SyncRequestError | null }> {
  const send = (sent: readonly InputRow[], label: string) => sendBatch(
    { baseUrl: plan.baseUrl, token: plan.token, resource, mode: plan.mode, rows: sent.map((r) => r.body), dryRun: plan.dryRun, runId: plan.runId, batch: label },
    plan.retry,
    (notice) => progress.retrying(resource, batch, notice),
  );
  const answered = (response: BatchResponse, count: number, label: string) => {
    if (response.results?.length !== count) {
      throw new SyncRequestError(`${resource} batch ${label}: the service answered ${response.results?.length ?? 'no'} results for ${count} rows.`);
    }
    return response;
  };
  const first = answered(await send(rows, String(batch)), rows.length, String(batch));
  const results = [...first.results];
  let failure: SyncRequestError | null = null;
  for (let resend = 1; resend < plan.retry.maxAttempts && !stopping.aborted; resend++) {
    const raced = results.flatMap((result, i) => (result.code === RACED ? [i] : []));
    if (raced.length === 0) break;
    const delayMs = backoffMs(resend, plan.retry, null);
    progress.say(`${resource}: batch ${batch}: ${raced.length} row${raced.length === 1 ? '' : 's'} lost a race to another write (${RACED}); sending ${raced.length === 1 ? 'it' : 'them'} again in ${(delayMs / 1000).toFixed(1)} s`);
    await sleep(delayMs);
    if (stopping.aborted) break;
    const label = `${batch}.${resend}`;
    try {
      const again = answered(await send(raced.map((i) => rows[i]), label), raced.length, label);
      raced.forEach((i, j) => { results[i] = again.results[j]; });
    } catch (error) {
      if (!(error instanceof SyncRequestError)) throw error;
      failure = error;
      break;
    }
  }
  const counts = emptyTally();
  for (const result of results) counts[result.status]++;
  return { response: { ...first, counts, results }, failure };
}

async function syncFile(plan: SyncPlan, file: InputFile, progress: Progress, outcome: Outcome, stopping: AbortSignal): Promise<void> {
  const tally = emptyTally();
  outcome.tallies.set(file.resource, tally);
  if (stopping.aborted) return;
  const batches = chunks(file.rows, plan.batchSize);
  progress.start(file.resource, file.rows.length, batches.length);
  for (const [i, rows] of batches.entries()) {
    if (stopping.aborted) return;
    const { response, failure } = await answerBatch(plan, file.resource, rows, i + 1, progress, stopping);
    // Answered after a signal stopped the run: its report is written already, without this batch.
    if (stopping.aborted) return;
    response.results.forEach((result, j) => {
      tally[result.status]++;
      if (result.status === 'rejected' || result.notes?.length) outcome.reported.push({ file, row: rows[j], result });
      if (file.resource === 'cohorts' && result.status === 'created') outcome.cohortsCreated.add(String(rows[j].body.name));
    });
    progress.batchDone(file.resource, i + 1, response);
    if (failure) throw failure;
  }
}

/**
 * Every batch of the file fits the service's body limit; else bad input, found before anything
 * is sent: one oversized cell made its batch 413, which stopped the sync with the rest unsent.
 */
function checkBatchBytes(file: InputFile, batchSize: number): void {
  for (const rows of chunks(file.rows, batchSize)) {
    const sizes = rows.map((row) => Buffer.byteLength(JSON.stringify(row.body)));
    const bytes = Buffer.byteLength(JSON.stringify({ [file.resource]: [] })) + sizes.reduce((sum, size) => sum + size + 1, 0);
    if (bytes <= LIMITS.bodyBytes) continue;
    const largest = rows[sizes.indexOf(Math.max(...sizes))];
    throw new SyncInputError(`${file.path}: a batch of lines ${rows[0].line}–${rows.at(-1)!.line} would be ${bytes.toLocaleString('en-US')} bytes, `
      + `over the service's ${LIMITS.bodyBytes.toLocaleString('en-US')}; its largest row is line ${largest.line} (${Math.max(...sizes).toLocaleString('en-US')} bytes).`);
  }
}

/** Rows of a dry run that fail only because the cohort they name would be created by this same run. */
function blockedByDryRunCohorts(outcome: Outcome): number {
  return outcome.reported.filter(({ file, row, result }) =>
    file.resource === 'students' && result.code === 'COHORT_NOT_FOUND' && outcome.cohortsCreated.has(String(row.body.cohort_name))).length;
}

export async function run(argv: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WriteStream, err: NodeJS.WritableStream): Promise<number> {
  const program = declareOptions(new Command('pds-sync'))
    .description('Push cohorts and students from CSV files to the partner data service: cohorts first, then students in batches.')
    .addHelpText('after', '\nThe token comes from the PDS_TOKEN environment variable or --token-file, never from a flag.\n'
      + `Exit status: ${EXIT.ok} all rows processed, ${EXIT.rejectedRows} some rows rejected (see the reject report), `
      + `${EXIT.failed} bad input or the sync stopped.`)
    .showHelpAfterError('(pds-sync --help lists the options)')
    .allowExcessArguments(false)
    .parse(argv, { from: 'user' });

  let plan: SyncPlan;
  let files: InputFile[];
  try {
    plan = await resolvePlan(program.opts<Flags>(), env);
    await startRejectReport(plan.rejectReport, [...plan.inputs.values()].map(({ path }) => path));
    const ordered = [...plan.inputs].sort(([a], [b]) => SYNC_ORDER[a] - SYNC_ORDER[b]);
    files = await Promise.all(ordered.map(([resource, { path, mapping }]) =>
      readInputFile(resource, path, { mapping, needed: neededFields(resource, plan.mode), emptyAsNull: plan.emptyAsNull })));
    for (const file of files) checkBatchBytes(file, plan.batchSize);
  } catch (error) {
    if (!(error instanceof SyncInputError)) throw error;
    err.write(`pds-sync: ${error.message}\n(nothing was sent)\n`);
    return EXIT.failed;
  }

  const progress: Progress = out.isTTY ? new BarProgress(out) : new LineProgress(out);
  const outcome: Outcome = { tallies: new Map(), reported: [], cohortsCreated: new Set() };
  let failure: SyncRequestError | null = null;
  progress.say(`Run ${plan.runId}: should it stop, the same command with --run-id ${plan.runId} continues it.`);
  for (const notice of files.flatMap((file) => file.unsent)) progress.say(notice);
  if (plan.dryRun) progress.say('Dry run (Prefer: tx=rollback): the service answers what it would do and writes nothing.');
  // Stopped (Ctrl-C, a scheduler's time limit), it reports what the service answered so far, as a
  // refusal stops it; the batch in flight is answered again when the run is continued.
  const stopping = new AbortController();
  const stop = (signal: NodeJS.Signals) => stopping.abort(signal);
  const stopped = once(stopping.signal, 'abort').then(() => stopping.signal.reason as NodeJS.Signals);
  process.once('SIGINT', stop).once('SIGTERM', stop);
  try {
    const signal = await Promise.race([(async () => {
      for (const file of files) await syncFile(plan, file, progress, outcome, stopping.signal);
      return null;
    })(), stopped]);
    if (signal) failure = new SyncRequestError(`stopped by ${signal}`);
  } catch (error) {
    if (!(error instanceof SyncRequestError)) throw error;
    failure = error;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
    progress.stop();
  }

  await writeRejectReport(plan.rejectReport, files, outcome.reported);
  const rejected = outcome.reported.filter(({ result }) => result.status === 'rejected').length;
  const noted = outcome.reported.length - rejected;
  out.write(`\n${summaryTable(outcome.tallies)}\n`);
  if (rejected > 0) out.write(`Rejected rows: ${rejected}, listed in ${plan.rejectReport}\n`);
  const blocked = plan.dryRun ? blockedByDryRunCohorts(outcome) : 0;
  if (blocked > 0) {
    out.write(`Of those, ${blocked} student rows name a cohort this run would create: a dry run writes no cohort, so they show `
      + 'COHORT_NOT_FOUND here and would not in a real run.\n');
  }
  if (noted > 0) out.write(`Rows applied with notes (read them: the service did not apply all as sent): ${noted}, listed in ${plan.rejectReport}\n`);
  if (plan.dryRun) out.write('Dry run: nothing was written.\n');
  if (failure) {
    err.write(`pds-sync: ${failure.message}\nThe sync stopped; the summary shows the batches the service answered. `
      + `To continue, run it again with --run-id ${plan.runId}: each batch is then sent with the same Idempotency-Key, `
      + 'so a batch the service already wrote is answered, not written twice.\n');
    return EXIT.failed;
  }
  return rejected > 0 ? EXIT.rejectedRows : EXIT.ok;
}
