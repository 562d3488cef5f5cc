// `peek` after optimistic cold start admitted a new key on credit: the charge leaves with the
// turn's ops, and a look sent in the same turn must not report the credit as still in the bucket.
import { defineLimit } from '@tiered-limiter/core';
import { TieredLimiter } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

/**
 * Credit is given a spacing into the limiter's life (N·c ÷ r = 1 s here); a full bucket refills
 * nothing, and the 5 taken come back at one token per 100 ms, longer than a look takes.
 */
const LIMIT = defineLimit({ capacity: 100, refillPerSecond: 10, name: 'debt' });
const CREDIT = 5;

const { server, track, redis: connect } = redisFileKit();

/** A limiter giving credit, on a store sending at most `maxInFlight` calls at once (default 4). */
async function optimistic(maxInFlight?: number): Promise<{ limiter: TieredLimiter; store: RedisStore }> {
  const redis = await connect();
  const coalesce = maxInFlight === undefined ? {} : { coalesce: { maxInFlight } };
  const store = new RedisStore({ redis, prefix: uniquePrefix('peek-debt'), ...coalesce });
  const limiter = new TieredLimiter({
    store,
    limits: LIMIT,
    failurePolicy: 'open',
    instances: 2,
    sync: false,
    timeoutMs: 1_000,
    coldStart: { mode: 'optimistic', credit: CREDIT },
  });
  track(limiter);
  // Credit is given from a spacing into the limiter's life: max(lease 1 s, N·c ÷ r).
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  return { limiter, store };
}

describe('peek after optimistic credit', () => {
  it('in the turn that gave the credit: remaining net of the charge not yet landed', async () => {
    const { limiter, store } = await optimistic();
    expect(limiter.tryConsume('k', CREDIT)).toMatchObject({ allowed: true, tier: 'local' });
    const looked = await limiter.peek('k');
    // What the next request would see: the bucket less the 5 admitted on credit.
    expect(looked.remaining).toBe(LIMIT.capacity - CREDIT);
    expect((await store.apply({ key: 'k', limits: [LIMIT] })).remaining).toBe(LIMIT.capacity - CREDIT);
    expect(await limiter.peek('k')).toMatchObject({ remaining: LIMIT.capacity - CREDIT });
  });

  it('a look started before the credit, answered after, is not netted twice', async () => {
    const { limiter } = await optimistic();
    const early = limiter.peek('k');
    expect(limiter.tryConsume('k', CREDIT)).toMatchObject({ allowed: true, tier: 'local' });
    const looked = await early;
    expect([LIMIT.capacity, LIMIT.capacity - CREDIT]).toContain(looked.remaining);
  });

  it('behind full slots: a charge queued before the look lands before it', async () => {
    const { limiter, store } = await optimistic(1);
    await store.apply({ key: 'warm', limits: [LIMIT] }); // connected, script loaded
    await server.client().call('CLIENT', 'PAUSE', '300', 'ALL');
    // The one slot, and the one call of background ops alone beside it (another key's charge),
    // both held by the pause: what follows queues in the coalescer.
    const held = store.apply({ key: 'held', limits: [LIMIT] });
    await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.tryConsume('other', CREDIT)).toMatchObject({ allowed: true, tier: 'local' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.tryConsume('k', CREDIT)).toMatchObject({ allowed: true, tier: 'local' });
    await new Promise((resolve) => setImmediate(resolve)); // k's charge is built and queued
    const looked = limiter.peek('k');
    await held;
    expect((await looked).remaining).toBe(LIMIT.capacity - CREDIT);
  });
});
