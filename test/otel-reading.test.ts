/**
 * Two promises of `@tiered-limiter/otel`'s README, "Reading the figures", no other test held: every
 * try of `acquire` is a decision (a request that waited shows its denied tries beside its
 * admission), and with `breaker: false` the degraded figures never move while each failed call is a
 * `failure` event and a policy's decision (`tier.decisions{tier=fallback}`). The default breaker beside it
 * shows what the second would read otherwise.
 */
import type { DataPoint, MetricData } from '@opentelemetry/sdk-metrics';
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { ATTRIBUTES, METRICS, observeLimiter } from '@tiered-limiter/otel';
import { LosableStore } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { sdk } from './otel-sdk.js';

function byAttribute(metric: MetricData | undefined, key: string): Record<string, number> {
  const points = (metric?.dataPoints ?? []) as DataPoint<number>[];
  return Object.fromEntries(points.map((p) => [String(p.attributes[key]), p.value]));
}

const value = (metric: MetricData | undefined) =>
  ((metric?.dataPoints ?? []) as DataPoint<number>[]).reduce((sum, p) => sum + p.value, 0);

describe('acquire through observeLimiter', () => {
  it('counts every try: a request that waited shows its denied tries beside its admission', async () => {
    const otel = sdk('tiered-limiter-reading');
    // One token, back every 50 ms: the second acquire must wait for it.
    const limits = defineLimit({ capacity: 1, refillPerSecond: 20, name: 'api' });
    const limiter = new TieredLimiter({
      store: new MemoryStore(),
      limits,
      failurePolicy: 'closed',
      sync: false,
    });
    const observation = observeLimiter(limiter, otel.meter);
    const first = await limiter.acquire('k', 1, { maxWaitMs: 2_000 });
    const second = await limiter.acquire('k', 1, { maxWaitMs: 2_000 });
    expect([first.acquired, second.acquired]).toEqual([true, true]);
    expect(second.waitedMs).toBeGreaterThan(0);

    const outcomes = byAttribute((await otel.collect()).get(METRICS.decisions), ATTRIBUTES.outcome);
    expect(outcomes.allowed).toBe(2);
    expect(outcomes.denied).toBeGreaterThanOrEqual(1);
    expect(outcomes.denied).toBe(limiter.stats().denied);
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });
});

describe('a store that refuses every call, through observeLimiter', () => {
  it.each([
    // breaker: false: the store is never counted down; each call a failure and a policy's decision.
    ['breaker: false', false as const, { degraded: 0, degradations: 0, degradedEvents: 0 }],
    ['the default breaker', undefined, { degraded: 1, degradations: 1, degradedEvents: 1 }],
  ])('%s', async (_, breaker, expected) => {
    const otel = sdk('tiered-limiter-reading');
    const store = new LosableStore(new MemoryStore());
    store.lost = true;
    const limiter = new RequestLimiter({
      store,
      limits: defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' }),
      failurePolicy: 'open',
      ...(breaker === undefined ? {} : { breaker }),
    });
    let failures = 0;
    let degradedEvents = 0;
    limiter.on('failure', () => failures++);
    limiter.on('degraded', () => degradedEvents++);
    const observation = observeLimiter(limiter, otel.meter);
    for (let i = 0; i < 5; i++) expect((await limiter.consume(`k${i}`)).tier).toBe('fallback');

    const metrics = await otel.collect();
    expect({
      degraded: value(metrics.get(METRICS.degraded)),
      degradations: value(metrics.get(METRICS.degradations)),
      degradedEvents,
    }).toEqual(expected);
    expect(byAttribute(metrics.get(METRICS.decisionsByTier), ATTRIBUTES.tier).fallback).toBe(5);
    // Without a breaker every call reaches the store and fails; with one, only those before it opens.
    expect(failures).toBe(breaker === false ? 5 : 3);
    if (breaker === false) expect(value(metrics.get(METRICS.degradedTime))).toBe(0);
    observation.stop();
    await limiter.close();
    await otel.shutdown();
  });
});
