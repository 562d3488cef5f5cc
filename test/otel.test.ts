/**
 * OpenTelemetry: a real TieredLimiter and RequestLimiter on a real Redis, observed through the
 * OTel SDK with its in-memory exporter. Decisions, round trips, tokens, the store-call histogram,
 * degraded time and breaker openings, each checked against the limiter's own counters.
 */

import type { DataPoint, Histogram, MetricData } from '@opentelemetry/sdk-metrics';
import { defineLimit } from '@tiered-limiter/core';
import { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { ATTRIBUTES, instrumentStore, METRICS, observeLimiter } from '@tiered-limiter/otel';
import { bucketKey, RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import {
  type RedisServer,
  sleepAtLeast,
  startRedis,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sdk } from './otel-sdk.js';

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(() => server.stop());

const LIMIT = defineLimit({ capacity: 50, refillPerSecond: 0.001, name: 'api' });

/** The value of the data point of `metric` whose attributes include `match`. */
function pointValue(metric: MetricData | undefined, match: Record<string, string> = {}): number | undefined {
  const point = (metric?.dataPoints as DataPoint<number>[] | undefined)?.find((p) =>
    Object.entries(match).every(([k, v]) => p.attributes[k] === v),
  );
  return point?.value;
}

describe('observeLimiter and instrumentStore', () => {
  it('report a TieredLimiter’s decisions, round trips, tokens and store-call durations as its stats say', async () => {
    const otel = sdk();
    const redis = server.client(recommendedRedisOptions);
    await whenReady(redis);
    const store = instrumentStore(new RedisStore({ redis, prefix: uniquePrefix('otel') }), otel.meter, {
      attributes: { 'db.system.name': 'redis' },
    });
    // A generous timeout, so that a slow reply on a loaded machine is not a policy decision.
    const limiter = new TieredLimiter({
      store,
      limits: LIMIT,
      failurePolicy: 'closed',
      instances: 1,
      timeoutMs: 1000,
    });
    const observation = observeLimiter(limiter, otel.meter, { attributes: { 'tiered_limiter.name': 'api' } });
    for (let i = 0; i < 80; i++) limiter.tryConsume('k') ?? (await limiter.consume('k'));
    const stats = limiter.stats();
    const metrics = await otel.collect();

    expect(pointValue(metrics.get(METRICS.decisions), { [ATTRIBUTES.outcome]: 'allowed' })).toBe(50);
    expect(pointValue(metrics.get(METRICS.decisions), { [ATTRIBUTES.outcome]: 'denied' })).toBe(30);
    for (const tier of ['lease', 'global', 'fallback'] as const) {
      expect(pointValue(metrics.get(METRICS.decisionsByTier), { [ATTRIBUTES.tier]: tier })).toBe(
        stats.decisions[tier],
      );
    }
    expect(pointValue(metrics.get(METRICS.storeOperations))).toBe(stats.storeOps);
    // The key's first request was a take (a key seen once keeps no lease); the rest were leased.
    expect(pointValue(metrics.get(METRICS.tokens), { [ATTRIBUTES.tokenState]: 'leased' })).toBe(
      stats.tokensLeased,
    );
    expect(pointValue(metrics.get(METRICS.tokens), { [ATTRIBUTES.tokenState]: 'taken' })).toBe(
      stats.tokensTaken,
    );
    expect(stats.tokensLeased + stats.tokensTaken).toBe(50);
    expect(pointValue(metrics.get(METRICS.tokensHeld))).toBe(stats.tokensHeld);
    expect(pointValue(metrics.get(METRICS.degraded))).toBe(0);
    expect(metrics.get(METRICS.decisions)?.dataPoints[0]?.attributes).toMatchObject({
      'tiered_limiter.name': 'api',
    });
    expect(metrics.get(METRICS.decisions)?.descriptor.unit).toBe('{decision}');

    // Every refill is one sample of the reserve series (a lease) or the take series (a sparse key's
    // take), in seconds.
    const histogram = metrics.get(METRICS.storeDuration)!;
    expect(histogram.descriptor.unit).toBe('s');
    const series = (operation: string) =>
      (histogram.dataPoints as DataPoint<Histogram>[]).find(
        (p) => p.attributes[ATTRIBUTES.operation] === operation,
      );
    const reserve = series('reserve')!;
    expect(reserve.attributes['db.system.name']).toBe('redis');
    expect(reserve.value.count + (series('take')?.value.count ?? 0)).toBe(stats.refills);
    expect(reserve.value.sum! / reserve.value.count).toBeGreaterThan(0);
    expect(reserve.value.max!).toBeLessThan(1);

    // A call that fails is timed too, with its error's code as `error.type`.
    const prefix = uniquePrefix('otel-wrong');
    const wrong = instrumentStore(new RedisStore({ redis, prefix }), otel.meter);
    await redis.set(bucketKey(prefix, 'w', LIMIT.name), 'not a bucket');
    await expect(wrong.apply({ key: 'w', limits: [LIMIT], take: 1 })).rejects.toThrow(/WRONGTYPE/);
    const failed = (
      (await otel.collect()).get(METRICS.storeDuration)!.dataPoints as DataPoint<Histogram>[]
    ).find((p) => p.attributes[ATTRIBUTES.errorType] !== undefined)!;
    expect(failed.attributes).toMatchObject({
      [ATTRIBUTES.operation]: 'take',
      [ATTRIBUTES.errorType]: 'ERR_TL_STORE_REPLY',
    });
    expect(failed.value.count).toBe(1);

    // Stopped: the SDK keeps the last cumulative points, and they no longer follow the limiter.
    observation.stop();
    for (let i = 0; i < 5; i++) limiter.tryConsume('k') ?? (await limiter.consume('k'));
    expect(limiter.stats().denied).toBe(35);
    expect(
      pointValue((await otel.collect()).get(METRICS.decisions), { [ATTRIBUTES.outcome]: 'denied' }),
    ).toBe(30);
    await limiter.close();
    await otel.shutdown();
  });

  it('instrumentStore passes the heartbeat, leave, opsPerCall and groupOf through: a wrapped fleet sees its live size', async () => {
    const otel = sdk();
    const redis = server.client(recommendedRedisOptions);
    await whenReady(redis);
    const inner = new RedisStore({ redis, prefix: uniquePrefix('otel-fleet') });
    const store = instrumentStore(inner, otel.meter);
    expect(store.opsPerCall).toBe(inner.opsPerCall);
    expect(store.opsPerCall).toBe(32);
    expect(store.groupOf?.('user:1')).toBe(inner.groupOf('user:1'));
    await expect(store.heartbeat!('other-instance', 60_000)).resolves.toBe(1);
    // A limiter on the wrapped store counts itself and the other instance at its first sync.
    const limiter = new TieredLimiter({ store, limits: LIMIT, failurePolicy: 'open' });
    const deadline = Date.now() + 5_000;
    while (limiter.stats().instances !== 2 && Date.now() < deadline) await sleepAtLeast(20);
    expect(limiter.stats().instances).toBe(2);
    const histogram = (await otel.collect()).get(METRICS.storeDuration)!;
    const beats = (histogram.dataPoints as DataPoint<Histogram>[]).find(
      (p) => p.attributes[ATTRIBUTES.operation] === 'heartbeat',
    );
    expect(beats?.value.count).toBeGreaterThanOrEqual(2);
    // Closing, the limiter leaves the registry through the wrapper: the other instance is alone.
    await limiter.close();
    await expect(store.heartbeat!('other-instance', 60_000)).resolves.toBe(1);
    const leaves = (
      (await otel.collect()).get(METRICS.storeDuration)!.dataPoints as DataPoint<Histogram>[]
    ).find((p) => p.attributes[ATTRIBUTES.operation] === 'leave');
    expect(leaves?.value.count).toBe(1);
    await otel.shutdown();
  });

  it('report degraded time and breaker openings while Redis is paused, and the way back', async () => {
    const otel = sdk();
    const redis = server.client(recommendedRedisOptions);
    await whenReady(redis);
    const store = instrumentStore(new RedisStore({ redis, prefix: uniquePrefix('otel') }), otel.meter);
    const limiter = new RequestLimiter({ store, limits: LIMIT, failurePolicy: 'open', timeoutMs: 20 });
    const observation = observeLimiter(limiter, otel.meter);
    await limiter.consume('k');
    await server.client().call('CLIENT', 'PAUSE', '400');
    for (let i = 0; i < 10; i++) await limiter.consume(`paused-${i}`);
    await sleepAtLeast(150);
    const during = await otel.collect();
    expect(pointValue(during.get(METRICS.degraded))).toBe(1);
    expect(pointValue(during.get(METRICS.degradations))).toBe(1);
    expect(pointValue(during.get(METRICS.degradedTime))).toBeGreaterThan(0.1);
    expect(
      pointValue(during.get(METRICS.decisionsByTier), { [ATTRIBUTES.tier]: 'fallback' }),
    ).toBeGreaterThan(0);
    expect(pointValue(during.get(METRICS.storeOperations))).toBe(limiter.stats().storeOps);
    await sleepAtLeast(400);
    // Bounded by time, not by a count of tries: on a loaded machine a probe can miss the 20 ms
    // timeout, and each miss costs a cooldown.
    const deadline = Date.now() + 5_000;
    for (let i = 0; limiter.degraded && Date.now() < deadline; i++) {
      await limiter.consume(`after-${i}`);
      await sleepAtLeast(20);
    }
    expect(pointValue((await otel.collect()).get(METRICS.degraded))).toBe(0);
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });
});
