import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { whenReady } from './clients.js';
import { startCluster } from './redis-cluster.js';
import { startRedis } from './redis-server.js';

/** A Redis server and a Redis Cluster of 3 masters, each with a client ready for commands. */
export interface RedisTargets {
  readonly redis: Redis;
  readonly cluster: Cluster;
  /** Disconnects both clients and stops every server. */
  stop(): Promise<void>;
}

/**
 * Starts a Redis server and a 3-master Cluster side by side (`startRedis`, `startCluster`) and a
 * client of each, made with `redisOptions` and `clusterOptions` and ready (`whenReady`): what a
 * suite run on one server and on a Cluster needs.
 */
export async function startRedisTargets(
  redisOptions: RedisOptions = {},
  clusterOptions: ClusterOptions = {},
): Promise<RedisTargets> {
  const [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
  const redis = server.client(redisOptions);
  const client = cluster.cluster(clusterOptions);
  const stop = async () => {
    await Promise.all([server.stop(), cluster.stop()]);
  };
  try {
    await Promise.all([whenReady(redis), whenReady(client)]);
  } catch (error) {
    await stop();
    throw error;
  }
  return { redis, cluster: client, stop };
}
