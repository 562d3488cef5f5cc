/**
 * The bound of docs/ACCURACY.md for the mode a fuzz run used, checked over every window of one
 * key's admissions, with its additions: the rewards that landed in the window, and a reset's lift
 * (a window holding it: the capacity less what it found) or its forgotten lease (a window starting
 * while that lease could be spent).
 */
import type { Credit, ResetMark } from './delayed-store.js';

/** The bound's terms: the largest capacity and rate in force, `T`, and optimistic cold start's. */
export interface FuzzBound {
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly aheadMs: number;
  readonly optimistic?: { readonly instances: number; readonly credit: number; readonly spacingMs: number };
}

/** The worst window found: what it admitted against what the bound allowed there. */
export interface FuzzWindow {
  readonly fromMs: number;
  readonly toMs: number;
  readonly admitted: number;
  readonly allowed: number;
}

const EPSILON = 1e-6;

/** The window of `stamps` furthest over (or least under) the bound, every pair of admissions tried. */
export function worstFuzzWindow(
  stamps: readonly { atMs: number; cost: number }[],
  bound: FuzzBound,
  credits: readonly Credit[],
  resets: readonly ResetMark[],
): FuzzWindow & { held: boolean } {
  // Admissions at one moment are one admission: the pairs shrink to the distinct moments.
  const at = new Map<number, number>();
  for (const s of stamps) at.set(s.atMs, (at.get(s.atMs) ?? 0) + s.cost);
  const times = [...at.keys()].sort((a, b) => a - b);
  let worst: FuzzWindow = { fromMs: 0, toMs: 0, admitted: 0, allowed: bound.capacity };
  for (let i = 0; i < times.length; i++) {
    let admitted = 0;
    const a = times[i]!;
    for (let j = i; j < times.length; j++) {
      const b = times[j]!;
      admitted += at.get(b)!;
      const allowed = allowedIn(a, b, bound, credits, resets);
      if (admitted - allowed > worst.admitted - worst.allowed)
        worst = { fromMs: a, toMs: b, admitted, allowed };
    }
  }
  return { ...worst, held: worst.admitted <= worst.allowed + EPSILON };
}

function allowedIn(
  a: number,
  b: number,
  bound: FuzzBound,
  credits: readonly Credit[],
  resets: readonly ResetMark[],
): number {
  const w = b - a;
  let allowed = bound.capacity + (bound.ratePerSecond * (w + bound.aheadMs)) / 1000;
  const o = bound.optimistic;
  if (o !== undefined) allowed += o.instances * o.credit * (1 + Math.floor(w / o.spacingMs));
  for (const c of credits) if (c.atMs >= a && c.atMs <= b) allowed += c.tokens;
  for (const r of resets) {
    // Across a rollout of new limits the fresh bucket is full to the larger capacity.
    if (r.atMs >= a && r.atMs <= b) allowed += bound.capacity - r.tokens;
    else if (r.atMs < a && a <= r.untilMs) allowed += r.held;
  }
  return allowed;
}
