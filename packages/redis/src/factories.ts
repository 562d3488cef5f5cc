import { ConfigError } from '@tiered-limiter/core';
import {
  RequestLimiter,
  type RequestLimiterOptions,
  TieredLimiter,
  type TieredLimiterOptions,
} from '@tiered-limiter/local';
import { RedisStore, type RedisStoreOptions } from './redis-store.js';

/** Options of `createRedisLimiter`: the per-request limiter's, with a Redis client instead of a store. */
export type RedisLimiterOptions = Omit<RequestLimiterOptions, 'store'> & RedisStoreOptions;

/** Options of `createTieredLimiter`: the two-tier limiter's, with a Redis client instead of a store. */
export type RedisTieredLimiterOptions = Omit<TieredLimiterOptions, 'store'> & RedisStoreOptions;

/**
 * The per-request tier on Redis: a `RequestLimiter` over a `RedisStore`, one EVALSHA per
 * decision. The client stays the caller's to configure (see `recommendedRedisOptions`) and close.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { perMinute } from '@tiered-limiter/core';
 * import { createRedisLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * const login = createRedisLimiter({ redis, prefix: 'login', limits: perMinute(5), failurePolicy: 'closed' });
 * const decision = await login.consume('user:42');
 */
export function createRedisLimiter(options: RedisLimiterOptions): RequestLimiter {
  const { redis, prefix, coalesce, shards, keepAfterFullMs, ...rest } = assertOptions(options);
  return new RequestLimiter({
    ...rest,
    store: new RedisStore({ redis, prefix, coalesce, shards, keepAfterFullMs }),
  });
}

/**
 * The two-tier limiter on Redis: a `TieredLimiter` leasing from a `RedisStore`, so most
 * decisions cost no round trip and the limit still holds across every instance.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { perSecond } from '@tiered-limiter/core';
 * import { createTieredLimiter, recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * const api = createTieredLimiter({ redis, prefix: 'api', limits: perSecond(100), failurePolicy: 'local', instances: 4 });
 * const decision = api.tryConsume('user:42') ?? (await api.consume('user:42'));
 */
export function createTieredLimiter(options: RedisTieredLimiterOptions): TieredLimiter {
  const { redis, prefix, coalesce, shards, keepAfterFullMs, ...rest } = assertOptions(options);
  return new TieredLimiter({
    ...rest,
    store: new RedisStore({ redis, prefix, coalesce, shards, keepAfterFullMs }),
  });
}

/** A factory's options must be an object before they can be taken apart. */
function assertOptions<T>(options: T): T {
  if (options === null || typeof options !== 'object') {
    throw new ConfigError('options', options, 'an object with a `redis` client');
  }
  return options;
}
