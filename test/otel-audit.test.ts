/**
 * What `@tiered-limiter/otel` reports against what must have happened, on a MemoryStore with
 * known sequences, read through the OTel SDK's in-memory exporter as test/otel.test.ts does.
 */

import type { Meter } from '@opentelemetry/api';
import type { DataPoint, MetricData } from '@opentelemetry/sdk-metrics';
import {
  ArgumentError,
  type BucketOp,
  type CallerWait,
  ConfigError,
  defineLimit,
  type GlobalStore,
} from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { ATTRIBUTES, instrumentStore, METRICS, observeLimiter } from '@tiered-limiter/otel';
import { describe, expect, it } from 'vitest';
import { sdk } from './otel-sdk.js';

const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'api' });

/** Every data point of `metric`, as attribute value of `key` → value. */
function byAttribute(metric: MetricData | undefined, key: string): Record<string, number> {
  const points = (metric?.dataPoints ?? []) as DataPoint<number>[];
  return Object.fromEntries(points.map((p) => [String(p.attributes[key]), p.value]));
}

describe('observeLimiter on a TieredLimiter', () => {
  it('reports decisions by tier that add up to decisions by outcome (a blocked key is tier `local`)', async () => {
    const otel = sdk('tiered-limiter-audit');
    const limiter = new TieredLimiter({ store: new MemoryStore(), limits: LIMIT, failurePolicy: 'open' });
    const observation = observeLimiter(limiter, otel.meter);
    for (let i = 0; i < 3; i++) limiter.tryConsume('k') ?? (await limiter.consume('k'));
    limiter.block('blocked', 60_000);
    for (let i = 0; i < 2; i++) limiter.tryConsume('blocked') ?? (await limiter.consume('blocked'));
    const metrics = await otel.collect();
    const outcomes = byAttribute(metrics.get(METRICS.decisions), ATTRIBUTES.outcome);
    const tiers = byAttribute(metrics.get(METRICS.decisionsByTier), ATTRIBUTES.tier);
    expect(outcomes).toEqual({ allowed: 3, denied: 2 });
    expect(tiers.local).toBe(2);
    expect(Object.values(tiers).reduce((a, b) => a + b, 0)).toBe(5);
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });
});

describe('observeLimiter and instrumentStore refuse bad input at once, naming it', () => {
  const limiter = { stats: () => ({ allowed: 0, denied: 0 }) };
  const store = new MemoryStore();
  const cases: [string, string, (meter: Meter) => unknown][] = [
    ['observeLimiter: no limiter', 'limiter', (m) => observeLimiter(undefined as never, m)],
    ['observeLimiter: an object without stats()', 'limiter', (m) => observeLimiter({} as never, m)],
    [
      'observeLimiter: stats() without counts',
      'limiter',
      (m) => observeLimiter({ stats: () => ({}) } as never, m),
    ],
    [
      'observeLimiter: on that is not a function',
      'limiter.on',
      (m) => observeLimiter({ ...limiter, on: 1 } as never, m),
    ],
    ['observeLimiter: no meter', 'meter', () => observeLimiter(limiter, undefined as never)],
    ['observeLimiter: options a string', 'options', (m) => observeLimiter(limiter, m, 'api' as never)],
    [
      'observeLimiter: attributes a string',
      'attributes',
      (m) => observeLimiter(limiter, m, { attributes: 'api' as never }),
    ],
    [
      'observeLimiter: an attribute an object',
      'attributes.name',
      (m) => observeLimiter(limiter, m, { attributes: { name: {} as never } }),
    ],
    [
      'observeLimiter: a misspelt option',
      'attribute',
      (m) => observeLimiter(limiter, m, { attribute: { a: 1 } } as never),
    ],
    ['instrumentStore: no store', 'store', (m) => instrumentStore(undefined as never, m)],
    ['instrumentStore: an object that is no store', 'store', (m) => instrumentStore({} as never, m)],
    ['instrumentStore: no meter', 'meter', () => instrumentStore(store, undefined as never)],
    [
      'instrumentStore: attributes an array',
      'attributes',
      (m) => instrumentStore(store, m, { attributes: ['a'] as never }),
    ],
    [
      'instrumentStore: a misspelt option',
      'atributes',
      (m) => instrumentStore(store, m, { atributes: {} } as never),
    ],
  ];
  it.each(cases)('%s', (_name, option, make) => {
    const otel = sdk('tiered-limiter-audit');
    let thrown: unknown;
    try {
      make(otel.meter);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect(thrown).toMatchObject({ code: 'ERR_TL_CONFIG', option });
  });

  it('still take what is right: a limiter, a store, attributes of every kind', async () => {
    const otel = sdk('tiered-limiter-audit');
    const observation = observeLimiter(limiter, otel.meter, {
      attributes: { name: 'api', n: 1, on: true, list: ['a', 'b'] },
    });
    const wrapped = instrumentStore(store, otel.meter, { attributes: undefined });
    await wrapped.apply({ key: 'k', limits: [LIMIT], take: 1 });
    const metrics = await otel.collect();
    expect(metrics.get(METRICS.decisions)?.dataPoints[0]?.attributes).toMatchObject({ name: 'api', n: 1 });
    observation.stop();
    await otel.shutdown();
  });
});

describe('the fleet gauge', () => {
  it('reports the instances alive, not the declared floor: one alive of 4 declared reads 1', async () => {
    const otel = sdk('tiered-limiter-audit');
    const store = new MemoryStore();
    const limiter = new TieredLimiter({ store, limits: LIMIT, failurePolicy: 'open', instances: 4 });
    const observation = observeLimiter(limiter, otel.meter);
    await limiter.consume('k');
    // The sync's first heartbeat: bounded in time, not in tries.
    const deadline = Date.now() + 3_000;
    while (limiter.stats().liveInstances === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const gauge = (await otel.collect()).get(METRICS.instances);
    expect(((gauge?.dataPoints ?? []) as DataPoint<number>[]).map((p) => p.value)).toEqual([1]);
    expect(limiter.stats()).toMatchObject({ instances: 4, liveInstances: 1 });
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });

  it('reports nothing where the limiter counts no fleet (no sync): the declared size is no count', async () => {
    const otel = sdk('tiered-limiter-audit');
    const limiter = new TieredLimiter({
      store: new MemoryStore(),
      limits: LIMIT,
      failurePolicy: 'open',
      instances: 4,
      sync: false,
    });
    const observation = observeLimiter(limiter, otel.meter);
    await limiter.consume('k');
    const gauge = (await otel.collect()).get(METRICS.instances);
    expect(gauge?.dataPoints ?? []).toEqual([]);
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });
});

describe('instrumentStore hands the store what the limiter gives it', () => {
  /** A MemoryStore that notes the `wait` each `apply` is given. */
  function noting(): { store: GlobalStore; waits: (CallerWait | undefined)[] } {
    const inner = new MemoryStore();
    const waits: (CallerWait | undefined)[] = [];
    const store: GlobalStore = {
      apply: (op, wait) => {
        waits.push(wait);
        return inner.apply(op);
      },
      reset: (key, limits) => inner.reset(key, limits),
    };
    return { store, waits };
  }

  it("passes the caller's wait on: a queueing store can then drop an op whose caller gave up", async () => {
    const otel = sdk('tiered-limiter-wait');
    const { store, waits } = noting();
    const wrapped = instrumentStore(store, otel.meter);
    const wait: CallerWait = { gaveUp: true };
    await wrapped.apply({ key: 'k', limits: [LIMIT], take: 1 }, wait);
    expect(waits).toEqual([wait]);
    expect(waits[0]).toBe(wait);
    // Through a limiter too: its guard's wait reaches the store.
    const limiter = new RequestLimiter({ store: wrapped, limits: LIMIT, failurePolicy: 'closed' });
    await limiter.consume('k');
    expect(waits[1]).toMatchObject({ gaveUp: false });
    await limiter.close();
    await otel.shutdown();
  });

  it('rejects an op it cannot read, as the store would, and never throws', async () => {
    const otel = sdk('tiered-limiter-bad-op');
    const wrapped = instrumentStore(new MemoryStore(), otel.meter);
    let result: Promise<unknown> | undefined;
    expect(() => {
      result = wrapped.apply(null as unknown as BucketOp);
    }).not.toThrow();
    await expect(result).rejects.toBeInstanceOf(ArgumentError);
    await expect(result).rejects.toMatchObject({ code: 'ERR_TL_ARGUMENT', argument: 'op' });
    await otel.shutdown();
  });
});
