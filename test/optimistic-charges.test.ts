import { defineLimit } from '@tiered-limiter/core';
import { TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
import { uniquePrefix, whenReady } from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

// Optimistic cold start's charges leave with the ops of the turn that admitted on credit: a
// server's turn that both takes for one key and gives credit to another makes one round trip, not
// one for the take and another for the charge (at a steady 25,000 decisions a second on Zipf keys
// the charges alone made a third of the calls). Counted by the store's own coalescer.
const LIMIT = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'charges' });

const server = redisForFile();
const clients: Redis[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
});

async function storeOnRedis() {
  const redis = server.client({ ...recommendedRedisOptions });
  clients.push(redis);
  await whenReady(redis);
  return new RedisStore({ redis, prefix: uniquePrefix('charges') });
}

function limiter(store: RedisStore, options: Partial<TieredLimiterOptions> = {}) {
  return new TieredLimiter({
    store,
    limits: LIMIT,
    failurePolicy: 'open',
    instances: 2,
    sync: false,
    ...options,
  });
}

/** Lets the event loop run `turns` times over, so that what was sent is answered. */
async function turns(count: number) {
  for (let i = 0; i < count; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('optimistic cold start on a coalescing RedisStore', () => {
  it("sends a turn's charges in the call that carries the turn's takes", async () => {
    const store = await storeOnRedis();
    const exact = limiter(store);
    const optimistic = limiter(store, { coldStart: { mode: 'optimistic', credit: 1 } });
    const before = store.stats();

    // One turn, as a server's: a take for a key the exact limiter has not seen, credit for three
    // keys the optimistic one has not seen.
    const taken = exact.consume('taken');
    const credited = ['a', 'b', 'c'].map((key) => optimistic.tryConsume(key));
    expect(credited.map((d) => d?.tier)).toEqual(['local', 'local', 'local']);
    expect(await taken).toMatchObject({ allowed: true, tier: 'global' });
    await turns(5);

    const after = store.stats();
    expect(after.ops - before.ops).toBe(4);
    expect(after.calls - before.calls).toBe(1);
    // The charges reached the bucket: each key holds its capacity less the token on credit.
    for (const key of ['a', 'b', 'c']) {
      expect((await store.apply({ key, limits: [LIMIT] })).remaining).toBe(LIMIT.capacity - 1);
    }
    expect(optimistic.stats().tokensOptimistic).toBe(3);
    await Promise.all([exact.close(), optimistic.close()]);
  });
});
