import { mostInWindow, type WindowBound, worstWindow } from '@tiered-limiter/test-harness';
import { count } from './format.js';
import { ADMITTED, type Decider, type Outcome } from './loop.js';

/** The busiest window of a row against the bound of the limiter's mode. */
export interface WindowReport {
  /** The key it was on, when several were checked. */
  readonly key: string | null;
  /** Admitted in the window that came closest to (or went furthest over) the bound. */
  readonly admitted: number;
  readonly windowMs: number;
  readonly bound: number;
  /** `admitted − bound`: ≤ 0 means the bound held in every window. */
  readonly excess: number;
  /** The most admitted in any 1 s window, and the bound for 1 s. */
  readonly maxIn1s: number;
  readonly boundFor1s: number;
}

/**
 * A bound given how much more refill each window allows, ms: the slack its stamps need (how late a
 * stamp may trail its decision), and with the periodic sync what a lease may borrow (`T`).
 */
export type SlackedBound = (slackMs: number) => WindowBound;

/** The worst window of `stamps` (ms) against `bound`, and the busiest second. */
export function windowReport(
  stamps: readonly number[],
  bound: WindowBound,
  key: string | null = null,
  pieceMs?: number,
): WindowReport {
  const worst = worstWindow(stamps, bound, pieceMs === undefined ? {} : { pieceMs });
  return {
    key,
    admitted: worst.admitted,
    windowMs: worst.windowMs,
    bound: worst.bound,
    excess: worst.excess,
    maxIn1s: mostInWindow(stamps, 1000).admitted,
    boundFor1s: bound(1000),
  };
}

/** Of several keys' reports, the one that came closest to its bound (or went furthest over). */
export function worstOf(reports: readonly WindowReport[]): WindowReport | null {
  let worst: WindowReport | null = null;
  for (const report of reports) if (worst === null || report.excess > worst.excess) worst = report;
  return worst;
}

/** A decider that stamps the admissions of some keys, and checks them. */
export interface StampedKeys {
  readonly decider: Decider;
  /** Forgets the stamps so far (after the warm-up). */
  clear(): void;
  /** Each stamped key against `bound(slackMs)`; the worst of them. */
  check(bound: SlackedBound, slackMs: number, pieceMs?: number): WindowReport | null;
}

/**
 * Wraps `decider` to stamp (`performance.now()`) each admission of `keys` when its outcome is known.
 * The other keys pay one `Map` lookup, against the microseconds a decision on Redis takes.
 */
export function stampKeys(decider: Decider, keys: readonly string[]): StampedKeys {
  const stamps = new Map(keys.map((key) => [key, [] as number[]]));
  const record = (key: string, outcome: Outcome): Outcome => {
    if (outcome === ADMITTED) stamps.get(key)?.push(performance.now());
    return outcome;
  };
  const { sync, async } = decider;
  return {
    decider: {
      sync:
        sync === undefined
          ? undefined
          : (key) => {
              const outcome = sync(key);
              return outcome === undefined ? undefined : record(key, outcome);
            },
      async: (key) => async(key).then((outcome) => record(key, outcome)),
    },
    clear: () => {
      for (const list of stamps.values()) list.length = 0;
    },
    check: (bound, slackMs, pieceMs) =>
      worstOf([...stamps].map(([key, list]) => windowReport(list, bound(slackMs), key, pieceMs))),
  };
}

/** `admitted in W ms (bound B)`, `✗` when over. */
export function windowCell(w: WindowReport | null): string {
  if (w === null) return '—';
  const over = w.excess > 0 ? ' ✗' : '';
  return `${count(w.admitted)} in ${count(w.windowMs)} ms (bound ${count(Math.floor(w.bound))})${over}`;
}

/** The busiest second against its bound. */
export function secondCell(w: WindowReport | null): string {
  return w === null ? '—' : `${count(w.maxIn1s)} (bound ${count(Math.floor(w.boundFor1s))})`;
}
