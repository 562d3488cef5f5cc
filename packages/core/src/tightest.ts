/**
 * Whether limit `a` binds harder than limit `b`, so that a decision over several limits speaks
 * of `a`: the longer wait first, then fewer whole tokens left, then the longer time until full
 * (of 5 per second and 5 per minute with equal tokens, the minute binds). Ties keep the
 * earlier-listed limit. The wait is the request's own when it was denied (a denial names the
 * limit that keeps it waiting longest), and the next token's otherwise (an admission and a peek
 * name the limit the next request would meet first). `lua/bucket.lua`'s `tighter` is the same
 * rule; a property test keeps the two equal.
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
