import { ArgumentError, ConfigError, CostExceedsCapacityError } from './errors.js';
import { assertInteger, assertKnownOptions, assertPositive } from './validate.js';

/** Largest capacity a limit accepts: leaves every sum of tokens and costs exact in a double. */
export const MAX_CAPACITY = 1_000_000_000;
/** Largest refill rate a limit accepts, in tokens per second. */
export const MAX_REFILL_PER_SECOND = 1_000_000_000;
/**
 * Smallest refill rate a limit accepts: one token in about 11.6 days. Below it the rate per ms
 * underflows toward 0 and waits stop being finite numbers.
 */
export const MIN_REFILL_PER_SECOND = 1e-6;

const NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * One token bucket, validated and frozen: at most `capacity` tokens (the burst), refilled
 * continuously at `refillPerSecond`. Build it with `defineLimit`, `perSecond`, `perMinute`
 * or `perHour`, never by hand, so that a bad value is refused where it is written.
 */
export interface LimitSpec {
  /** Names the bucket inside a key's store entry; unique among the limits of one limiter. */
  readonly name: string;
  /** Most tokens the bucket holds, and so the largest burst and the largest cost. */
  readonly capacity: number;
  /** Tokens added per second, possibly fractional (100 per minute is 1.666… per second). */
  readonly refillPerSecond: number;
  /** The same rate per millisecond, precomputed for the hot path. */
  readonly refillPerMs: number;
  /** Milliseconds an empty bucket takes to fill: the longest a store ever keeps the key. */
  readonly fillMs: number;
}

/** Options of `defineLimit`. */
export interface LimitOptions {
  /** Most tokens the bucket holds: a whole number from 1 to 1,000,000,000. */
  capacity: number;
  /** Tokens added per second: a finite number above 0, fractions allowed. */
  refillPerSecond: number;
  /**
   * Names the bucket in store keys: 1–64 of `A-Z a-z 0-9 _ . -`.
   * @default `${capacity}-${refillPerSecond}ps`
   */
  name?: string;
}

/**
 * Validates and freezes a token bucket: throws a `ConfigError` naming the field for a
 * capacity or rate that is zero, negative, NaN, Infinity or (for capacity) fractional.
 *
 * @example
 * const api = defineLimit({ capacity: 20, refillPerSecond: 5, name: 'api' });
 */
export function defineLimit(options: LimitOptions): LimitSpec {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError('limit', options, 'an object');
  }
  assertKnownOptions('', options, ['capacity', 'refillPerSecond', 'name']);
  const capacity = assertInteger('capacity', options.capacity, 1, MAX_CAPACITY);
  const refillPerSecond = assertPositive('refillPerSecond', options.refillPerSecond, MAX_REFILL_PER_SECOND);
  if (refillPerSecond < MIN_REFILL_PER_SECOND) {
    throw new ConfigError(
      'refillPerSecond',
      refillPerSecond,
      `at least ${MIN_REFILL_PER_SECOND} (one token in about 11.6 days)`,
    );
  }
  const name = options.name ?? `${capacity}-${refillPerSecond}ps`;
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    throw new ConfigError('name', name, '1 to 64 characters of A-Z, a-z, 0-9, _, . or -');
  }
  const refillPerMs = refillPerSecond / 1000;
  return Object.freeze({ name, capacity, refillPerSecond, refillPerMs, fillMs: capacity / refillPerMs });
}

/**
 * Validates a limiter's list of limits: at least one, each built by `defineLimit`, names
 * unique (they become separate keys). Returns the list frozen.
 */
export function assertLimits(option: string, limits: unknown): readonly LimitSpec[] {
  const list = Array.isArray(limits) ? limits : [limits];
  if (list.length === 0) throw new ConfigError(option, limits, 'at least one limit');
  const names = new Set<string>();
  for (const spec of list as LimitSpec[]) {
    if (!isWellFormed(spec)) {
      throw new ConfigError(option, spec, 'a limit made by defineLimit, perSecond, perMinute or perHour');
    }
    if (names.has(spec.name)) throw new ConfigError(`${option}.name`, spec.name, 'unique among the limits');
    names.add(spec.name);
  }
  return Object.freeze(list.slice()) as readonly LimitSpec[];
}

/**
 * Whether `spec` is exactly what `defineLimit` makes of its own fields. A hand-made object with
 * an infinite capacity or a NaN rate would admit everything; checking the fields (rather than
 * remembering which objects `defineLimit` made) also accepts a limit made by another copy of
 * this package, as happens when ESM and CommonJS builds meet in one process.
 */
function isWellFormed(spec: unknown): boolean {
  if (spec === null || typeof spec !== 'object') return false;
  const s = spec as Record<string, unknown>;
  const { name, capacity, refillPerSecond } = s;
  return (
    typeof name === 'string' &&
    NAME_PATTERN.test(name) &&
    typeof capacity === 'number' &&
    Number.isInteger(capacity) &&
    capacity >= 1 &&
    capacity <= MAX_CAPACITY &&
    typeof refillPerSecond === 'number' &&
    refillPerSecond >= MIN_REFILL_PER_SECOND &&
    refillPerSecond <= MAX_REFILL_PER_SECOND &&
    s.refillPerMs === refillPerSecond / 1000 &&
    s.fillMs === capacity / (refillPerSecond / 1000)
  );
}

/** The smallest capacity among `limits`: the largest cost that can ever be admitted. */
export function smallestCapacity(limits: readonly LimitSpec[]): number {
  let min = Number.POSITIVE_INFINITY;
  for (const spec of limits) if (spec.capacity < min) min = spec.capacity;
  return min;
}

/**
 * Checks a request's cost on the request path: a whole number from 1 up, no larger than
 * `maxCost` (the smallest capacity). Throws `ArgumentError` or `CostExceedsCapacityError`.
 */
export function assertCost(cost: unknown, maxCost: number): number {
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1) {
    throw new ArgumentError('cost', cost, 'an integer from 1 up');
  }
  if (cost > maxCost) throw new CostExceedsCapacityError(cost, maxCost);
  return cost;
}

/** Checks a request's key on the request path: any string, empty included. */
export function assertKey(key: unknown): string {
  if (typeof key !== 'string') throw new ArgumentError('key', key, 'a string');
  return key;
}

/**
 * The limit a decision speaks of when every bucket is full: the smallest capacity, and of
 * equal capacities the slowest to refill, then the first listed (core's `isTighter` rule).
 */
export function tightestWhenFull(limits: readonly LimitSpec[]): LimitSpec {
  let at = limits[0]!;
  for (const spec of limits) {
    if (spec.capacity < at.capacity || (spec.capacity === at.capacity && spec.fillMs > at.fillMs)) at = spec;
  }
  return at;
}
