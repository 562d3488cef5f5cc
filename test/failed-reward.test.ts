// A `reward` that did not reach the store (it resolved `false`: the guard's timeout fired, the
// breaker refused it) changes nothing here: the key's remembered denial stays. Forgetting it sent
// the key's next request to the store, which was away, and the failure policy decided it: under
// `open` a key the store had turned away for 1,000 s was admitted.
import { defineLimit } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import { uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisFileKit } from './src/redis-file-kit.js';

const { server, track, connect } = redisFileKit();

/** Five tokens, then a wait of 1,000 s: a denial remembered for the test's whole length. */
const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });

const MAKERS = {
  RequestLimiter: async () =>
    createRedisLimiter({
      redis: await connect(),
      prefix: uniquePrefix('failed-reward'),
      limits: FIVE,
      failurePolicy: 'open',
      timeoutMs: 100,
      rememberDenials: true,
    }),
  TieredLimiter: async () =>
    createTieredLimiter({
      redis: await connect(),
      prefix: uniquePrefix('failed-reward'),
      limits: FIVE,
      failurePolicy: 'open',
      timeoutMs: 100,
      sync: false,
    }),
};

/** The tier each limiter names for a denial it remembers. */
const REMEMBERED = { RequestLimiter: 'local', TieredLimiter: 'lease' } as const;

describe.each(Object.keys(MAKERS) as (keyof typeof MAKERS)[])('%s: a reward that failed', (name) => {
  it('keeps the remembered denial: the key is still turned away here, not given to the policy', async () => {
    const limiter = await MAKERS[name]();
    track(limiter);
    for (let i = 0; i < 5; i++) expect((await limiter.consume('k')).allowed).toBe(true);
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: REMEMBERED[name] });
    // Held past the guard's timeout (100 ms, for a first call that may load the script): the reward
    // resolves false, the store never took it.
    await server.client().call('CLIENT', 'PAUSE', '300', 'ALL');
    expect(await limiter.reward('k', 1)).toBe(false);
    const next = await limiter.consume('k');
    expect(next).toMatchObject({ allowed: false, tier: REMEMBERED[name] });
    expect(next.retryAfterMs).toBeGreaterThan(900_000);
    await server.client().call('CLIENT', 'UNPAUSE');
  });

  it('a reward that succeeded lifts it', async () => {
    const limiter = await MAKERS[name]();
    track(limiter);
    for (let i = 0; i < 6; i++) await limiter.consume('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: REMEMBERED[name] });
    expect(await limiter.reward('k', 1)).toBe(true);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });
});
