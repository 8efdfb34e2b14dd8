import assert from 'node:assert/strict';

/** Checks `check` every `everyMs` until it holds; fails the test, naming `what`, when it has not within `withinMs`. */
export async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string, everyMs = 50): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `${what}: not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
