import { defineLimit, type LimitSpec } from '@tiered-limiter/core';

/** A limit a row runs at, with the words the tables use for it. */
export interface BenchLimit {
  readonly spec: LimitSpec;
  /** In task names: `100 at 10/s`, `ceiling`. */
  readonly short: string;
  /** Above a table: what the limit is and whether it bites. */
  readonly title: string;
  /** True for the row that never denies: it times the admitting path alone. */
  readonly ceiling: boolean;
}

function limit(capacity: number, refillPerSecond: number, short: string, title: string): BenchLimit {
  return {
    spec: defineLimit({ capacity, refillPerSecond, name: short.replaceAll(/[^A-Za-z0-9]+/g, '-') }),
    short,
    title,
    ceiling: capacity >= 1_000_000_000,
  };
}

/** A hot key at a limit that bites hard: a burst of 100, then 10 per second. */
export const BITES_10 = limit(100, 10, '100 at 10/s', 'Limit that bites: capacity 100, 10 per second');
/** A hot key at a limit that bites, with a refill rate a busy API key might have. */
export const BITES_200 = limit(100, 200, '100 at 200/s', 'Limit that bites: capacity 100, 200 per second');
/**
 * 100,000 keys taken in turn come back every 100,000 decisions: one token per 10 s makes the limit
 * bite on the second visit of a limiter that comes back within 10 s (10 k decisions a second or
 * more); a slower one, rate-limiter-flexible here, meets every key refilled.
 */
export const KEYS_BITE = limit(1, 0.1, '1 per 10 s', 'Limit that bites per key: capacity 1, one per 10 s');
/** A billion a second with a burst of a billion: every call admitted, the admitting path alone. */
export const CEILING = limit(
  1_000_000_000,
  1_000_000_000,
  'ceiling',
  'Ceiling: capacity and rate 10⁹, never denies (the admitting path alone)',
);

/**
 * rate-limiter-flexible counts `points` per fixed window of `durationS` seconds. A token bucket has
 * no exact equivalent there; the nearest is the same rate over windows of at least 1 s: `rate` per
 * 1 s, or for a rate below 1/s one point per `1 / rate` seconds.
 */
export interface PeerLimit {
  readonly points: number;
  readonly durationS: number;
}

export function peerLimitOf(spec: LimitSpec): PeerLimit {
  const durationS = spec.refillPerSecond >= 1 ? 1 : Math.ceil(1 / spec.refillPerSecond);
  return { points: Math.max(1, Math.round(spec.refillPerSecond * durationS)), durationS };
}
