/**
 * Helpers for tests that run against a store's own real-time clock (Redis's `TIME`), where a
 * fake clock cannot reach: measure what passed around the calls, and sleep for at least a span.
 */

/** Starts a stopwatch; calling it gives the whole ms since, rounded up, plus 1 for rounding. */
export function stopwatch(): () => number {
  const start = performance.now();
  return () => Math.ceil(performance.now() - start) + 1;
}

/**
 * Sleeps until `performance.now()` reaches `deadline`. A timer alone can fire early against that
 * clock (Node counts from the event loop's cached time), so it checks and sleeps again, at most
 * 10 times.
 */
export async function sleepUntil(deadline: number): Promise<void> {
  for (let round = 0; round < 10; round++) {
    const left = deadline - performance.now();
    if (left <= 0) return;
    await new Promise((resolve) => setTimeout(resolve, Math.ceil(left)));
  }
}

/** Sleeps at least `ms` by `performance.now()`. */
export function sleepAtLeast(ms: number): Promise<void> {
  return sleepUntil(performance.now() + ms);
}

/** How often `waitUntil` checks. */
const WAIT_POLL_MS = 50;

/**
 * Checks `check` every 50 ms until it holds, and throws naming `what` if it has not within
 * `timeoutMs`: a test that needs a topology in some state says so when it never gets there,
 * rather than going on from the wrong one.
 */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() >= deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await sleepAtLeast(WAIT_POLL_MS);
  }
}
