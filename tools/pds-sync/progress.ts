/**
 * What pds-sync says while it works: on a terminal a progress bar per resource with rows per
 * second (cli-progress); elsewhere (a log file, a CI job, a pipe) one plain line per batch and per
 * retry, which a log reader can grep.
 */
import { MultiBar, Presets, type SingleBar } from 'cli-progress';
import type { WritableResource } from '../../src/resources/write-shapes.ts';
import type { BatchResponse, RetryNotice } from './client.ts';

export interface Progress {
  /** A resource's rows are about to be sent. */
  start(resource: WritableResource, totalRows: number, batches: number): void;
  /** A batch was answered. */
  batchDone(resource: WritableResource, batch: number, response: BatchResponse): void;
  retrying(resource: WritableResource, batch: number, notice: RetryNotice): void;
  /** A line that must not be overdrawn by the bar. */
  say(line: string): void;
  stop(): void;
}

interface Phase {
  readonly totalRows: number;
  readonly batches: number;
  readonly startedAt: number;
  done: number;
}

const rowsPerSecond = (phase: Phase) => Math.round(phase.done / Math.max(0.001, (Date.now() - phase.startedAt) / 1000));

/** Plain lines on standard output: one per batch, one per retry. */
export class LineProgress implements Progress {
  private readonly phases = new Map<WritableResource, Phase>();

  constructor(private readonly out: NodeJS.WritableStream) {}

  start(resource: WritableResource, totalRows: number, batches: number): void {
    this.phases.set(resource, { totalRows, batches, startedAt: Date.now(), done: 0 });
    this.say(`${resource}: ${totalRows} row${totalRows === 1 ? '' : 's'} in ${batches} batch${batches === 1 ? '' : 'es'}`);
  }

  batchDone(resource: WritableResource, batch: number, { counts, results, replayed }: BatchResponse): void {
    const phase = this.phases.get(resource)!;
    phase.done += results.length;
    // A continued run's batches written before are answered from their keys: nothing is written again.
    const answer = replayed ? 'answered as written by the earlier run' : 'done';
    this.say(`${resource}: batch ${batch}/${phase.batches} ${answer}, ${phase.done}/${phase.totalRows} rows, ${rowsPerSecond(phase)} rows/s `
      + `(created ${counts.created}, updated ${counts.updated}, unchanged ${counts.unchanged}, rejected ${counts.rejected})`);
  }

  retrying(resource: WritableResource, batch: number, notice: RetryNotice): void {
    this.say(retryLine(resource, batch, this.phases.get(resource)!.batches, notice));
  }

  say(line: string): void {
    this.out.write(`${line}\n`);
  }

  stop(): void {}
}

const retryLine = (resource: WritableResource, batch: number, batches: number, { attempt, maxAttempts, reason, delayMs }: RetryNotice) =>
  `${resource}: batch ${batch}/${batches}: ${reason}; attempt ${attempt} ${attempt <= maxAttempts ? `of ${maxAttempts}` : '(waiting for the key\'s lease to end)'} in ${(delayMs / 1000).toFixed(1)} s`;

/** A bar per resource on a terminal; retries and messages are printed above the bars. */
export class BarProgress implements Progress {
  private readonly bars: MultiBar;
  private readonly phases = new Map<WritableResource, Phase & { bar: SingleBar }>();

  constructor(stream: NodeJS.WritableStream) {
    this.bars = new MultiBar({
      format: '{resource} |{bar}| {value}/{total} rows | {rate} rows/s | {duration_formatted}',
      hideCursor: true,
      stream,
    }, Presets.shades_classic);
  }

  start(resource: WritableResource, totalRows: number, batches: number): void {
    const bar = this.bars.create(totalRows, 0, { resource: resource.padEnd(8), rate: 0 });
    this.phases.set(resource, { totalRows, batches, startedAt: Date.now(), done: 0, bar });
  }

  batchDone(resource: WritableResource, _batch: number, { results }: BatchResponse): void {
    const phase = this.phases.get(resource)!;
    phase.done += results.length;
    phase.bar.update(phase.done, { rate: rowsPerSecond(phase) });
  }

  retrying(resource: WritableResource, batch: number, notice: RetryNotice): void {
    this.say(retryLine(resource, batch, this.phases.get(resource)!.batches, notice));
  }

  say(line: string): void {
    this.bars.log(`${line}\n`);
  }

  stop(): void {
    this.bars.stop();
  }
}
