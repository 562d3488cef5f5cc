import type { LimitSpec } from '@tiered-limiter/core';
import { type ColdStartOptions, LocalLimiter, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { RedisStore } from '@tiered-limiter/redis';
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import type { PeerLimit } from './limits.js';
import { ADMITTED, DENIED, type Decider, type Outcome, outcomeOf } from './loop.js';

/** A limiter made for one row, seen as a `Decider`, and how to release it. */
export interface Subject {
  readonly decider: Decider;
  /** Whether its decisions say when the failure policy made them (rate-limiter-flexible's do not). */
  readonly showsPolicy: boolean;
  /** Its `RedisStore`'s counters (round trips, ops, keys), when it has one. */
  readonly storeStats?: () => StoreStats;
  /**
   * The periodic sync's period now (`stats().syncPeriodMs`), ms: what a lease may borrow, the `T`
   * of the accuracy bound. Absent for a limiter without the sync.
   */
  readonly syncPeriodMs?: () => number | undefined;
  close(): Promise<void>;
}

/** `RedisStore.stats()`. */
export interface StoreStats {
  readonly calls: number;
  readonly ops: number;
  readonly keys: number;
}

/** A Redis client the rows run on: one server, or a Cluster. */
export type BenchClient = Redis | Cluster;

/** How a row makes its subject: on the row's client, its keys under the row's own prefix. */
export type SubjectFactory = (redis: BenchClient, prefix: string) => Subject;

/**
 * The store timeout of the throughput rows' limiters: long enough that a loaded machine's queue
 * (64 calls in flight on two cores) is timed, not turned into failure-policy decisions. The
 * default, 20 ms, is what the fleet simulation uses.
 */
export const THROUGHPUT_TIMEOUT_MS = 1000;

const admit = (): Outcome => ADMITTED;
/** rate-limiter-flexible resolves an admission and rejects a denial with its result, a failure with an Error. */
const deny = (reason: unknown): Outcome => {
  if (reason instanceof Error) throw reason;
  return DENIED;
};

/** No limiter at all: what the loop itself costs. */
export function noLimiter(): Subject {
  return {
    decider: { sync: admit, async: async () => ADMITTED },
    showsPolicy: false,
    close: async () => {},
  };
}

/**
 * `LocalLimiter` on its own: every key's bucket in process, nothing shared, no store (the row's
 * client goes unused). Beside the many-keys rows it is their ceiling on this host: a limiter that
 * keeps each key's state in process can decide no faster than this on the same keys, in the same
 * loop, shared limit or not.
 */
export function localLimiter(limit: LimitSpec, maxKeys: number): Subject {
  const limiter = new LocalLimiter({ limits: limit, maxKeys });
  const decide = (key: string) => outcomeOf(limiter.tryConsume(key));
  return {
    decider: { sync: decide, async: async (key) => decide(key) },
    // It has no store, so no failure policy: its column reads `—`, not a 0 that might be read as a claim.
    showsPolicy: false,
    close: async () => {},
  };
}

/** rate-limiter-flexible's in-process limiter. */
export function rlfMemory(limit: PeerLimit): RateLimiterMemory {
  return new RateLimiterMemory({ points: limit.points, duration: limit.durationS });
}

/** `consume` of a rate-limiter-flexible limiter as an outcome. */
export function rlfOutcome(limiter: RateLimiterMemory | RateLimiterRedis, key: string): Promise<Outcome> {
  return limiter.consume(key).then(admit, deny);
}

/** One EVALSHA of the take script through `RedisStore`: no guard, no policy, no limiter. */
export function bareStore(redis: BenchClient, prefix: string, limit: LimitSpec): Subject {
  const store = new RedisStore({ redis, prefix });
  const limits = [limit];
  return {
    decider: {
      sync: undefined,
      async: (key) => store.apply({ key, limits, take: 1 }).then((reply) => (reply.ok ? ADMITTED : DENIED)),
    },
    showsPolicy: true,
    storeStats: () => store.stats(),
    close: async () => {},
  };
}

/**
 * What both tiers are given in every row: a `RedisStore` of their own (as `createRedisLimiter` and
 * `createTieredLimiter` make it), the row's limit, `failurePolicy: 'open'` and the rows' timeout.
 */
function rowOptions(redis: BenchClient, prefix: string, limit: LimitSpec, shards?: number) {
  return {
    store: new RedisStore({ redis, prefix, ...(shards === undefined ? {} : { shards }) }),
    limits: limit,
    failurePolicy: 'open',
    timeoutMs: THROUGHPUT_TIMEOUT_MS,
  } as const;
}

/**
 * The per-request tier, as `rowOptions` sets it up, with `rememberDenials`: the peer keeps denied
 * keys away from Redis too (`inMemoryBlockOnConsumed`).
 */
export function requestLimiter(redis: BenchClient, prefix: string, limit: LimitSpec): Subject {
  const options = rowOptions(redis, prefix, limit);
  const limiter = new RequestLimiter({ ...options, rememberDenials: true });
  return {
    decider: { sync: undefined, async: async (key) => outcomeOf(await limiter.consume(key)) },
    showsPolicy: true,
    storeStats: () => options.store.stats(),
    close: () => limiter.close(),
  };
}

/** What a row sets on the two-tier limiter beyond its defaults. */
export interface TieredSetup {
  readonly maxKeys: number;
  /** The fleet size it is told (`instances`). @default not told */
  readonly instances?: number;
  readonly coldStart?: ColdStartOptions;
  /** Its `RedisStore`'s virtual shards (`shards`). @default none */
  readonly shards?: number;
}

/**
 * The two-tier limiter with its defaults (but `rowOptions` and `setup`), used as its README says:
 * `tryConsume(key) ?? await consume(key)`.
 */
export function tieredLimiter(
  redis: BenchClient,
  prefix: string,
  limit: LimitSpec,
  setup: TieredSetup,
): Subject {
  const { shards, ...limiterSetup } = setup;
  const options = rowOptions(redis, prefix, limit, shards);
  const limiter = new TieredLimiter({ ...options, ...limiterSetup });
  return {
    decider: {
      sync: (key) => {
        const decision = limiter.tryConsume(key);
        return decision === undefined ? undefined : outcomeOf(decision);
      },
      async: async (key) => outcomeOf(await limiter.consume(key)),
    },
    showsPolicy: true,
    storeStats: () => options.store.stats(),
    syncPeriodMs: () => limiter.stats().syncPeriodMs,
    close: () => limiter.close(),
  };
}

/**
 * The peer: rate-limiter-flexible's `RateLimiterRedis` on the same ioredis client, set up as its
 * documentation advises: an insurance limiter for the same limit (it decides while Redis fails,
 * silently: its decisions cannot be told apart), and keys that used up their window blocked in
 * process until the window ends (`inMemoryBlockOnConsumed`), so that a key over its limit costs
 * Redis nothing more.
 */
export function rlfRedis(redis: BenchClient, prefix: string, limit: PeerLimit): Subject {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: prefix,
    points: limit.points,
    duration: limit.durationS,
    inMemoryBlockOnConsumed: limit.points,
    insuranceLimiter: rlfMemory(limit),
  });
  return {
    decider: { sync: undefined, async: (key) => rlfOutcome(limiter, key) },
    showsPolicy: false,
    close: async () => {},
  };
}
