import { allowDecision, type Decision, defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { LocalLimiter } from '@tiered-limiter/local';
import { createRedisLimiter, createTieredLimiter, RedisStore } from '@tiered-limiter/redis';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import type { Decider } from './loop.js';

/** A limiter made for one row, seen as a `Decider`, and how to release it. */
export interface Subject {
  readonly decider: Decider;
  /** Decisions its failure policy made so far (a store call failed or timed out), when it says. */
  readonly fallbacks?: () => number;
  close(): Promise<void>;
}

/**
 * The store timeout of the throughput rows' limiters: long enough that a loaded machine's queue
 * (256 calls in flight on two cores) is timed, not turned into failure-policy decisions. The
 * default, 20 ms, is what the fleet simulation uses.
 */
export const THROUGHPUT_TIMEOUT_MS = 1000;

/**
 * rate-limiter-flexible counts `points` per fixed window of `durationS` seconds. A token bucket
 * of `capacity` refilled at `rate` per second has no exact equivalent there; the nearest is the
 * rate itself per one-second window (`points = rate`, `durationS = 1`).
 */
export interface PeerLimit {
  readonly points: number;
  readonly durationS: number;
}

export function peerLimitOf(limit: LimitSpec): PeerLimit {
  return { points: Math.max(1, Math.round(limit.refillPerSecond)), durationS: 1 };
}

const ALWAYS: Decision = allowDecision(1, 0, defineLimit({ capacity: 1, refillPerSecond: 1 }), 'local');
const admit = () => true;
/** rate-limiter-flexible resolves an admission and rejects a denial with its result, a failure with an Error. */
const deny = (reason: unknown): boolean => {
  if (reason instanceof Error) throw reason;
  return false;
};

/** No limiter at all: what the loop itself costs. */
export function noLimiter(): Subject {
  return {
    decider: { sync: () => ALWAYS.allowed, async: async () => ALWAYS.allowed },
    close: async () => {},
  };
}

/** The clock read a bucket makes on every decision, alone. */
export function clockOnly(): Subject {
  return {
    decider: { sync: () => performance.now() > 0, async: async () => performance.now() > 0 },
    close: async () => {},
  };
}

export function localLimiter(limit: LimitSpec, maxKeys: number): Subject {
  const limiter = new LocalLimiter({ limits: limit, maxKeys });
  return {
    decider: {
      sync: (key) => limiter.tryConsume(key).allowed,
      async: async (key) => limiter.tryConsume(key).allowed,
    },
    close: async () => {},
  };
}

/** rate-limiter-flexible's in-process limiter: the peer of `LocalLimiter`. */
export function rlfMemory(limit: PeerLimit): Subject {
  const limiter = new RateLimiterMemory({ points: limit.points, duration: limit.durationS });
  return {
    decider: { sync: undefined, async: (key) => limiter.consume(key).then(admit, deny) },
    close: async () => {},
  };
}

/** One EVALSHA of the take script through `RedisStore`: no guard, no policy, no limiter. */
export function bareStore(redis: Redis, prefix: string, limit: LimitSpec): Subject {
  const store = new RedisStore({ redis, prefix });
  const limits = [limit];
  return {
    decider: {
      sync: undefined,
      async: (key) => store.apply({ key, limits, take: 1 }).then((reply) => reply.ok),
    },
    close: async () => {},
  };
}

export function requestLimiter(redis: Redis, prefix: string, limit: LimitSpec): Subject {
  const limiter = createRedisLimiter({
    redis,
    prefix,
    limits: limit,
    failurePolicy: 'open',
    timeoutMs: THROUGHPUT_TIMEOUT_MS,
  });
  return {
    decider: { sync: undefined, async: async (key) => (await limiter.consume(key)).allowed },
    fallbacks: () => limiter.stats().decisions.fallback,
    close: () => limiter.close(),
  };
}

/** The two-tier limiter with its defaults (but the timeout), used as its README says: `tryConsume(key) ?? await consume(key)`. */
export function tieredLimiter(redis: Redis, prefix: string, limit: LimitSpec, maxKeys: number): Subject {
  const limiter = createTieredLimiter({
    redis,
    prefix,
    limits: limit,
    failurePolicy: 'open',
    timeoutMs: THROUGHPUT_TIMEOUT_MS,
    maxKeys,
  });
  return {
    decider: {
      sync: (key) => limiter.tryConsume(key)?.allowed,
      async: async (key) => (await limiter.consume(key)).allowed,
    },
    fallbacks: () => limiter.stats().decisions.fallback,
    close: () => limiter.close(),
  };
}

/**
 * The peer: rate-limiter-flexible's `RateLimiterRedis` on the same ioredis client, set up as its
 * documentation advises: an insurance limiter for the same limit (it decides while Redis fails),
 * and keys that used up their window blocked in process until the window ends
 * (`inMemoryBlockOnConsumed`), so that a key over its limit costs Redis nothing more.
 */
export function rlfRedis(redis: Redis, prefix: string, limit: PeerLimit): Subject {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: prefix,
    points: limit.points,
    duration: limit.durationS,
    inMemoryBlockOnConsumed: limit.points,
    insuranceLimiter: new RateLimiterMemory({ points: limit.points, duration: limit.durationS }),
  });
  return {
    decider: { sync: undefined, async: (key) => limiter.consume(key).then(admit, deny) },
    close: async () => {},
  };
}
