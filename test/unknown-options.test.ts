/**
 * Every constructor and factory of core, local and redis refuses an option it does not know,
 * naming it, as the HTTP middleware does: from JavaScript a misspelt option (`timeoutMS`) was
 * ignored and its default silently in force.
 */
import { ArgumentError, ConfigError, defineLimit, perHour, perMinute, perSecond } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, StoreGuard, TieredLimiter } from '@tiered-limiter/local';
import { createRedisLimiter, createTieredLimiter, RedisStore } from '@tiered-limiter/redis';
import { afterAll, describe, expect, it } from 'vitest';

const limits = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });
/** A client adapter that is never called: construction reaches no server. */
const redis = {
  client: 'test',
  isCluster: false,
  evalScript: () => Promise.reject(new Error('not called')),
  nodeOf: () => 'node',
  del: () => Promise.resolve(),
};
const store = () => new MemoryStore();
const made: { close(): Promise<void> }[] = [];
afterAll(async () => {
  await Promise.all(made.map((l) => l.close()));
});

const cases: [string, string, () => unknown][] = [
  ['defineLimit', 'burst', () => defineLimit({ capacity: 5, refillPerSecond: 1, burst: 3 } as never)],
  ['perSecond', 'nmae', () => perSecond(5, { nmae: 'x' } as never)],
  ['perMinute', 'burts', () => perMinute(5, { burts: 10 } as never)],
  ['perHour', 'capacity', () => perHour(5, { capacity: 10 } as never)],
  ['MemoryStore', 'maxkeys', () => new MemoryStore({ maxkeys: 5 } as never)],
  ['LocalLimiter', 'maxKey', () => new LocalLimiter({ limits, maxKey: 5 } as never)],
  ['StoreGuard', 'timeout', () => new StoreGuard({ timeout: 5 } as never)],
  ['StoreGuard breaker', 'breaker.threshold', () => new StoreGuard({ breaker: { threshold: 1 } } as never)],
  [
    'RequestLimiter',
    'timeoutMS',
    () => new RequestLimiter({ store: store(), limits, failurePolicy: 'open', timeoutMS: 5 } as never),
  ],
  [
    'RequestLimiter breaker',
    'breaker.failures',
    () =>
      new RequestLimiter({
        store: store(),
        limits,
        failurePolicy: 'open',
        breaker: { failures: 1 },
      } as never),
  ],
  [
    'RequestLimiter fallback',
    'fallback.maxkeys',
    () =>
      new RequestLimiter({
        store: store(),
        limits,
        failurePolicy: 'local',
        fallback: { instances: 2, maxkeys: 1 },
      } as never),
  ],
  [
    'TieredLimiter',
    'syncPeriodMs',
    () => new TieredLimiter({ store: store(), limits, failurePolicy: 'open', syncPeriodMs: 50 } as never),
  ],
  [
    'TieredLimiter lease',
    'lease.ttl',
    () =>
      new TieredLimiter({
        store: store(),
        limits,
        failurePolicy: 'open',
        sync: false,
        lease: { ttl: 5 },
      } as never),
  ],
  [
    'TieredLimiter sync',
    'sync.periodMs',
    () =>
      new TieredLimiter({ store: store(), limits, failurePolicy: 'open', sync: { periodMs: 5 } } as never),
  ],
  [
    'TieredLimiter coldStart',
    'coldStart.credits',
    () =>
      new TieredLimiter({
        store: store(),
        limits,
        failurePolicy: 'open',
        coldStart: { mode: 'exact', credits: 2 },
      } as never),
  ],
  ['RedisStore', 'prefx', () => new RedisStore({ redis, prefx: 'a' } as never)],
  [
    'RedisStore coalesce',
    'coalesce.maxKeys',
    () => new RedisStore({ redis, coalesce: { maxKeys: 5 } } as never),
  ],
  [
    'createRedisLimiter',
    'prefx',
    () => createRedisLimiter({ redis, limits, failurePolicy: 'open', prefx: 'a' } as never),
  ],
  [
    'createTieredLimiter',
    'shard',
    () => createTieredLimiter({ redis, limits, failurePolicy: 'open', shard: 4 } as never),
  ],
];

describe('unknown option names', () => {
  it.each(cases)('%s refuses `%s` by a ConfigError naming it', (_name, option, make) => {
    let thrown: unknown;
    try {
      const made_ = make() as { close?: () => Promise<void> };
      if (typeof made_?.close === 'function') made.push(made_ as { close(): Promise<void> });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect(thrown).toMatchObject({ code: 'ERR_TL_CONFIG', option });
  });

  it('acquire refuses a misspelt option by an ArgumentError naming it', async () => {
    const limiter = new TieredLimiter({ store: store(), limits, failurePolicy: 'open' });
    made.push(limiter);
    expect(() => limiter.acquire('k', 1, { maxWait: 5 } as never)).toThrow(ArgumentError);
    expect(() => limiter.acquire('k', 1, { maxWait: 5 } as never)).toThrow(/maxWait/);
  });

  it('takes every option it knows, and a name set to undefined as absent', () => {
    const local = new LocalLimiter({ limits, maxKeys: 10, clock: performance, shadow: false });
    made.push(local);
    const tiered = new TieredLimiter({
      store: store(),
      limits,
      failurePolicy: 'local',
      instances: 2,
      timeoutMs: 50,
      breaker: { failureThreshold: 2, cooldownMs: 100 },
      fallback: { maxKeys: 10 },
      lease: {},
      sync: { fleetCallsPerSecond: 100 },
      coldStart: { mode: 'exact' },
      maxKeys: 10,
      maxConcurrentRefills: 4,
      exactClock: true,
      closeTimeoutMs: 100,
      instanceId: 'a',
      shadow: false,
      closedRetryAfterMs: 500,
      unheardOf: undefined,
    } as never);
    made.push(tiered);
    const store_ = new RedisStore({
      redis,
      prefix: 'p',
      coalesce: { maxKeysPerCall: 8, maxInFlight: 2 },
      keepAfterFullMs: 0,
    });
    expect(store_.prefix).toBe('p');
    expect(defineLimit({ capacity: 1, refillPerSecond: 1, name: undefined }).capacity).toBe(1);
  });
});
