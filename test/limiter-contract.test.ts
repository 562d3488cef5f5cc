import type { GlobalStore, LimitSpec } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedClusterOptions, recommendedRedisOptions } from '@tiered-limiter/redis';
import { type RedisTargets, startRedisTargets, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll } from 'vitest';
import { describeLimiterContract, type LimiterFixture } from './src/limiter-contract.js';

let targets: RedisTargets | undefined;

beforeAll(async () => {
  targets = await startRedisTargets(recommendedRedisOptions, recommendedClusterOptions);
});
afterAll(() => targets?.stop());

/**
 * The options of every store-backed limiter here: a generous timeout, so that a loaded machine's
 * slow reply never passes for a store failure (the failure tests set their own).
 */
const storeOptions = (store: GlobalStore | undefined, limits: readonly LimitSpec[], options: object) => ({
  store: store!,
  limits,
  failurePolicy: 'closed' as const,
  timeoutMs: 1000,
  ...options,
});

const stores: [string, () => GlobalStore][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['a Redis server', () => new RedisStore({ redis: targets!.redis, prefix: uniquePrefix('lc') })],
  [
    'a Redis Cluster of 3 masters',
    () => new RedisStore({ redis: targets!.cluster, prefix: uniquePrefix('lc') }),
  ],
];

for (const [where, store] of stores) {
  describeLimiterContract(`RequestLimiter on ${where}`, {
    store,
    limiter: (limits, s, options) => new RequestLimiter(storeOptions(s, limits, options)),
  } satisfies LimiterFixture);

  describeLimiterContract(`TieredLimiter on ${where}`, {
    store,
    limiter: (limits, s, options) => new TieredLimiter(storeOptions(s, limits, options)),
  } satisfies LimiterFixture);
}

describeLimiterContract('LocalLimiter', {
  store: undefined,
  limiter: (limits, _store, options) => new LocalLimiter({ limits, ...options }),
});
