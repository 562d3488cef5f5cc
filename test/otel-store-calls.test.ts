/**
 * What `instrumentStore`'s histogram counts over a `RedisStore`, on a real Redis: one data point an
 * operation, as `tiered_limiter.store.operations` counts them, not one a round trip. The otel README
 * offered its count as Redis's round trips (64 counted against 2 calls here).
 */
import { readFileSync } from 'node:fs';
import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import { defineLimit } from '@tiered-limiter/core';
import { instrumentStore, METRICS } from '@tiered-limiter/otel';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { sdk } from './otel-sdk.js';
import { redisForFile } from './src/redis-for-file.js';

const server = redisForFile();
const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });

describe('instrumentStore over a RedisStore', () => {
  it("counts operations, as the README says, and Redis's round trips are the store's stats().calls", async () => {
    const redis = server.client({ ...recommendedRedisOptions });
    await whenReady(redis);
    const otel = sdk('tiered-limiter-store-calls');
    const raw = new RedisStore({ redis, prefix: uniquePrefix('store-calls') });
    const store = instrumentStore(raw, otel.meter);
    // 64 ops queued in one turn: the coalescer carries them in a few calls (32 keys a call).
    await Promise.all(
      Array.from({ length: 64 }, (_, i) => store.apply({ key: `k${i}`, limits: [LIMIT], take: 1 })),
    );
    const points = ((await otel.collect()).get(METRICS.storeDuration)?.dataPoints ??
      []) as DataPoint<Histogram>[];
    const counted = points.reduce((sum, p) => sum + p.value.count, 0);
    expect(counted).toBe(64);
    expect(raw.stats().ops).toBe(64);
    expect(raw.stats().calls).toBeLessThan(64 / 2);

    const prose = readFileSync(new URL('../packages/otel/README.md', import.meta.url), 'utf8').replace(
      /\s+/g,
      ' ',
    );
    expect(prose).not.toContain("`tiered_limiter.store.operation.duration`'s count per call");
    expect(prose).toContain("Redis's round trips are fewer: the store's own `stats().calls`");
    redis.disconnect();
    await otel.shutdown();
  });
});
