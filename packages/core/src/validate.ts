import type { Clock } from './clock.js';
import { ConfigError } from './errors.js';

/**
 * Throws a `ConfigError` naming `option` unless `value` is an integer in [min, max].
 * Used by every constructor so a bad option fails where it is written, not on first use.
 */
export function assertInteger(
  option: string,
  value: unknown,
  min = 1,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(option, value, rangeText('an integer', min, max));
  }
  return value;
}

/** Throws a `ConfigError` naming `option` unless `value` is a finite number in (0, max]. */
export function assertPositive(option: string, value: unknown, max = Number.MAX_VALUE): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > max) {
    throw new ConfigError(
      option,
      value,
      max === Number.MAX_VALUE ? 'a finite number above 0' : `a finite number above 0 and at most ${max}`,
    );
  }
  return value;
}

/** Throws a `ConfigError` naming `option` unless `value` is a finite number in [min, max]. */
export function assertInRange(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new ConfigError(option, value, `a finite number from ${min} to ${max}`);
  }
  return value;
}

/** Throws a `ConfigError` naming `option` unless `value` is one of `allowed`. */
export function assertOneOf<T extends string>(option: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !allowed.includes(value as T)) {
    throw new ConfigError(option, value, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`);
  }
  return value as T;
}

function rangeText(what: string, min: number, max: number): string {
  if (max === Number.MAX_SAFE_INTEGER) return min === 0 ? `${what} from 0 up` : `${what} from ${min} up`;
  return `${what} from ${min} to ${max}`;
}

/**
 * Throws a `ConfigError` naming `option` unless `value` is a clock: an object whose `now()`
 * returns a finite number. Called once at construction, so a bad clock fails there and not as
 * an unsettled decision or an unhandled rejection later.
 */
export function assertClock(option: string, value: unknown): Clock {
  const clock = value as { now?: unknown } | null;
  if (clock === null || typeof clock !== 'object' || typeof clock.now !== 'function') {
    throw new ConfigError(option, value, 'an object with a now() method returning milliseconds');
  }
  let reading: unknown;
  try {
    reading = (clock as { now(): unknown }).now();
  } catch (error) {
    throw new ConfigError(option, value, `a clock whose now() works (it threw ${String(error)})`);
  }
  if (typeof reading !== 'number' || !Number.isFinite(reading)) {
    throw new ConfigError(
      option,
      value,
      `a clock whose now() returns a finite number (it returned ${String(reading)})`,
    );
  }
  return clock as Clock;
}

/** Throws a `ConfigError` naming `option` unless `value` is a boolean. */
export function assertBoolean(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(option, value, 'true or false');
  return value;
}

/** Throws a `ConfigError` naming `option` unless `value` is an object (not null, not an array). */
export function assertObject<T extends object>(option: string, value: unknown): T {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(option, value, 'an object');
  }
  return value as T;
}

/**
 * Throws a `ConfigError` for the first own key of `options` (at `where`, `''` for the top level)
 * that is not in `known` and is set. From JavaScript a misspelt option (`timeoutMS`) was ignored,
 * its default silently in force; a key set to `undefined` is absent, as every option's default is.
 */
export function assertKnownOptions(where: string, options: object, known: readonly string[]): void {
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined || known.includes(name)) continue;
    throw new ConfigError(
      where === '' ? name : `${where}.${name}`,
      value,
      `not set: it is not an option (known: ${known.join(', ')})`,
    );
  }
}
