import type { RedisOptions } from 'ioredis';
import {
  RECOMMENDED_CONNECT_TIMEOUT_MS,
  recommendedClusterOptions,
  recommendedRedisOptions,
  recommendedRetryStrategy,
} from './recommended-options.js';

/**
 * iovalkey `Redis` options for a client a limiter calls. iovalkey is a fork of ioredis with the
 * same options and the same behaviour at a dropped connection (tested): these are
 * `recommendedRedisOptions`, for the same reasons (no offline queue, `maxRetriesPerRequest: 0`,
 * no resend of unfulfilled commands, a bounded back-off).
 *
 * @example
 * import Valkey from 'iovalkey';
 * import { recommendedValkeyOptions, whenReady } from '@tiered-limiter/redis';
 *
 * const valkey = new Valkey({ ...recommendedValkeyOptions, host: '127.0.0.1', port: 6379 });
 * await whenReady(valkey);
 */
export const recommendedValkeyOptions = recommendedRedisOptions;

/**
 * iovalkey `Cluster` options: `recommendedClusterOptions` (iovalkey keeps ioredis' Cluster
 * options, `retryDelayOnFailover: 0` included, which stops a resend after a node connection drops).
 *
 * @example
 * import Valkey from 'iovalkey';
 * import { recommendedValkeyClusterOptions, whenReady } from '@tiered-limiter/redis';
 *
 * const cluster = new Valkey.Cluster([{ host: '127.0.0.1', port: 7000 }], recommendedValkeyClusterOptions);
 * await whenReady(cluster); // also opens each master's connection
 */
export const recommendedValkeyClusterOptions = recommendedClusterOptions;

/**
 * node-redis `reconnectStrategy` of `recommendedNodeRedisOptions`: the same 50 ms → 1 s back-off
 * as `recommendedRetryStrategy`, forever (node-redis counts `retries` from 0).
 */
export function recommendedNodeRedisReconnectStrategy(retries: number): number {
  return recommendedRetryStrategy(retries + 1);
}

/**
 * node-redis v5 `createClient` options for a client a limiter calls. node-redis never writes a
 * command twice (at a dropped connection it rejects what was sent), but by default it queues
 * commands made while disconnected and sends them after the reconnect, when the limiter has
 * long decided by its policy: each would then take tokens for nothing. So:
 * - `disableOfflineQueue: true`: a command made while disconnected fails at once, and one still
 *   waiting to be written when the connection drops fails too (tested);
 * - `socket.connectTimeout` 1 s and `socket.reconnectStrategy` 50 ms → 1 s, forever, as for ioredis.
 * Spread your own `socket` options (host, port, TLS) into `socket` beside these.
 *
 * @example
 * import { createClient } from 'redis';
 * import { recommendedNodeRedisOptions } from '@tiered-limiter/redis';
 *
 * const client = createClient({
 *   ...recommendedNodeRedisOptions,
 *   socket: { ...recommendedNodeRedisOptions.socket, host: '127.0.0.1', port: 6379 },
 * });
 * await client.connect();
 */
export const recommendedNodeRedisOptions = Object.freeze({
  /** Fail at once while disconnected instead of sending late: see above. */
  disableOfflineQueue: true,
  /** Connection timing. */
  socket: Object.freeze({
    /**
     * 1 s to open a connection.
     * @default 1000 (`RECOMMENDED_CONNECT_TIMEOUT_MS`)
     */
    connectTimeout: RECOMMENDED_CONNECT_TIMEOUT_MS,
    /** `recommendedNodeRedisReconnectStrategy`: 50 ms doubling to 1 s, never giving up. */
    reconnectStrategy: recommendedNodeRedisReconnectStrategy,
  }),
});

/**
 * node-redis v5 `createCluster` options: every node's client made with
 * `recommendedNodeRedisOptions` (`defaults`). node-redis' cluster follows MOVED and ASK (Redis
 * ran nothing then) and resends nothing else. Add `rootNodes`.
 *
 * @example
 * import { createCluster } from 'redis';
 * import { recommendedNodeRedisClusterOptions } from '@tiered-limiter/redis';
 *
 * const cluster = createCluster({
 *   ...recommendedNodeRedisClusterOptions,
 *   rootNodes: [{ socket: { host: '127.0.0.1', port: 7000 } }],
 * });
 * await cluster.connect();
 */
export const recommendedNodeRedisClusterOptions = Object.freeze({
  /** Options of every node's client. */
  defaults: recommendedNodeRedisOptions,
});

/**
 * node-redis v5 `createSentinel` options (add `name` and `sentinelRootNodes`): each node's client
 * made with `recommendedNodeRedisOptions`, and `maxCommandRediscovers: 0`. By default node-redis
 * sends a command again (up to 16 times) when it failed on a master connection that is no longer
 * ready, a dropped connection or a failover: Redis may have run it before the connection dropped,
 * and a take sent again counts the request twice (tested). With 0 the call fails, the limiter
 * decides by its policy, and node-redis still moves to the master the Sentinels name. A call made
 * while node-redis is finding the master waits for it inside node-redis whatever the options, and
 * is sent once it is found: its tokens count then, after its policy decided the request.
 *
 * @example
 * import { createSentinel } from 'redis';
 * import { recommendedNodeRedisSentinelOptions } from '@tiered-limiter/redis';
 *
 * const sentinel = createSentinel({
 *   ...recommendedNodeRedisSentinelOptions,
 *   name: 'mymaster',
 *   sentinelRootNodes: [{ host: '127.0.0.1', port: 26379 }],
 * });
 * await sentinel.connect();
 */
export const recommendedNodeRedisSentinelOptions = Object.freeze({
  /** Options of the client to each node: `recommendedNodeRedisOptions`. */
  nodeClientOptions: recommendedNodeRedisOptions,
  /** Never send a failed call again: see above. */
  maxCommandRediscovers: 0,
});

/**
 * ioredis options for a client of a Sentinel-managed master (add `sentinels` and `name`):
 * `recommendedRedisOptions` (whose `reconnectOnError: reconnectOnReadonly` reconnects, through the
 * Sentinels, when a demoted master answers `READONLY`), plus
 * - `failoverDetector: true`: ioredis listens for the Sentinels' `+switch-master` and moves to the
 *   new master at once, rather than when the old connection fails;
 * - `sentinelRetryStrategy` 50 ms → 1 s and `sentinelCommandTimeout` 1 s: a Sentinel that is
 *   away or slow costs no more than a connection does.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { recommendedSentinelOptions, whenReady } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({
 *   ...recommendedSentinelOptions,
 *   sentinels: [{ host: '127.0.0.1', port: 26379 }],
 *   name: 'mymaster',
 * });
 * await whenReady(redis);
 */
export const recommendedSentinelOptions = Object.freeze({
  ...recommendedRedisOptions,
  /** Follow `+switch-master` at once. */
  failoverDetector: true,
  /** Retry the Sentinels as the server: `recommendedRetryStrategy`. */
  sentinelRetryStrategy: recommendedRetryStrategy,
  /**
   * 1 s for a Sentinel to answer.
   * @default 1000 (`RECOMMENDED_CONNECT_TIMEOUT_MS`)
   */
  sentinelCommandTimeout: RECOMMENDED_CONNECT_TIMEOUT_MS,
} satisfies RedisOptions);

/**
 * iovalkey options for a client of a Sentinel-managed master (add `sentinels` and `name`):
 * `recommendedSentinelOptions`. iovalkey keeps ioredis' Sentinel connector (`failoverDetector`,
 * `sentinelRetryStrategy`, `sentinelCommandTimeout`) and its `reconnectOnError`, and moves to the
 * promoted replica as ioredis does (tested: a master killed and a `SENTINEL FAILOVER` under load).
 *
 * @example
 * import Valkey from 'iovalkey';
 * import { recommendedValkeySentinelOptions, whenReady } from '@tiered-limiter/redis';
 *
 * const valkey = new Valkey({
 *   ...recommendedValkeySentinelOptions,
 *   sentinels: [{ host: '127.0.0.1', port: 26379 }],
 *   name: 'mymaster',
 * });
 * await whenReady(valkey);
 */
export const recommendedValkeySentinelOptions = recommendedSentinelOptions;
