/**
 * What the limiters report, read against what happened (the reporting audit of 2026-12-05): a
 * closed limiter's figures, and what `@tiered-limiter/otel` reports of them.
 */
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { ATTRIBUTES, instrumentStore, METRICS, observeLimiter } from '@tiered-limiter/otel';
import { FakeClock, LosableStore } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { sdk } from './otel-sdk.js';

const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });

describe('a limiter closed while its store is down', () => {
  it.each([
    [
      'RequestLimiter',
      (store: LosableStore, clock: FakeClock) =>
        new RequestLimiter({ store, limits: LIMIT, failurePolicy: 'open', clock }),
    ],
    [
      'TieredLimiter',
      (store: LosableStore, clock: FakeClock) =>
        new TieredLimiter({
          store,
          limits: LIMIT,
          failurePolicy: 'open',
          clock,
          sync: false,
          closeTimeoutMs: 50,
        }),
    ],
  ])('%s: its time spent degraded stops at close(), as the OTel counter does', async (_, make) => {
    const clock = new FakeClock(1_000);
    const store = new LosableStore(new MemoryStore());
    store.lost = true;
    const limiter = make(store, clock);
    const otel = sdk('tiered-limiter-reporting');
    const observation = observeLimiter(limiter, otel.meter);
    // The default breaker opens at the third failure in a row.
    for (let i = 0; i < 3; i++) expect((await limiter.consume(`k${i}`)).tier).toBe('fallback');
    clock.advance(2_000);
    await limiter.close();
    const atClose = limiter.stats().fallbackMs;
    expect(atClose).toBe(2_000);
    clock.advance(60_000);
    // A closed limiter makes no calls: an hour later it has spent no more time degraded.
    expect(limiter.stats().fallbackMs).toBe(atClose);
    const seconds = (await otel.collect()).get(METRICS.degradedTime)?.dataPoints[0]?.value;
    expect(seconds).toBe(2);
    observation.stop();
    await otel.shutdown();
  });
});

describe('one limiter observed twice on one meter', () => {
  it('reads one breaker opening as one, like every other counter, and leaves no listener', async () => {
    const otel = sdk('tiered-limiter-reporting');
    const store = new LosableStore(new MemoryStore());
    store.lost = true;
    const limiter = new RequestLimiter({ store, limits: LIMIT, failurePolicy: 'open' });
    let events = 0;
    limiter.on('degraded', () => events++);
    const first = observeLimiter(limiter, otel.meter);
    const second = observeLimiter(limiter, otel.meter);
    for (let i = 0; i < 3; i++) await limiter.consume(`k${i}`);
    const metrics = await otel.collect();
    expect(events).toBe(1);
    expect(metrics.get(METRICS.degradations)?.dataPoints.map((p) => p.value)).toEqual([1]);
    // The decisions, read from stats(), were never doubled: the series is the same.
    expect(metrics.get(METRICS.decisions)?.dataPoints.map((p) => p.value)).toEqual([3, 0]);
    first.stop();
    first.stop();
    second.stop();
    expect(limiter.listenerCount('degraded')).toBe(1);
    await limiter.close();
    // A closed limiter can be observed: its last figures, nothing thrown.
    const late = observeLimiter(limiter, otel.meter);
    expect((await otel.collect()).get(METRICS.decisions)?.dataPoints.map((p) => p.value)).toEqual([3, 0]);
    late.stop();
    expect(limiter.listenerCount('degraded')).toBe(1);
    await otel.shutdown();
  });
});

describe('two limiters observed through one meter (the otel README, Reading the figures)', () => {
  it('are one series with the same attributes, the last observed hiding the other; two with their own', async () => {
    const otel = sdk('tiered-limiter-reporting');
    const make = () => new RequestLimiter({ store: new MemoryStore(), limits: LIMIT, failurePolicy: 'open' });
    const [a, b] = [make(), make()];
    for (let i = 0; i < 3; i++) await a.consume('k');
    await b.consume('k');
    const observations = [observeLimiter(a, otel.meter), observeLimiter(b, otel.meter)];
    const allowed = async () =>
      ((await otel.collect()).get(METRICS.decisions)?.dataPoints ?? [])
        .filter((p) => p.attributes['tiered_limiter.outcome'] === 'allowed')
        .map((p) => [p.attributes['tiered_limiter.name'], p.value]);
    expect(await allowed()).toEqual([[undefined, 1]]);
    for (const observation of observations) observation.stop();
    const otel2 = sdk('tiered-limiter-reporting');
    const named = [
      observeLimiter(a, otel2.meter, { attributes: { 'tiered_limiter.name': 'a' } }),
      observeLimiter(b, otel2.meter, { attributes: { 'tiered_limiter.name': 'b' } }),
    ];
    const points = ((await otel2.collect()).get(METRICS.decisions)?.dataPoints ?? [])
      .filter((p) => p.attributes['tiered_limiter.outcome'] === 'allowed')
      .map((p) => [p.attributes['tiered_limiter.name'], p.value]);
    expect(points).toEqual([
      ['a', 3],
      ['b', 1],
    ]);
    for (const observation of named) observation.stop();
    await Promise.all([a.close(), b.close(), otel.shutdown(), otel2.shutdown()]);
  });
});

describe("the metric names, by OpenTelemetry's naming rules (semantic-conventions, general/naming.md)", () => {
  const names = Object.values(METRICS);

  it('no metric namespace is plural ("Metric namespaces SHOULD NOT be pluralized")', () => {
    const plural = names.flatMap((name) =>
      name
        .split('.')
        .slice(0, -1)
        .filter((part) => part.endsWith('s'))
        .map((part) => `${name}: ${part}`),
    );
    expect(plural).toEqual([]);
  });

  it('every name is lowercase snake_case under tiered_limiter, and attribute keys too', () => {
    for (const name of [...names, ...Object.values(ATTRIBUTES).filter((k) => k !== 'error.type')]) {
      expect(name).toMatch(/^tiered_limiter(\.[a-z][a-z0-9_]*[a-z0-9])+$/);
    }
  });
});

describe("instrumentStore's error.type", () => {
  it('is the code where it is a string, else the class name, else _OTHER', async () => {
    const otel = sdk('tiered-limiter-reporting');
    const failures: unknown[] = [
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }),
      Object.assign(new TypeError('numeric code'), { code: 42 }),
      'a string, no error',
    ];
    const inner = new MemoryStore();
    const store = instrumentStore(
      { apply: () => Promise.reject(failures.shift()), reset: (key, limits) => inner.reset(key, limits) },
      otel.meter,
    );
    for (let i = 0; i < 3; i++)
      await store.apply({ key: 'k', limits: [LIMIT], take: 1 }).catch(() => undefined);
    const types = ((await otel.collect()).get(METRICS.storeDuration)?.dataPoints ?? []).map(
      (p) => p.attributes[ATTRIBUTES.errorType],
    );
    expect(types.sort()).toEqual(['ECONNREFUSED', 'TypeError', '_OTHER']);
    await otel.shutdown();
  });
});
