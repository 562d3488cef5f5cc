import type { RedisClientLike } from './client/adapter.js';
import type { CoalesceOptions } from './coalesce-options.js';

/** Options of `RedisStore`. */
export interface RedisStoreOptions {
  /**
   * The client: an ioredis or iovalkey `Redis` or `Cluster` (best made with
   * `recommendedRedisOptions` / `recommendedClusterOptions` / `recommendedValkeyOptions`), a
   * node-redis v5 client, cluster or Sentinel client (`recommendedNodeRedisOptions`,
   * `recommendedNodeRedisClusterOptions`, `recommendedNodeRedisSentinelOptions`), connected, or a
   * `RedisClientAdapter` for any other client. The store tells them apart by shape. It never
   * connects, disconnects or reconfigures the client, which may be shared.
   */
  redis: RedisClientLike;
  /**
   * Starts every key: `prefix:{tag}:limitName`. 1 to 64 of `A-Z a-z 0-9 _ . : / -`.
   * @default 'tl'
   */
  prefix?: string;
  /**
   * Gathers ops into round trips (see `CoalesceOptions`), or `false` to send each op alone the
   * moment it is made.
   * @default { maxKeysPerCall: 32, maxInFlight: 4 }
   */
  coalesce?: CoalesceOptions | false;
  /**
   * Virtual shards for a Cluster: keys become `prefix:{s<n>}:tag:limitName`, `n` the key's
   * shard of `shards`, so the buckets of many users share a few slots and their ops coalesce
   * into few calls (without it, each user is a slot of their own, and one call carries one
   * user's ops). A few per master is enough (3 masters: 12–48); 1 to 16384. Changing it (or
   * turning it on) renames every key: buckets start full once, as after a `reset`.
   * @default undefined (one slot per user key)
   */
  shards?: number;
  /**
   * How long a bucket's key stays once its bucket is full, in ms: the key's TTL is the time
   * until full, plus this, plus a 50 ms margin. A key seen again within it is rewritten in
   * place rather than expired and made anew, which spares Redis's expiry cycle (see
   * `DEFAULT_KEEP_AFTER_FULL_MS`); a longer one holds more keys. 0 to a day.
   * @default 1000
   */
  keepAfterFullMs?: number;
}
