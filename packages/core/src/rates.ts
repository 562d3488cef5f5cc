// Limits written as a count per period: sugar over `defineLimit`, which checks the bucket.

import { ConfigError } from './errors.js';
import { defineLimit, type LimitSpec, MAX_CAPACITY } from './limit.js';
import { assertInteger, assertKnownOptions } from './validate.js';

/** Options of the `perSecond`, `perMinute` and `perHour` helpers. */
export interface RateOptions {
  /**
   * Most tokens the bucket holds. By default the count itself, so that `perMinute(100)`
   * admits a burst of 100 and then 100 per minute.
   * @default the count
   */
  burst?: number;
  /** Names the bucket in store keys. @default e.g. `100pm` for `perMinute(100)` */
  name?: string;
}

/**
 * `count` tokens per second, with a burst of `count` unless `burst` says otherwise.
 *
 * @example
 * const limit = perSecond(10); // burst 10, then 10 per second
 */
export function perSecond(count: number, options: RateOptions = {}): LimitSpec {
  return perPeriod(count, 1, 'ps', options);
}

/**
 * `count` tokens per minute (`count / 60` per second: 100 per minute is 1.666…, not 1).
 *
 * @example
 * const login = perMinute(5, { name: 'login' });
 */
export function perMinute(count: number, options: RateOptions = {}): LimitSpec {
  return perPeriod(count, 60, 'pm', options);
}

/**
 * `count` tokens per hour (`count / 3600` per second).
 *
 * @example
 * const hourly = perHour(1000, { burst: 100 });
 */
export function perHour(count: number, options: RateOptions = {}): LimitSpec {
  return perPeriod(count, 3600, 'ph', options);
}

function perPeriod(count: number, seconds: number, suffix: string, options: RateOptions): LimitSpec {
  assertInteger('count', count, 1, MAX_CAPACITY);
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError('options', options, 'an object');
  }
  assertKnownOptions('', options, ['burst', 'name']);
  if (options.burst !== undefined) assertInteger('burst', options.burst, 1, MAX_CAPACITY);
  return defineLimit({
    capacity: options.burst ?? count,
    refillPerSecond: count / seconds,
    name: options.name ?? `${count}${suffix}`,
  });
}
