import {
  type BucketOp,
  type BucketReply,
  type CallerWait,
  ConfigError,
  type GlobalStore,
  internal,
  type LimitSpec,
} from '@tiered-limiter/core';
import calculateSlot from 'cluster-key-slot';
import { applySender, type StoreOp } from './apply-calls.js';
import { adapterFor, type RedisClientAdapter } from './client/adapter.js';
import type { CoalesceOptions } from './coalesce-options.js';
import { Coalescer, type CoalescerStats } from './coalescer.js';
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_KEYS_PER_CALL, MAX_SHARDS } from './defaults.js';
import {
  assertPrefix,
  bucketKey,
  bucketKeys,
  DEFAULT_KEEP_AFTER_FULL_MS,
  DEFAULT_PREFIX,
  MAX_KEEP_AFTER_FULL_MS,
} from './keys.js';
import type { RedisStoreOptions } from './redis-store-options.js';

export type { RedisStoreOptions } from './redis-store-options.js';

const { assertInteger, assertKnownOptions, refusedKeyLimits, refusedOp } = internal;

/** The bucket op a heartbeat entry stands in (its `heartbeat` field says what it does). */
const FLEET_OP: BucketOp = Object.freeze({ key: '', limits: [] });

/**
 * The `GlobalStore` on Redis: one Lua script (`lua/apply.lua`) that applies a batch of ops
 * atomically, timed by the server's own `TIME`. Ops made in one tick, or while earlier calls
 * are out, leave together (`coalesce`), so many keys cost one round trip. Works alike on a
 * single server and a Cluster, with ioredis, iovalkey or node-redis: the limits of one key share
 * a hash tag, a call carries the ops of one slot, and a Cluster master gets its slots' calls
 * together as one pipeline. A failed call rejects every op it carried with a `StoreError` whose
 * `cause` is the client's error (a `StoreReplyError` naming the code when Redis answered with an
 * error: `OOM`, `NOPERM`, `BUSY` …); it is never resent, but for a call the script refused for one
 * key's value (`WRONGTYPE`, before it wrote anything), whose other keys' ops go again alone.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { perSecond, internal } from '@tiered-limiter/core';
 * import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * const store = new RedisStore({ redis, prefix: 'api' });
 * const reply = await store.apply({ key: 'user:42', limits: [perSecond(10)], take: 1 });
 * // { ok: true, granted: 1, remaining: 9, … }
 */
export class RedisStore implements GlobalStore {
  readonly #client: RedisClientAdapter;
  readonly #prefix: string;
  readonly #shards: number | undefined;
  readonly #keepAfterFullMs: number;
  readonly #coalescer: Coalescer<BucketOp, BucketReply>;

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('options', options, 'an object with a `redis` client');
    }
    assertKnownOptions('', options, ['redis', 'prefix', 'coalesce', 'shards', 'keepAfterFullMs']);
    this.#client = adapterFor(options.redis);
    this.#prefix = assertPrefix(options.prefix ?? DEFAULT_PREFIX);
    this.#shards =
      options.shards === undefined ? undefined : assertInteger('shards', options.shards, 1, MAX_SHARDS);
    this.#keepAfterFullMs = assertInteger(
      'keepAfterFullMs',
      options.keepAfterFullMs ?? DEFAULT_KEEP_AFTER_FULL_MS,
      0,
      MAX_KEEP_AFTER_FULL_MS,
    );
    this.#coalescer = coalescerFor(
      options.coalesce,
      applySender(this.#client, this.#keepAfterFullMs, (extra) => this.#coalescer.countCalls(extra)),
    );
  }

  /** The prefix of this store's keys. */
  get prefix(): string {
    return this.#prefix;
  }

  /** The virtual shards keys are spread over, or `undefined` (one slot per user key). */
  get shards(): number | undefined {
    return this.#shards;
  }

  /**
   * Ops a round trip carries at most: `coalesce.maxKeysPerCall`, or 1 on a Cluster without
   * `shards`, where a call carries one slot's ops and each user key is a slot of its own.
   */
  get opsPerCall(): number {
    return this.#client.isCluster && this.#shards === undefined ? 1 : this.#coalescer.maxKeysPerCall;
  }

  /**
   * The Cluster slot of `key`'s buckets (on a single server, 0): a script call carries one slot's
   * ops, so the two-tier limiter's sync sends its keys slot by slot and several keys share a call
   * even without `shards`.
   */
  groupOf(key: string): number {
    return this.#client.isCluster ? calculateSlot(bucketKey(this.#prefix, key, '', this.#shards)) : 0;
  }

  /** Which client library the store drives: `ioredis` (iovalkey too), `node-redis`, or an adapter's name. */
  get client(): string {
    return this.#client.client;
  }

  /**
   * Counters since the store was made: `calls`, round trips sent (one per destination flush: a
   * Cluster master's pipeline of several slots is one; a flush whose slots the client now maps to
   * several masters is one per master, and a part sent again alone after a redirection one more),
   * whether they succeeded or not; `ops`,
   * the ops they carried (ops on one key merged in a call count each); `keys`, the bucket keys
   * they carried (one per limit of each op). So `ops / calls` is the coalescing achieved.
   * `withdrawn`: ops dropped unsent because their caller gave up (the limiters' timeout) while
   * they were queued.
   */
  stats(): CoalescerStats {
    return this.#coalescer.stats();
  }

  /**
   * Applies one op atomically in `apply.lua`; ops submitted in the same tick to one master share
   * a round trip. Rejects with an `ArgumentError`, sending nothing, for an op on no limit or a key
   * that is not a string.
   */
  apply(op: BucketOp, wait?: CallerWait): Promise<BucketReply> {
    const refused = refusedOp(op);
    if (refused !== undefined) return Promise.reject(refused);
    const keys = bucketKeys(this.#prefix, op.key, op.limits, this.#shards);
    const slot = this.#client.isCluster ? calculateSlot(keys[0]!) : 0;
    return new Promise<BucketReply>((resolve, reject) => {
      // Ops to one master share a queue; the name is read at submit time, so a slot the client
      // has seen move goes to its new owner's queue once its ops out to the old one are answered.
      const background = op.background === true;
      this.#coalescer.submit(this.#client.nodeOf(slot), {
        op,
        keys,
        slot,
        background,
        // A charge for tokens already admitted: a later look or take on the key must see it.
        keyOrdered: background && op.debit !== undefined && op.debit > 0,
        wait,
        resolve,
        reject,
      });
    });
  }

  /**
   * Registers `instance` as alive for `ttlMs` (Redis's clock) in the fleet's sorted set
   * `prefix:{%fleet}`, and resolves how many instances are alive. It rides in the same call as
   * the ops of the tick (on a Cluster, in the same pipeline to the set's master), so a sync costs
   * no extra round trip. `%f` is never written by key escaping, so no user key reaches the set.
   */
  heartbeat(instance: string, ttlMs: number): Promise<number> {
    return this.#fleet(instance, Math.max(1, Math.ceil(ttlMs)));
  }

  /** Takes `instance` out of the fleet's sorted set (a heartbeat entry of no life), in the tick's call like a heartbeat. */
  leave(instance: string): Promise<void> {
    return this.#fleet(instance, 0).then(() => undefined);
  }

  /** A heartbeat entry: `instance` alive for `ttlMs`, or gone with 0; resolves the live count. */
  #fleet(instance: string, ttlMs: number): Promise<number> {
    const key = `${this.#prefix}:{%fleet}`;
    const slot = this.#client.isCluster ? calculateSlot(key) : 0;
    return new Promise<number>((resolve, reject) => {
      const pending: StoreOp = {
        op: FLEET_OP,
        keys: [key],
        slot,
        background: true,
        wait: undefined,
        heartbeat: { instance, ttlMs },
        resolve: (reply) => resolve(reply.granted),
        reject,
      };
      this.#coalescer.submit(this.#client.nodeOf(slot), pending);
    });
  }

  /**
   * Makes `key`'s buckets full, their leases forgotten behind a fence (core's `resetSharedBucket`): its next op finds them
   * full. It is an entry of the coalesced calls like any op, so an op submitted before it (a
   * `consume` not yet sent) counts before the reset rather than after it.
   */
  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    const refused = refusedKeyLimits(key, limits);
    if (refused !== undefined) return Promise.reject(refused);
    const keys = bucketKeys(this.#prefix, key, limits, this.#shards);
    const slot = this.#client.isCluster ? calculateSlot(keys[0]!) : 0;
    return new Promise<void>((resolve, reject) => {
      const pending: StoreOp = {
        op: { key, limits },
        keys,
        slot,
        background: false,
        wait: undefined,
        reset: true,
        resolve: () => resolve(),
        reject,
      };
      this.#coalescer.submit(this.#client.nodeOf(slot), pending);
    });
  }
}

function coalescerFor(
  options: CoalesceOptions | false | undefined,
  send: (batches: readonly (readonly StoreOp[])[]) => Promise<void>,
): Coalescer<BucketOp, BucketReply> {
  // Not coalescing is a coalescer that sends one op a call with no bound on calls in flight.
  if (options === false) return new Coalescer(send, 1, Number.MAX_SAFE_INTEGER);
  const o = options ?? {};
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new ConfigError('coalesce', options, 'an object or false');
  }
  assertKnownOptions('coalesce', o, ['maxKeysPerCall', 'maxInFlight']);
  return new Coalescer(
    send,
    assertInteger('coalesce.maxKeysPerCall', o.maxKeysPerCall ?? DEFAULT_MAX_KEYS_PER_CALL, 1, 10_000),
    assertInteger('coalesce.maxInFlight', o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, 1, 1024),
  );
}
