import type { GlobalStore, LimitSpec } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore, recommendedClusterOptions, recommendedRedisOptions } from '@tiered-limiter/redis';
import {
  type RedisCluster,
  type RedisServer,
  startCluster,
  startRedis,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { describeLimiterContract, type LimiterFixture } from './src/limiter-contract.js';

let server: RedisServer | undefined;
let cluster: RedisCluster | undefined;
let redis: Redis;
let clusterClient: Cluster;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
  redis = server.client(recommendedRedisOptions);
  clusterClient = cluster.cluster(recommendedClusterOptions);
  await Promise.all([whenReady(redis), whenReady(clusterClient)]);
});

afterAll(async () => {
  await Promise.all([server?.stop(), cluster?.stop()]);
});

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
  ['a Redis server', () => new RedisStore({ redis, prefix: uniquePrefix('lc') })],
  [
    'a Redis Cluster of 3 masters',
    () => new RedisStore({ redis: clusterClient, prefix: uniquePrefix('lc') }),
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
