import { MemoryStore } from '@tiered-limiter/local';
import { RedisStore, recommendedClusterOptions, recommendedRedisOptions } from '@tiered-limiter/redis';
import {
  type RedisCluster,
  type RedisServer,
  startCluster,
  startRedis,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import { afterAll, beforeAll } from 'vitest';
import { describeStoreContract } from './src/store-contract.js';

let server: RedisServer | undefined;
let cluster: RedisCluster | undefined;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
});

afterAll(async () => {
  await Promise.all([server?.stop(), cluster?.stop()]);
});

describeStoreContract('MemoryStore', () => new MemoryStore());

describeStoreContract('RedisStore on one Redis server', async () => {
  const redis = server!.client(recommendedRedisOptions);
  await whenReady(redis);
  return new RedisStore({ redis, prefix: uniquePrefix('contract') });
});

describeStoreContract('RedisStore on a Redis Cluster of 3 masters', async () => {
  const redis = cluster!.cluster(recommendedClusterOptions);
  await whenReady(redis);
  return new RedisStore({ redis, prefix: uniquePrefix('contract') });
});
