import type { ClusterOptions, RedisOptions } from 'ioredis';

/** `connectTimeout` of `recommendedRedisOptions`: ms to wait for a connection (TCP and TLS). */
export const RECOMMENDED_CONNECT_TIMEOUT_MS = 1000;
/** First pause before reconnecting, in ms; it doubles on each failed attempt… */
export const RECOMMENDED_RECONNECT_BASE_MS = 50;
/** …up to this many ms, and then stays there: ioredis never gives up reconnecting. */
export const RECOMMENDED_RECONNECT_MAX_MS = 1000;

/**
 * ioredis `retryStrategy` of `recommendedRedisOptions`: 50, 100, 200, 400, 800, then 1000 ms
 * between attempts, forever. Bounded so that Redis is used again within about
 * `RECOMMENDED_RECONNECT_MAX_MS + RECOMMENDED_CONNECT_TIMEOUT_MS` of its return; never `null`,
 * because a client that stops reconnecting would leave every limit on its failure policy until
 * the process restarts.
 */
export function recommendedRetryStrategy(times: number): number {
  return Math.min(RECOMMENDED_RECONNECT_BASE_MS * 2 ** Math.max(0, times - 1), RECOMMENDED_RECONNECT_MAX_MS);
}

/**
 * Whether ioredis should reconnect after `error`: yes for `READONLY`, which a master demoted to a
 * replica answers (a failover happened under the connection). Reconnecting reaches whatever the
 * Sentinels or the endpoint (a managed service's DNS name) name now; the failed command is not
 * resent (it answers the failure, and the limiter decides by its policy). `reconnectOnError` of
 * `recommendedRedisOptions`, so of every recommended ioredis and iovalkey option set.
 */
export function reconnectOnReadonly(error: Error): boolean {
  return error.message.startsWith('READONLY');
}

/**
 * ioredis options for a client that a limiter calls. The limiter bounds every call with its own
 * timeout and applies its failure policy when Redis is away; these options make sure that no
 * command outlives that timeout in a queue, and that none is run twice: a `take` sent again
 * after a reconnect would count the same request twice.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * // With the offline queue off, a call made before the first connection fails at once:
 * // wait for 'ready' (or let the first calls take the failure policy).
 * await new Promise((resolve) => redis.once('ready', resolve));
 */
export const recommendedRedisOptions = Object.freeze({
  /**
   * No queue while disconnected: a call fails at once, and the limiter decides by policy. A
   * queued command would be sent after the limiter had already timed out and decided, and would
   * then take tokens for a request that was decided without them.
   */
  enableOfflineQueue: false,
  /**
   * 0: when the connection drops, ioredis rejects at once every command it had sent and not had
   * an answer to. With 1 or more it keeps them pending through that many reconnection attempts,
   * and with `autoResendUnfulfilledCommands: false` a command still pending when the connection
   * comes back is never settled (ioredis 5.11 drops its queue on reconnect).
   */
  maxRetriesPerRequest: 0,
  /**
   * Never resend a command sent before a disconnect: Redis may already have run it, and a
   * `take` run twice counts the request twice.
   */
  autoResendUnfulfilledCommands: false,
  /**
   * Off: measured 15–26 % less throughput and twice the p99 for this traffic (small scripts,
   * up to 256 calls in flight) with ioredis 5.9 on loopback.
   */
  enableAutoPipelining: false,
  /**
   * 1 s: a connection that has not opened by then is given up and tried again. Redis is on the
   * same network; ioredis' 10 s default would delay recovery, not help it.
   * @default 1000 (`RECOMMENDED_CONNECT_TIMEOUT_MS`)
   */
  connectTimeout: RECOMMENDED_CONNECT_TIMEOUT_MS,
  /** Reconnect with a bounded back-off, forever: `recommendedRetryStrategy`. */
  retryStrategy: recommendedRetryStrategy,
  /**
   * 1 s: how long ioredis waits, at most, before asking again whether a server that is `LOADING`
   * its dataset has finished (it is not ready, and calls fail at once, until then). It waits
   * Redis' own estimate otherwise, up to its 10 s default, and Redis' estimate runs long when the
   * last part of the file is its bulk: after a restart that loaded in 3.4 s the limiter stayed on
   * its policy 7.6 s more; with 1 s, 0.8 s more.
   * @default 1000 (`RECOMMENDED_RECONNECT_MAX_MS`)
   */
  maxLoadingRetryTime: RECOMMENDED_RECONNECT_MAX_MS,
  /**
   * Reconnect on `READONLY`, without resending: `reconnectOnReadonly`. Behind one endpoint a
   * connection stays on a master that was demoted under it, and without this every call answered
   * `READONLY` for as long as the connection lived (every decision the policy's 6 s after the
   * promotion).
   */
  reconnectOnError: reconnectOnReadonly,
} satisfies RedisOptions);

/**
 * ioredis `Cluster` options for a client that a limiter calls: `recommendedRedisOptions` for
 * each node's connection, and no offline queue in the `Cluster` itself (it keeps its own while
 * it is not ready or is refreshing its slots), and no resending of a command whose connection
 * closed. Node connections keep ioredis' own `retryStrategy` and `enableOfflineQueue` whatever
 * `redisOptions` say (a lost node is found again through the slot map, and a node's first
 * connection is lazy).
 *
 * @example
 * import { Cluster } from 'ioredis';
 * import { recommendedClusterOptions } from '@tiered-limiter/redis';
 *
 * const cluster = new Cluster([{ host: '127.0.0.1', port: 7000 }], recommendedClusterOptions);
 * await new Promise((resolve) => cluster.once('ready', resolve));
 * // Each master's connection opens lazily, and with the offline queue off, a call for a master
 * // whose connection is still opening fails at once: open them all before the first calls.
 * await Promise.all(cluster.nodes('master').map((node) => node.ping()));
 */
export const recommendedClusterOptions = Object.freeze({
  /** No queue while the cluster is not ready: as `enableOfflineQueue` of `recommendedRedisOptions`. */
  enableOfflineQueue: false,
  /**
   * 0: a command whose node connection closed fails at once instead of being sent again. By
   * default ioredis resends it after 100 ms, though Redis may have run it before the connection
   * dropped: a `take` counted twice (a test shows it). Redirections (MOVED, ASK, TRYAGAIN) are
   * still followed: Redis did not run those commands.
   */
  retryDelayOnFailover: 0,
  /** Off, as in `recommendedRedisOptions`. */
  enableAutoPipelining: false,
  /** Each node's connection: `recommendedRedisOptions`. */
  redisOptions: recommendedRedisOptions,
} satisfies ClusterOptions);
