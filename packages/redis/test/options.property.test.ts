import {
  createRedisLimiter,
  createTieredLimiter,
  RedisStore,
  recommendedRedisOptions,
} from '@tiered-limiter/redis';
import {
  FakeClock,
  optionMatrix,
  proveStillLimits,
  type RedisServer,
  redisLimiterOptions,
  redisStoreOptions,
  redisTieredLimiterOptions,
  startRedisWithClient,
  TINY,
  uniquePrefix,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Issue 9 §3 on a real Redis: every option of RedisStore and of the two factories × the bad values
// (test/src/option-tables.ts). A value is refused with a typed error naming the option, or it builds
// a store or limiter that still limits: three decisions of a 2-token limit, the third denied.

let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  ({ server, redis } = await startRedisWithClient(recommendedRedisOptions));
});
afterAll(() => server.stop());

const { describeOptions } = optionMatrix('redis', { describe, it, expect, afterAll });

describeOptions('RedisStore', redisStoreOptions, {
  base: () => ({ redis, prefix: uniquePrefix('opt') }),
  build: (options) => new RedisStore(options as never),
  prove: async (store) => {
    const oks: boolean[] = [];
    // A key of its own: a case with the default prefix shares its keys with every other such case.
    const key = uniquePrefix('key');
    for (let i = 0; i < 3; i++) oks.push((await store.apply({ key, limits: [TINY], take: 1 })).ok);
    expect(oks).toEqual([true, true, false]);
  },
});

/** The factories' options: a Redis client and a prefix of their own instead of a store. */
// A generous store timeout (a case that sets `timeoutMs` overrides it): on a loaded machine a real
// Redis can miss the 20 ms default, and the closed policy would decide.
const limiterBase = () => ({
  redis,
  prefix: uniquePrefix('opt'),
  limits: TINY,
  failurePolicy: 'closed',
  timeoutMs: 1000,
  clock: new FakeClock(1_000),
});

describeOptions('createRedisLimiter', redisLimiterOptions, {
  base: limiterBase,
  build: (options) => createRedisLimiter(options as never),
  prove: (limiter) => proveStillLimits(limiter, undefined, uniquePrefix('key')),
});

describeOptions('createTieredLimiter', redisTieredLimiterOptions, {
  base: limiterBase,
  build: (options) => createTieredLimiter(options as never),
  prove: (limiter) => proveStillLimits(limiter, undefined, uniquePrefix('key')),
});
