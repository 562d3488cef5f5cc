import { type Decision, defineLimit } from '@tiered-limiter/core';
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

async function storeOnRedis(prefix = uniquePrefix('charges')) {
  const redis = server.client({ ...recommendedRedisOptions });
  clients.push(redis);
  await whenReady(redis);
  return new RedisStore({ redis, prefix });
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
    // It gives credit from a spacing into its life on: max(lease 1 s, N·c ÷ r 200 ms).
    await new Promise((resolve) => setTimeout(resolve, 1000));
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

/** Waits until `done()` holds, 2 s at most (a heartbeat's answer, a beat of the next tick). */
async function until(done: () => boolean) {
  const deadline = Date.now() + 2000;
  while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('optimistic cold start in a fleet past its declared size, on Redis', () => {
  it('gives no credit once the fleet registry counts more live instances than declared', async () => {
    const prefix = uniquePrefix('past-declared');
    const options = { instances: 2, sync: {}, coldStart: { mode: 'optimistic', credit: 1 } } as const;
    const first = limiter(await storeOnRedis(prefix), options);
    // Its first heartbeat, sent as it was made, counts one instance: credit a spacing (200 ms:
    // N·c ÷ r) after it is answered.
    let credited: Decision | undefined;
    await until(() => {
      credited = first.tryConsume('a');
      return credited !== undefined;
    });
    expect(credited).toMatchObject({ allowed: true, tier: 'local' });
    const more = [limiter(await storeOnRedis(prefix), options), limiter(await storeOnRedis(prefix), options)];
    await until(() => more[1]!.stats().instances === 3);
    expect(more[1]!.tryConsume('b')).toBeUndefined();
    // The first learns of three at a heartbeat of its own, within IDLE_BEAT_MS (250 ms) and a period.
    await until(() => first.stats().instances === 3);
    expect(first.tryConsume('c')).toBeUndefined();
    expect(await first.consume('c')).toMatchObject({ allowed: true, tier: 'global' });
    expect([first, ...more].map((l) => l.stats().tokensOptimistic)).toEqual([1, 0, 0]);
    await Promise.all([first, ...more].map((l) => l.close()));
  });
});
