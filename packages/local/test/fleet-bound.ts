/**
 * The most any window of admissions exceeds `capacity + ratePerMs × window`, in one pass: for
 * admissions sorted by time, the excess of the window from i to j is
 * (S_j − r·t_j) − (S_{i−1} − r·t_i) − capacity, so a running minimum of the second term gives
 * the worst window ending at each j. ≤ 0 means every window kept the bound.
 */
export function fleetBoundExcess(
  stamps: readonly { atMs: number; cost: number }[],
  capacity: number,
  ratePerMs: number,
): { excess: number; fromMs: number; toMs: number; admitted: number } {
  const sorted = [...stamps].sort((a, b) => a.atMs - b.atMs);
  let worst = { excess: Number.NEGATIVE_INFINITY, fromMs: 0, toMs: 0, admitted: 0 };
  let before = 0; // S_{i-1}
  let best = Number.POSITIVE_INFINITY;
  let bestAt = 0;
  let bestBefore = 0;
  let sum = 0;
  for (const s of sorted) {
    const start = before - ratePerMs * s.atMs;
    if (start < best) {
      best = start;
      bestAt = s.atMs;
      bestBefore = before;
    }
    sum += s.cost;
    before = sum;
    const excess = sum - ratePerMs * s.atMs - best - capacity;
    if (excess > worst.excess) worst = { excess, fromMs: bestAt, toMs: s.atMs, admitted: sum - bestBefore };
  }
  return worst;
}
