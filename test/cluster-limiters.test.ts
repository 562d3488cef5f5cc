import { defineLimit, perHour, perSecond } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter, recommendedClusterOptions } from '@tiered-limiter/redis';
import { type RedisCluster, startCluster, uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The limiters work the same on an ioredis Cluster as on one server: RedisStore hides the
// difference, and every limit of a key shares its hash tag, so multi-limit scripts stay in one slot.
let cluster: RedisCluster;
let client: Cluster;

beforeAll(async () => {
  cluster = await startCluster({ masters: 3 });
  client = cluster.cluster(recommendedClusterOptions);
  await whenReady(client);
});
afterAll(() => cluster.stop());

const users = Array.from({ length: 12 }, (_, i) => `user:${i}`);

describe('limiters on a real Redis Cluster', () => {
  it('RequestLimiter: exact per key on every master, several limits at once', async () => {
    const limiter = createRedisLimiter({
      redis: client,
      prefix: uniquePrefix('cl-req'),
      limits: [perSecond(3, { name: 'burst' }), perHour(1000, { name: 'hourly' })],
      failurePolicy: 'closed',
      timeoutMs: 200,
    });
    for (const user of users) {
      const allowed = [];
      for (let i = 0; i < 4; i++) allowed.push((await limiter.consume(user)).allowed);
      expect(allowed).toEqual([true, true, true, false]);
    }
    expect(limiter.stats().decisions.fallback).toBe(0);
    await limiter.close();
  });

  it('TieredLimiter: leases from every master, the smallest grant across limits, never past capacity', async () => {
    const prefix = uniquePrefix('cl-tier');
    const limiter = createTieredLimiter({
      redis: client,
      prefix,
      // The hourly bucket (capacity 20) is the smaller: the lease can never exceed it.
      limits: [defineLimit({ capacity: 50, refillPerSecond: 0.001, name: 'a' }), perHour(20, { name: 'b' })],
      failurePolicy: 'closed',
      instances: 1,
      timeoutMs: 200,
    });
    for (const user of users) {
      let admitted = 0;
      for (let i = 0; i < 40; i++) {
        const d = limiter.tryConsume(user) ?? (await limiter.consume(user));
        if (d.allowed) admitted++;
        if (i % 8 === 0) await new Promise((r) => setImmediate(r));
      }
      expect(admitted).toBe(20);
    }
    expect(limiter.stats().decisions.fallback).toBe(0);
    expect(limiter.stats().decisions.lease).toBeGreaterThan(users.length * 20);
    await limiter.close();
  });
});
