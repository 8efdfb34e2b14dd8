/**
 * Reads Prometheus's text exposition format into samples, so tests can compare counters before
 * and after traffic. Written here because the one parser on the registry
 * (parse-prometheus-text-format 1.1.1) merges the series of a labelled histogram into one and
 * drops their `_count` and `_sum`.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

// name, optional {labels}, value, optional timestamp.
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const ESCAPES: Readonly<Record<string, string>> = { '\\\\': '\\', '\\"': '"', '\\n': '\n' };

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, raw] of (match[2] ?? '').matchAll(LABEL)) labels[name] = raw.replace(/\\[\\"n]/g, (e) => ESCAPES[e]);
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the series `name` whose labels are exactly `labels`; 0 when it is not exposed yet. */
export function valueOf(samples: readonly Sample[], name: string, labels: Readonly<Record<string, string>> = {}): number {
  const wanted = Object.entries(labels);
  const found = samples.find((s) => s.name === name
    && Object.keys(s.labels).length === wanted.length && wanted.every(([k, v]) => s.labels[k] === v));
  return found?.value ?? 0;
}
