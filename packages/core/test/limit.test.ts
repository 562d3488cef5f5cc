import type { LimitSpec } from '@tiered-limiter/core';
import {
  ArgumentError,
  ConfigError,
  CostExceedsCapacityError,
  defineLimit,
  internal,
  MAX_CAPACITY,
  MAX_REFILL_PER_SECOND,
  MIN_REFILL_PER_SECOND,
  perHour,
  perMinute,
  perSecond,
} from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';
import { notCounts } from './not-counts.js';

const { assertCost, assertKey, assertLimits, smallestCapacity } = internal;

/** Runs `fn`, expects a `ConfigError`, and returns it for closer checks. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

/** The error names the field, carries the value as given, and shows it in the message. */
function expectRefused(fn: () => unknown, option: string, value: unknown, shown: string): void {
  const err = configError(fn);
  expect(err.code).toBe('ERR_TL_CONFIG');
  expect(err.option).toBe(option);
  expect(Object.is(err.value, value)).toBe(true);
  expect(err.message).toContain(`\`${option}\``);
  expect(err.message).toContain(`got ${shown}`);
}

// Every value no count or capacity may take, with how the message shows it.
const BAD_WHOLE: readonly [unknown, string][] = [
  [0, '0'],
  [-1, '-1'],
  [Number.NaN, 'NaN'],
  [Number.POSITIVE_INFINITY, 'Infinity'],
  [Number.NEGATIVE_INFINITY, '-Infinity'],
  [1.5, '1.5'],
  ['10', '"10"'],
  [null, 'null'],
  [10n, '10'],
  [MAX_CAPACITY + 1, '1000000001'],
];

const BAD_RATE: readonly [unknown, string][] = [
  [0, '0'],
  [-0.5, '-0.5'],
  [Number.NaN, 'NaN'],
  [Number.POSITIVE_INFINITY, 'Infinity'],
  ['5', '"5"'],
  [null, 'null'],
  [MAX_REFILL_PER_SECOND * 2, '2000000000'],
];

const BAD_NAME: readonly [unknown, string][] = [
  ['', '""'],
  ['has space', '"has space"'],
  ['a/b', '"a/b"'],
  ['x'.repeat(65), 'a string of length 65'],
  [42, '42'],
  [{}, 'a value of type object'],
];

describe('defineLimit', () => {
  it('freezes a valid limit and precomputes the per-ms rate and the fill time', () => {
    const spec = defineLimit({ capacity: 20, refillPerSecond: 5, name: 'api' });
    expect(spec).toEqual({ name: 'api', capacity: 20, refillPerSecond: 5, refillPerMs: 0.005, fillMs: 4000 });
    expect(Object.isFrozen(spec)).toBe(true);
  });

  it('names a limit after its numbers by default', () => {
    expect(defineLimit({ capacity: 20, refillPerSecond: 5 }).name).toBe('20-5ps');
    expect(defineLimit({ capacity: 3, refillPerSecond: 0.25 }).name).toBe('3-0.25ps');
  });

  it('accepts the largest capacity and rate, and fractional rates', () => {
    const big = defineLimit({ capacity: MAX_CAPACITY, refillPerSecond: MAX_REFILL_PER_SECOND });
    expect(big.capacity).toBe(1e9);
    expect(big.refillPerMs).toBe(1e6);
    expect(big.fillMs).toBe(1000);
    expect(defineLimit({ capacity: 1, refillPerSecond: 0.001 }).fillMs).toBe(1e6);
  });

  it.each(BAD_WHOLE)('refuses capacity %s', (value, shown) => {
    expectRefused(
      () => defineLimit({ capacity: value as number, refillPerSecond: 1 }),
      'capacity',
      value,
      shown,
    );
  });

  it.each(BAD_RATE)('refuses refillPerSecond %s', (value, shown) => {
    expectRefused(
      () => defineLimit({ capacity: 10, refillPerSecond: value as number }),
      'refillPerSecond',
      value,
      shown,
    );
  });

  it.each(BAD_NAME)('refuses name %s', (value, shown) => {
    expectRefused(
      () => defineLimit({ capacity: 10, refillPerSecond: 1, name: value as string }),
      'name',
      value,
      shown,
    );
  });

  it.each([
    [null, 'null'],
    [undefined, 'undefined'],
    [10, '10'],
  ])('refuses options %s', (value, shown) => {
    expectRefused(() => defineLimit(value as never), 'limit', value, shown);
  });

  it('says what it expected', () => {
    expect(configError(() => defineLimit({ capacity: 0, refillPerSecond: 1 })).message).toBe(
      '[tiered-limiter] Expected `capacity` to be an integer from 1 to 1000000000, got 0',
    );
    expect(configError(() => defineLimit({ capacity: 1, refillPerSecond: 0 })).message).toBe(
      '[tiered-limiter] Expected `refillPerSecond` to be a finite number above 0 and at most 1000000000, got 0',
    );
  });
});

describe('perSecond, perMinute, perHour', () => {
  const helpers = [
    ['perSecond', perSecond],
    ['perMinute', perMinute],
    ['perHour', perHour],
  ] as const;

  it('perMinute(100) refills 100/60 per second, not 1', () => {
    const spec = perMinute(100);
    expect(spec.capacity).toBe(100);
    expect(spec.refillPerSecond).toBe(100 / 60);
    expect(spec.refillPerMs).toBe(100 / 60 / 1000);
    expect(spec.name).toBe('100pm');
  });

  it('perSecond and perHour use their periods and suffixes', () => {
    expect(perSecond(10)).toEqual({
      name: '10ps',
      capacity: 10,
      refillPerSecond: 10,
      refillPerMs: 0.01,
      fillMs: 1000,
    });
    const hourly = perHour(3600);
    expect(hourly.refillPerSecond).toBe(1);
    expect(hourly.name).toBe('3600ph');
    expect(hourly.fillMs).toBe(3_600_000);
  });

  it('takes burst and name options', () => {
    const spec = perHour(1000, { burst: 100, name: 'hourly' });
    expect(spec.capacity).toBe(100);
    expect(spec.refillPerSecond).toBe(1000 / 3600);
    expect(spec.name).toBe('hourly');
    expect(perSecond(5, { burst: 50 }).capacity).toBe(50);
  });

  for (const [helperName, helper] of helpers) {
    it.each(BAD_WHOLE)(`${helperName} refuses count %s`, (value, shown) => {
      expectRefused(() => helper(value as number), 'count', value, shown);
    });

    // The burst becomes the bucket's capacity, and the error names it so; null means "not given".
    it.each(BAD_WHOLE.filter(([value]) => value !== null))(
      `${helperName} refuses burst %s`,
      (value, shown) => {
        expectRefused(() => helper(10, { burst: value as number }), 'burst', value, shown);
      },
    );

    it.each(BAD_NAME)(`${helperName} refuses name %s`, (value, shown) => {
      expectRefused(() => helper(10, { name: value as string }), 'name', value, shown);
    });
  }
});

describe('assertLimits', () => {
  const a = perSecond(1, { name: 'a' });
  const b = perMinute(1, { name: 'b' });

  it('wraps a single limit and freezes a copy of a list', () => {
    expect(assertLimits('limits', a)).toEqual([a]);
    const list = [a, b];
    const checked = assertLimits('limits', list);
    expect(checked).toEqual([a, b]);
    expect(checked).not.toBe(list);
    expect(Object.isFrozen(checked)).toBe(true);
  });

  it('refuses an empty list, a hand-made object and duplicate names, naming the option', () => {
    const empty: LimitSpec[] = [];
    expectRefused(() => assertLimits('limits', empty), 'limits', empty, 'an array of length 0');
    const handMade = { capacity: 1, refillPerSecond: 1 };
    expectRefused(() => assertLimits('limits', handMade), 'limits', handMade, 'a value of type object');
    expectRefused(() => assertLimits('limits', [a, null]), 'limits', null, 'null');
    expectRefused(() => assertLimits('fallback.limits', 5), 'fallback.limits', 5, '5');
    expectRefused(() => assertLimits('limits', [a, perSecond(9, { name: 'a' })]), 'limits.name', 'a', '"a"');
  });
});

describe('smallestCapacity', () => {
  it('is the smallest capacity among the limits', () => {
    expect(smallestCapacity([perSecond(10), perHour(3)])).toBe(3);
    expect(smallestCapacity([perSecond(7)])).toBe(7);
  });
});

describe('assertCost and assertKey', () => {
  it('passes a whole cost up to the capacity through', () => {
    expect(assertCost(1, 10)).toBe(1);
    expect(assertCost(10, 10)).toBe(10);
  });

  it('throws CostExceedsCapacityError for a cost above the capacity', () => {
    let caught: unknown;
    try {
      assertCost(11, 10);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CostExceedsCapacityError);
    expect(caught).toBeInstanceOf(ArgumentError);
    const err = caught as CostExceedsCapacityError;
    expect(err.code).toBe('ERR_TL_COST_EXCEEDS_CAPACITY');
    expect(err.argument).toBe('cost');
    expect(err.value).toBe(11);
    expect(err.message).toBe(
      '[tiered-limiter] Expected `cost` to be at most the capacity 10 (a larger cost can never be admitted), got 11',
    );
  });

  it.each(notCounts([1.5, '1.5'], ['1', '"1"'], [undefined, 'undefined']))(
    'throws ArgumentError for cost %s',
    (value, shown) => {
      expect(() => assertCost(value, 10)).toThrowError(ArgumentError);
      try {
        assertCost(value, 10);
      } catch (err) {
        expect(err).not.toBeInstanceOf(CostExceedsCapacityError);
        expect((err as ArgumentError).code).toBe('ERR_TL_ARGUMENT');
        expect((err as ArgumentError).argument).toBe('cost');
        expect((err as Error).message).toContain(`got ${shown}`);
      }
    },
  );

  it('accepts any string key, the empty one included, and refuses the rest', () => {
    expect(assertKey('')).toBe('');
    expect(assertKey('user:1')).toBe('user:1');
    for (const bad of [1, null, undefined, {}, Symbol('k')]) {
      expect(() => assertKey(bad)).toThrowError(ArgumentError);
    }
    expect(() => assertKey(7)).toThrowError('[tiered-limiter] Expected `key` to be a string, got 7');
  });
});

describe('refill rate floor', () => {
  it('refuses a rate below MIN_REFILL_PER_SECOND, where waits would stop being finite', () => {
    expect(() => defineLimit({ capacity: 1, refillPerSecond: 5e-324 })).toThrow(/`refillPerSecond`.*5e-324/);
    expect(defineLimit({ capacity: 1, refillPerSecond: MIN_REFILL_PER_SECOND }).fillMs).toBeLessThan(
      Infinity,
    );
  });
});
