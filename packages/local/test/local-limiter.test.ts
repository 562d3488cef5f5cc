import {
  ArgumentError,
  allowDecision,
  ConfigError,
  CostExceedsCapacityError,
  defineLimit,
  type LimitSpec,
  perHour,
  perMinute,
  perSecond,
} from '@tiered-limiter/core';
import { DEFAULT_MAX_KEYS, LocalLimiter, type LocalLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { notCounts } from '../../core/test/not-counts.js';

function setup(limits: LimitSpec | LimitSpec[], extra: Partial<LocalLimiterOptions> = {}) {
  const clock = new FakeClock(1_000);
  const limiter = new LocalLimiter({ limits, clock, ...extra });
  return { clock, limiter };
}

describe('LocalLimiter, one limit', () => {
  it('admits the burst with exact remaining and reset, then denies with the exact wait', () => {
    const { limiter } = setup(perSecond(10));
    for (let i = 1; i <= 10; i++) {
      expect(limiter.tryConsume('a')).toEqual(allowDecision(10 - i, i * 100, perSecond(10), 'local'));
    }
    expect(limiter.tryConsume('a')).toEqual({
      allowed: false,
      remaining: 0,
      retryAfterMs: 100,
      resetMs: 1000,
      limit: 10,
      name: '10ps',
      tier: 'local',
      policy: undefined,
      error: undefined,
      shadowDenied: false,
    });
  });

  it('refills with time and admits a retry after exactly retryAfterMs', () => {
    const { clock, limiter } = setup(perSecond(10));
    expect(limiter.tryConsume('a', 10).allowed).toBe(true);
    clock.advance(30);
    const denied = limiter.tryConsume('a', 2);
    expect(denied).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 170, resetMs: 970 });
    clock.advance(169);
    expect(limiter.tryConsume('a', 2).allowed).toBe(false);
    clock.advance(1);
    expect(limiter.tryConsume('a', 2)).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 });
  });

  it('keeps keys apart', () => {
    const { limiter } = setup(perMinute(1));
    expect(limiter.tryConsume('a').allowed).toBe(true);
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
    expect(limiter.tryConsume('b').allowed).toBe(true);
    expect(limiter.tryConsume('').allowed).toBe(true);
  });

  it('counts a cost of several tokens and refuses one above the capacity at once', () => {
    const { limiter } = setup(perSecond(5));
    expect(limiter.tryConsume('a', 5)).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 });
    expect(() => limiter.tryConsume('a', 6)).toThrowError(CostExceedsCapacityError);
  });

  it('is not fooled by a clock that steps backwards', () => {
    const { clock, limiter } = setup(perSecond(10));
    limiter.tryConsume('a', 10);
    clock.set(0);
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 100 });
    clock.set(1_100);
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('defaults to the performance clock and returns a plain decision', () => {
    const limiter = new LocalLimiter({ limits: perSecond(2) });
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: true, remaining: 1, tier: 'local' });
    expect(limiter.shadow).toBe(false);
    expect(limiter.limits).toEqual([perSecond(2)]);
  });
});

describe('LocalLimiter, several limits', () => {
  const perSec = perSecond(2, { name: 'sec' }); // 1 token per 500 ms
  const perMin = perMinute(3, { name: 'min' }); // 1 token per 20 s

  it('admits only what every limit admits, and speaks of the tightest', () => {
    const { clock, limiter } = setup([perSec, perMin]);
    // Every field speaks of one limit: the one with the fewest tokens left, its own reset.
    expect(limiter.tryConsume('a')).toEqual(allowDecision(1, 500, perSec, 'local'));
    expect(limiter.tryConsume('a')).toEqual(allowDecision(0, 1000, perSec, 'local'));
    // The per-second limit denies: the decision names it, with its wait and its reset.
    expect(limiter.tryConsume('a')).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 500,
      resetMs: 1000,
      limit: 2,
      name: 'sec',
    });
    clock.advance(500);
    // Both at 0 whole tokens: the one slower to fill binds harder.
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: true, remaining: 0, limit: 3, name: 'min' });
    clock.advance(500);
    // The per-second bucket has a token again; the per-minute one has 0.05 and decides the wait.
    expect(limiter.tryConsume('a')).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 19_000,
      resetMs: 59_000,
      limit: 3,
      name: 'min',
    });
  });

  it('takes nothing from any limit when one of them refuses', () => {
    const big = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'big' }); // 1 token per 1000 s
    const small = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'small' }); // 1 token per s
    const { clock, limiter } = setup([big, small]);
    expect(limiter.tryConsume('a', 3)).toMatchObject({ allowed: true, remaining: 0, limit: 3 });
    // big holds 2, small 0: refused, and big must keep its 2.
    expect(limiter.tryConsume('a', 2)).toMatchObject({ allowed: false, retryAfterMs: 2000, remaining: 0 });
    clock.advance(2000);
    // Had the refusal charged big, it would hold 0.002 now and this would be refused.
    expect(limiter.tryConsume('a', 2)).toMatchObject({ allowed: true, remaining: 0, limit: 5 });
  });

  it('names the smallest capacity as the limit of a key it has not seen', async () => {
    const { limiter } = setup([perHour(100, { name: 'h' }), perSecond(4, { name: 's' })]);
    expect(await limiter.peek('new')).toEqual(allowDecision(4, 0, perSecond(4, { name: 's' }), 'local'));
    expect(() => limiter.tryConsume('a', 5)).toThrowError(CostExceedsCapacityError);
  });

  it("reports the reset of the limit it speaks of, never another limit's", () => {
    const { limiter } = setup([perSecond(10, { name: 's' }), perHour(3600, { name: 'h' })]);
    // 1 token gone from each: 100 ms to refill the first, 1000 ms the second; 9 left in the first.
    expect(limiter.tryConsume('a')).toEqual(allowDecision(9, 100, perSecond(10, { name: 's' }), 'local'));
  });
});

describe('LocalLimiter memory', () => {
  it('never holds more than maxKeys keys, forgetting the least recently used', async () => {
    const { limiter } = setup(perMinute(2), { maxKeys: 3 });
    for (const key of ['a', 'b', 'c']) limiter.tryConsume(key, 2);
    expect(limiter.size).toBe(3);
    limiter.tryConsume('a'); // a is now the most recent; b the least
    limiter.tryConsume('d', 2);
    expect(limiter.size).toBe(3);
    // b was forgotten and comes back full; a and c were kept, still empty.
    expect((await limiter.peek('b')).remaining).toBe(2);
    expect((await limiter.peek('a')).allowed).toBe(false);
    expect((await limiter.peek('c')).allowed).toBe(false);
    for (let i = 0; i < 100; i++) {
      limiter.tryConsume(`k${i}`);
      expect(limiter.size).toBeLessThanOrEqual(3);
    }
  });

  it('forgets a bucket once it has refilled completely', () => {
    const { clock, limiter } = setup(perSecond(10));
    limiter.tryConsume('a');
    limiter.tryConsume('b', 3);
    expect(limiter.size).toBe(2);
    clock.advance(99);
    expect(limiter.size).toBe(2);
    clock.advance(1); // a is full: 9 + 100 ms × 0.01
    expect(limiter.size).toBe(1);
    clock.advance(199);
    expect(limiter.size).toBe(1);
    clock.advance(1);
    expect(limiter.size).toBe(0);
    expect(limiter.tryConsume('a')).toEqual(allowDecision(9, 100, perSecond(10), 'local'));
  });

  it('forgets a multi-limit key only when every bucket is full', () => {
    const { clock, limiter } = setup([perSecond(10, { name: 's' }), perMinute(60, { name: 'm' })]);
    limiter.tryConsume('a');
    clock.advance(100);
    expect(limiter.size).toBe(1); // the per-second bucket is full, the per-minute one is not
    clock.advance(900);
    expect(limiter.size).toBe(0);
  });

  it('reset forgets one key, clear forgets all', () => {
    const { limiter } = setup(perMinute(1));
    limiter.tryConsume('a');
    limiter.tryConsume('b');
    limiter.reset('a');
    expect(limiter.tryConsume('a').allowed).toBe(true);
    expect(limiter.tryConsume('b').allowed).toBe(false);
    limiter.reset('never-seen');
    limiter.clear();
    expect(limiter.size).toBe(0);
    expect(limiter.tryConsume('b').allowed).toBe(true);
  });

  it('clear lifts every block, as reset lifts one', () => {
    const { limiter } = setup(perMinute(1));
    limiter.block('a', 60_000);
    limiter.block('b', 60_000);
    limiter.reset('a');
    expect(limiter.tryConsume('a').allowed).toBe(true);
    limiter.clear();
    // Before: still blocked for 60 s after the limiter had forgotten every key.
    expect(limiter.tryConsume('b')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('defaults maxKeys to DEFAULT_MAX_KEYS', () => {
    expect(DEFAULT_MAX_KEYS).toBe(100_000);
    const { limiter } = setup(perMinute(1));
    for (let i = 0; i < DEFAULT_MAX_KEYS + 10; i++) limiter.tryConsume(`k${i}`);
    expect(limiter.size).toBe(DEFAULT_MAX_KEYS);
  });
});

describe('LocalLimiter.peek', () => {
  it('reports without taking', async () => {
    const { clock, limiter } = setup(perSecond(10));
    limiter.tryConsume('a', 9);
    expect(await limiter.peek('a')).toEqual(allowDecision(1, 900, perSecond(10), 'local'));
    expect(await limiter.peek('a')).toEqual(allowDecision(1, 900, perSecond(10), 'local'));
    limiter.tryConsume('a');
    clock.advance(40);
    expect(await limiter.peek('a')).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 60,
      resetMs: 960,
    });
  });

  it('does not keep a key alive in the LRU order', async () => {
    const { limiter } = setup(perMinute(1), { maxKeys: 2 });
    limiter.tryConsume('a');
    limiter.tryConsume('b');
    await limiter.peek('a');
    limiter.tryConsume('c'); // evicts a, the least recently *used*, although it was peeked last
    expect((await limiter.peek('a')).allowed).toBe(true);
    expect((await limiter.peek('b')).allowed).toBe(false);
  });

  it('forgets a key it finds full', async () => {
    const { clock, limiter } = setup(perSecond(10));
    limiter.tryConsume('a');
    clock.advance(100);
    expect(await limiter.peek('a')).toEqual(allowDecision(10, 0, perSecond(10), 'local'));
    clock.set(0); // a clock stepping back must not resurrect it
    expect(await limiter.peek('a')).toEqual(allowDecision(10, 0, perSecond(10), 'local'));
  });
});

describe('LocalLimiter shadow mode', () => {
  it('admits everything, marks what enforcement would deny, and charges as enforcement would', async () => {
    const { clock, limiter } = setup(perSecond(2), { shadow: true });
    expect(limiter.shadow).toBe(true);
    expect(limiter.tryConsume('a')).toEqual(allowDecision(1, 500, perSecond(2), 'local'));
    expect(limiter.tryConsume('a')).toEqual(allowDecision(0, 1000, perSecond(2), 'local'));
    const would = {
      allowed: true,
      remaining: 0,
      retryAfterMs: 0,
      resetMs: 1000,
      limit: 2,
      name: '2ps',
      tier: 'local',
      policy: undefined,
      error: undefined,
      shadowDenied: true,
    };
    expect(limiter.tryConsume('a')).toEqual(would);
    expect(limiter.tryConsume('a')).toEqual(would); // a shadow admission takes nothing
    expect(await limiter.peek('a')).toEqual(would);
    clock.advance(500);
    expect(limiter.tryConsume('a')).toEqual(allowDecision(0, 1000, perSecond(2), 'local'));
  });

  it('works with several limits', () => {
    const { limiter } = setup([perSecond(1, { name: 's' }), perHour(10, { name: 'h' })], { shadow: true });
    limiter.tryConsume('a');
    expect(limiter.tryConsume('a')).toMatchObject({ allowed: true, shadowDenied: true, retryAfterMs: 0 });
  });
});

describe('LocalLimiter bad input', () => {
  const limits = perSecond(10);

  function refused(options: unknown, option: string, shown: string): void {
    let caught: unknown;
    try {
      new LocalLimiter(options as LocalLimiterOptions);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const err = caught as ConfigError;
    expect(err.code).toBe('ERR_TL_CONFIG');
    expect(err.option).toBe(option);
    expect(err.message).toContain(`\`${option}\``);
    expect(err.message).toContain(`got ${shown}`);
  }

  it.each([
    [undefined, 'undefined'],
    [null, 'null'],
    [10, '10'],
  ])('refuses options %s', (options, shown) => refused(options, 'options', shown));

  it.each([
    [undefined, 'undefined'],
    [[], 'an array of length 0'],
    [{ capacity: 10, refillPerSecond: 1 }, 'a value of type object'],
    ['10ps', '"10ps"'],
  ])('refuses limits %s', (value, shown) => refused({ limits: value }, 'limits', shown));

  it('refuses two limits with one name', () => {
    refused({ limits: [perSecond(1), perSecond(1)] }, 'limits.name', '"1ps"');
  });

  it.each(notCounts([1.5, '1.5'], ['100', '"100"'], [2 ** 24 + 1, '16777217']))(
    'refuses maxKeys %s',
    (value, shown) => refused({ limits, maxKeys: value }, 'maxKeys', shown),
  );

  it.each([
    [{}, 'a value of type object'],
    [{ now: 5 }, 'a value of type object'],
    [() => 0, 'a value of type function'],
    ['performance', '"performance"'],
  ])('refuses clock %s', (value, shown) => refused({ limits, clock: value }, 'clock', shown));

  it.each([
    ['yes', '"yes"'],
    [1, '1'],
    [{}, 'a value of type object'],
  ])('refuses shadow %s', (value, shown) => refused({ limits, shadow: value }, 'shadow', shown));

  it('accepts the smallest maxKeys, and undefined for every optional option', () => {
    // MAX_MAX_KEYS itself is not built here: lru-cache preallocates, which takes over a second.
    expect(new LocalLimiter({ limits, maxKeys: 1 }).tryConsume('a').allowed).toBe(true);
    const limiter = new LocalLimiter({ limits, maxKeys: undefined, clock: undefined, shadow: undefined });
    expect(limiter.tryConsume('a').allowed).toBe(true);
  });

  it.each([
    [1, '1'],
    [null, 'null'],
    [undefined, 'undefined'],
    [{}, 'a value of type object'],
    [Symbol('k'), 'a value of type symbol'],
  ])('refuses key %s at call time, in tryConsume, peek and reset', (key, shown) => {
    const limiter = new LocalLimiter({ limits });
    for (const call of [
      () => limiter.tryConsume(key as string),
      () => limiter.peek(key as string),
      () => limiter.reset(key as string),
    ]) {
      expect(call).toThrowError(ArgumentError);
      expect(call).toThrowError(`Expected \`key\` to be a string, got ${shown}`);
    }
  });

  it.each(notCounts([0.5, '0.5'], ['1', '"1"'], [null, 'null']))(
    'refuses cost %s at call time',
    (cost, shown) => {
      const limiter = new LocalLimiter({ limits });
      const call = () => limiter.tryConsume('a', cost as number);
      expect(call).toThrowError(ArgumentError);
      expect(call).toThrowError(`Expected \`cost\` to be an integer from 1 up, got ${shown}`);
      expect(limiter.size).toBe(0);
    },
  );

  it('refuses a cost above the smallest capacity with CostExceedsCapacityError', () => {
    const limiter = new LocalLimiter({ limits: [perSecond(10, { name: 's' }), perHour(4, { name: 'h' })] });
    expect(() => limiter.tryConsume('a', 5)).toThrowError(CostExceedsCapacityError);
    expect(limiter.tryConsume('a', 4).allowed).toBe(true);
  });
});
