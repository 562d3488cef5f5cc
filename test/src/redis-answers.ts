/** A limiter that decides through a store: its decisions say which tier made them. */
export interface StoreBackedLimiter {
  consume(key: string): Promise<{ readonly tier: string }>;
}

/**
 * Decides on fresh keys (`<label>-0`, `<label>-1`, …, 10 ms apart) until one is decided by the
 * store again, not by the failure policy; resolves how long that took, or `Infinity` once
 * `withinMs` and 3 s more have gone by (a limiter that never recovers fails the caller's bound
 * rather than hanging the test).
 */
export async function msUntilStoreAnswers(
  limiter: StoreBackedLimiter,
  label: string,
  withinMs: number,
): Promise<number> {
  const start = performance.now();
  for (let i = 0; performance.now() - start < withinMs + 3000; i++) {
    const d = await limiter.consume(`${label}-${i}`);
    if (d.tier !== 'fallback') return performance.now() - start;
    await new Promise((r) => setTimeout(r, 10));
  }
  return Number.POSITIVE_INFINITY;
}
