// A store op whose caller the guard gave up on (its timeout fired) while the op waited in the
// coalescer behind a call a paused Redis held was sent once Redis answered: Redis ran it after the
// failure policy had decided the request. Under `local` the request was counted twice, by the
// local fallback bucket and by the global one (under `closed`, a denied request was charged a
// token; a `reward` resolved `false` and was applied). An op on the wire cannot be called back,
// but these never left the process: the guard tells the store (`CallerWait`), and the coalescer
// drops an op its caller gave up on before it leaves.
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter, RedisStore } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

const { server, track, connect } = redisFileKit();

/** Refills nothing worth a token during the test: what is missing was taken. */
const SLOW = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });

/** Makes each limiter under test over `redis`: one call in flight at a time, the `local` policy. */
const MAKERS = {
  RequestLimiter: (redis: object, prefix: string) =>
    createRedisLimiter({
      redis,
      prefix,
      coalesce: { maxInFlight: 1 },
      limits: SLOW,
      failurePolicy: 'local',
      fallback: { instances: 4 },
    }),
  TieredLimiter: (redis: object, prefix: string) =>
    createTieredLimiter({
      redis,
      prefix,
      coalesce: { maxInFlight: 1 },
      limits: SLOW,
      failurePolicy: 'local',
      instances: 4,
    }),
};

/** Tokens missing from each of `keys`' global buckets (nothing refills during the test). */
async function takenFrom(prefix: string, keys: readonly string[]): Promise<number[]> {
  const store = new RedisStore({ redis: await connect(), prefix });
  return Promise.all(
    keys.map(async (key) => SLOW.capacity - (await store.apply({ key, limits: [SLOW] })).remaining),
  );
}

describe.each(Object.keys(MAKERS) as (keyof typeof MAKERS)[])(
  '%s: ops the guard gave up on before they left the process',
  (name) => {
    it('are not sent once Redis answers: a request decided by the local policy is not charged globally too', async () => {
      const prefix = uniquePrefix('late');
      const limiter = MAKERS[name](await connect(), prefix);
      track(limiter);
      await limiter.consume('warm'); // connected, script loaded
      await server.client().call('CLIENT', 'PAUSE', '600', 'ALL');
      const held = limiter.consume('held'); // the one call out, held by the pause
      await new Promise((r) => setImmediate(r));
      const keys = Array.from({ length: 10 }, (_, i) => `queued-${i}`);
      const decided = await Promise.all(keys.map((key) => limiter.consume(key)));
      for (const d of decided) expect(d).toMatchObject({ allowed: true, tier: 'fallback', policy: 'local' });
      await held;
      await new Promise((r) => setTimeout(r, 900)); // past the pause, and anything sent late
      // Each queued request was counted by the local bucket; the global bucket does not count it again.
      expect(await takenFrom(prefix, keys)).toEqual(keys.map(() => 0));
    });
  },
);

describe('RequestLimiter: a reward the guard gave up on', () => {
  it('resolves false and is not applied later', async () => {
    const prefix = uniquePrefix('late-reward');
    const limiter = MAKERS.RequestLimiter(await connect(), prefix);
    track(limiter);
    for (let i = 0; i < 3; i++) await limiter.consume('r');
    await server.client().call('CLIENT', 'PAUSE', '600', 'ALL');
    const held = limiter.consume('held');
    await new Promise((r) => setImmediate(r));
    expect(await limiter.reward('r', 2)).toBe(false);
    await held;
    await new Promise((r) => setTimeout(r, 900));
    // `false` means not done: 3 taken, none given back.
    expect(await takenFrom(prefix, ['r'])).toEqual([3]);
  });
});
