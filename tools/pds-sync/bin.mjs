#!/usr/bin/env node
// The `pds-sync` command (package.json "bin"): runs the TypeScript through tsx, so a checkout needs no build.
import { register } from 'tsx/esm/api';

register();
const { run } = await import('./main.ts');
// Exits at once: a run stopped by a signal leaves its batch in flight unanswered (continuing the run answers it).
process.exit(await run(process.argv.slice(2), process.env, process.stdout, process.stderr));
