/**
 * One process per embedded data folder. PGlite has no lock of its own: two processes on one
 * folder each keep their own copy of the pages and overwrite each other's files, so
 * acknowledged writes vanish at the next start. The lock is a file created exclusively
 * (O_EXCL) holding the owner's pid and host, taken before PGlite opens the folder and removed
 * at exit. A lock left by a process that is gone (same host, pid not running, or our own pid
 * after a container restart) is stale and taken over.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const DATA_DIR_LOCK_FILE = 'pds.lock';

export class DataDirInUseError extends Error {}

interface Holder {
  pid: number;
  host: string;
}

function readIfExists(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

function parseHolder(text: string): Holder | null {
  try {
    const holder = JSON.parse(text) as Partial<Holder>;
    return Number.isInteger(holder.pid) && typeof holder.host === 'string' ? holder as Holder : null;
  } catch {
    return null;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Only a lock of this host can be judged; one written elsewhere is never taken over. */
function isStale(holder: Holder): boolean {
  return holder.host === hostname() && (holder.pid === process.pid || !isRunning(holder.pid));
}

function inUse(dir: string, path: string, holder: Holder | null): DataDirInUseError {
  const who = holder ? `process ${holder.pid} on ${holder.host}` : 'another process';
  return new DataDirInUseError(`PDS_DATA_DIR ${dir} is in use by ${who}; stop it or set PDS_DATA_DIR to another folder `
    + `(if no process uses the folder, delete ${path}).`);
}

/**
 * Moves the stale lock aside and removes it. Another process may have replaced it meanwhile;
 * then what was moved is that process's live lock, which is put back.
 */
function removeStale(path: string, staleText: string): boolean {
  const aside = `${path}.stale-${process.pid}`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw error;
  }
  if (readIfExists(aside) === staleText) {
    rmSync(aside, { force: true });
    return true;
  }
  renameSync(aside, path);
  return false;
}

export interface DataDirLock {
  release(): void;
}

/** Takes the folder's lock or throws DataDirInUseError; creates the folder when it is missing. */
export function lockDataDir(dir: string): DataDirLock {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, DATA_DIR_LOCK_FILE);
  const mine = JSON.stringify({ pid: process.pid, host: hostname() } satisfies Holder);
  // A stale lock is taken over once; losing that race to another process means it is in use.
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, mine, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const text = readIfExists(path);
    if (text === null) continue;
    const holder = parseHolder(text);
    if (attempt > 0 || holder === null || !isStale(holder) || !removeStale(path, text)) throw inUse(dir, path, holder);
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    if (readIfExists(path) === mine) rmSync(path, { force: true });
  };
  // Also when the process ends through process.exit or an uncaught error.
  process.once('exit', release);
  return { release };
}
