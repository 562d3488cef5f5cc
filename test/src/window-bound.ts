/**
 * The fleet's accuracy check: over every window of time, were no more tokens admitted than a
 * bound allows? One implementation for unit tests (fake clock, exact numbers), multi-process
 * tests and the bench (tens of thousands of stamps), each passing the bound of the mode it checks.
 */

/** One admission: when (ms) and how many tokens. A bare number is one token at that time. */
export type Admission = number | { readonly atMs: number; readonly cost: number };

/**
 * The most tokens a limit may admit over a closed window of `windowMs` (both ends counted), e.g.
 * `capacity + rate × W` (the global bucket alone) or `capacity + rate × (W + L)` (leases of
 * lifetime L). It must be affine on each piece of `WindowCheckOptions.pieceMs`: on the whole of
 * [0, ∞) unless a piece length is given.
 */
export type WindowBound = (windowMs: number) => number;

/** Options of `worstWindow`. */
export interface WindowCheckOptions {
  /**
   * The bound is affine on each [k·pieceMs, (k+1)·pieceMs), and may jump or bend between pieces:
   * e.g. a bound with a term `n × ⌊W / S⌋` passes `pieceMs: S`. Each piece costs one O(n) sweep.
   * @default Infinity (one affine piece)
   */
  pieceMs?: number;
}

/** The window that came closest to its bound, or went furthest over it. */
export interface WorstWindow {
  /** Tokens admitted in the window (its first and last admission included). */
  readonly admitted: number;
  readonly fromMs: number;
  readonly toMs: number;
  /** `toMs − fromMs`. */
  readonly windowMs: number;
  /** `bound(windowMs)`. */
  readonly bound: number;
  /** `admitted − bound`: ≤ 0 (within 1e-9) means the bound held over every window. */
  readonly excess: number;
  /** `excess ≤ 1e-9`: floating-point sums of fractional costs may land a hair over an exact bound. */
  readonly held: boolean;
}

/** Tolerance of `held`, for sums of fractional costs. */
export const WINDOW_EPSILON = 1e-9;

/**
 * `capacity + ratePerSecond × (windowMs + extraMs) / 1000`: the token bucket's bound (`extraMs` 0),
 * or with leases of lifetime L (`extraMs` L), plus any slack for late timestamps.
 */
export function tokenBucketBound(capacity: number, ratePerSecond: number, extraMs = 0): WindowBound {
  return (windowMs) => capacity + (ratePerSecond * (windowMs + extraMs)) / 1000;
}

/** Optimistic cold start's terms: `instances` each admitting up to `credit` once per `spacingMs` per key. */
export interface OptimisticTerms {
  readonly instances: number;
  readonly credit: number;
  readonly spacingMs: number;
}

/**
 * The bound with optimistic cold start: `tokenBucketBound(…)` plus `N·credit·(1 + ⌊W / spacingMs⌋)`
 * (each instance may start a key on credit once per spacing). Affine on each piece of
 * `spacingMs`: check it with `worstWindow(…, { pieceMs: spacingMs })`.
 */
export function optimisticBound(
  capacity: number,
  ratePerSecond: number,
  terms: OptimisticTerms,
  extraMs = 0,
): WindowBound {
  const base = tokenBucketBound(capacity, ratePerSecond, extraMs);
  const episode = terms.instances * terms.credit;
  return (windowMs) => base(windowMs) + episode * (1 + Math.floor(windowMs / terms.spacingMs));
}

interface Sorted {
  readonly at: Float64Array;
  /** `sum[i]`: the cost of admissions 0 … i − 1. */
  readonly sum: Float64Array;
}

function sortAdmissions(admissions: readonly Admission[]): Sorted {
  const pairs = admissions.map((a) => (typeof a === 'number' ? { atMs: a, cost: 1 } : a));
  pairs.sort((a, b) => a.atMs - b.atMs);
  const at = new Float64Array(pairs.length);
  const sum = new Float64Array(pairs.length + 1);
  for (let i = 0; i < pairs.length; i++) {
    const { atMs, cost } = pairs[i]!;
    if (!Number.isFinite(atMs) || !(cost >= 0)) {
      throw new RangeError(`admission ${i}: expected a finite atMs and a cost ≥ 0, got ${atMs}, ${cost}`);
    }
    at[i] = atMs;
    sum[i + 1] = sum[i]! + cost;
  }
  return { at, sum };
}

/** Where a piece's affinity is checked, as fractions of its span: off any round number. */
const PROBES = [0.137, 0.382, 0.618, 0.931];

/** The bound on [lo, hi) as `alpha + beta × W`, checked at a few more points of the piece. */
function affinePiece(bound: WindowBound, lo: number, hi: number): { alpha: number; beta: number } {
  const span = Number.isFinite(hi) ? hi - lo : 9973;
  const atLo = bound(lo);
  const beta = (bound(lo + span * 0.5) - atLo) / (span * 0.5);
  const alpha = atLo - beta * lo;
  for (const fraction of PROBES) {
    const w = lo + span * fraction;
    const expected = alpha + beta * w;
    if (!(Math.abs(bound(w) - expected) <= 1e-6 * Math.max(1, Math.abs(expected)))) {
      throw new RangeError(
        `worstWindow: the bound is not affine on [${lo}, ${hi}) ms (bound(${w}) = ${bound(w)}, ` +
          `expected ${expected}): pass pieceMs, the length of the pieces on which it is`,
      );
    }
  }
  return { alpha, beta };
}

/**
 * The window, between two admissions, where `admitted − bound(window)` is largest. Exact for a
 * bound that is affine on each piece (see `WindowCheckOptions`), in O(n log n) for the sort and
 * one O(n) two-pointer sweep per piece. On a piece where the bound is `α + β·W`, the window from
 * admission i to admission j exceeds it by `R(j) − A(i) − α`, with `R(j) = sum(0…j) − β·t(j)` and
 * `A(i) = sum(0…i−1) − β·t(i)`; for each j the i whose window length falls in the piece form a
 * range that only moves forward (two pointers), and the smallest `A(i)` in it is kept by a
 * monotone queue.
 *
 * @example
 * const worst = worstWindow(stamps, tokenBucketBound(100, 200, leaseTtlMs));
 * expect(worst.excess).toBeLessThanOrEqual(WINDOW_EPSILON);
 */
export function worstWindow(
  admissions: readonly Admission[],
  bound: WindowBound,
  options: WindowCheckOptions = {},
): WorstWindow {
  const pieceMs = options.pieceMs ?? Number.POSITIVE_INFINITY;
  if (!(pieceMs > 0)) throw new RangeError(`worstWindow: pieceMs must be > 0, got ${pieceMs}`);
  const { at, sum } = sortAdmissions(admissions);
  const n = at.length;
  if (n === 0) {
    const b = bound(0);
    return { admitted: 0, fromMs: 0, toMs: 0, windowMs: 0, bound: b, excess: -b, held: -b <= WINDOW_EPSILON };
  }
  const span = at[n - 1]! - at[0]!;
  let best = { excess: Number.NEGATIVE_INFINITY, i: 0, j: 0 };
  const queue = new Int32Array(n);
  for (let lo = 0; lo <= span; lo += pieceMs) {
    const hi = lo + pieceMs;
    const { alpha, beta } = affinePiece(bound, lo, hi);
    const left = (i: number) => sum[i]! - beta * at[i]!;
    let head = 0;
    let tail = 0;
    let first = 0; // first i with at[j] − at[i] < hi
    let next = 0; // next i to enter: at[j] − at[i] ≥ lo
    for (let j = 0; j < n; j++) {
      while (next <= j && at[j]! - at[next]! >= lo) {
        const value = left(next);
        while (tail > head && left(queue[tail - 1]!) >= value) tail--;
        queue[tail++] = next++;
      }
      while (at[j]! - at[first]! >= hi) first++;
      while (tail > head && queue[head]! < first) head++;
      if (tail === head) continue;
      const i = queue[head]!;
      const excess = sum[j + 1]! - beta * at[j]! - left(i) - alpha;
      if (excess > best.excess) best = { excess, i, j };
    }
  }
  const fromMs = at[best.i]!;
  const toMs = at[best.j]!;
  const admitted = sum[best.j + 1]! - sum[best.i]!;
  const b = bound(toMs - fromMs);
  const excess = admitted - b;
  return {
    admitted,
    fromMs,
    toMs,
    windowMs: toMs - fromMs,
    bound: b,
    excess,
    held: excess <= WINDOW_EPSILON,
  };
}

/** The most tokens admitted in any closed window of `windowMs`, by a two-pointer sweep. */
export function mostInWindow(
  admissions: readonly Admission[],
  windowMs: number,
): { admitted: number; fromMs: number } {
  const { at, sum } = sortAdmissions(admissions);
  let most = { admitted: 0, fromMs: at[0] ?? 0 };
  for (let i = 0, j = 0; j < at.length; j++) {
    while (at[j]! - at[i]! > windowMs) i++;
    const admitted = sum[j + 1]! - sum[i]!;
    if (admitted > most.admitted) most = { admitted, fromMs: at[i]! };
  }
  return most;
}
