/**
 * Whether limit `a` binds harder than limit `b`, so that a decision over several limits speaks
 * of `a`: the longer wait for the request's cost first (a denial names the limit that denied,
 * and the one that keeps it waiting longest), then fewer whole tokens left, then the longer
 * time until full (of 5 per second and 5 per minute with equal tokens, the minute binds).
 * Ties keep the earlier-listed limit. `lua/bucket.lua`'s `tighter` is the same rule; a
 * property test keeps the two equal.
 */
export function isTighter(
  aWaitMs: number,
  aRemaining: number,
  aFullInMs: number,
  bWaitMs: number,
  bRemaining: number,
  bFullInMs: number,
): boolean {
  if (aWaitMs !== bWaitMs) return aWaitMs > bWaitMs;
  if (aRemaining !== bRemaining) return aRemaining < bRemaining;
  return aFullInMs > bFullInMs;
}
