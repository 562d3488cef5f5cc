import { defineLimit } from '@tiered-limiter/core';
import { TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { FakeClock, uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

// Optimistic cold start when Redis goes away between a credit and its charge: the charge fails at
// once (no offline queue), is counted as lost and never sent again, and the key, evicted and back
// once Redis is, gets no second credit within its spacing. The limiter's clock is fake (the
// spacing is the limiter's own time); the buckets run on Redis's TIME.
const LIMIT = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'outage' });
const SPACING_MS = 1000;
/** Turns of the event loop a wait for the client or a charge may take before the test gives up. */
const MAX_TURNS = 20_000;

const server = redisForFile();
const clients: Redis[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
});

async function turnsUntil(done: () => boolean, what: string) {
  for (let i = 0; i < MAX_TURNS && !done(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
  if (!done()) throw new Error(`gave up waiting for ${what}`);
}

describe('optimistic cold start across a Redis restart', () => {
  it('a credit whose charge Redis never got is counted lost, not resent, and not given again within the spacing', async () => {
    const redis = server.client({ ...recommendedRedisOptions });
    clients.push(redis);
    await whenReady(redis);
    const store = new RedisStore({ redis, prefix: uniquePrefix('cold-outage') });
    const clock = new FakeClock(0);
    const limiter = new TieredLimiter({
      store,
      clock,
      limits: LIMIT,
      failurePolicy: 'open',
      instances: 1,
      sync: false,
      maxKeys: 1,
      timeoutMs: 1000,
      coldStart: { mode: 'optimistic', credit: 5, spacingMs: SPACING_MS },
    });
    clock.advance(SPACING_MS);
    await server.kill();
    await turnsUntil(() => redis.status !== 'ready', 'the client to see the server gone');
    // No call has failed yet, so the limiter is not degraded: the key starts on credit.
    expect(limiter.degraded).toBe(false);
    expect(limiter.tryConsume('k', 5)).toMatchObject({ allowed: true, tier: 'local' });
    await turnsUntil(() => limiter.stats().tokensUnreported > 0, 'the charge to fail');
    expect(limiter.stats()).toMatchObject({ tokensOptimistic: 5, tokensUnreported: 5 });

    await server.restart();
    await whenReady(redis);
    // Another key takes the table's one slot (on credit: one failed call left the breaker closed).
    expect(await limiter.consume('other')).toMatchObject({ allowed: true, tier: 'local' });
    clock.advance(SPACING_MS - 1);
    expect(limiter.tryConsume('k', 5)).toBeUndefined();
    const exact = await limiter.consume('k', 5);
    // The restarted server was empty: a take of 5 and no debit resent leaves 95.
    expect(exact).toMatchObject({ allowed: true, tier: 'global', remaining: 95 });
    expect(limiter.stats()).toMatchObject({ tokensOptimistic: 6, tokensUnreported: 5 });
    await limiter.close();
  });
});
