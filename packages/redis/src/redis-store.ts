import {
  assertInteger,
  type BucketOp,
  type BucketReply,
  ConfigError,
  type GlobalStore,
  type LimitSpec,
  StoreError,
} from '@tiered-limiter/core';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { type CoalesceOptions, Coalescer, type CoalescerStats, type Pending } from './coalescer.js';
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_KEYS_PER_CALL } from './defaults.js';
import { assertPrefix, bucketKeys, DEFAULT_PREFIX } from './keys.js';
import { encodeOps, readReplies } from './ops-codec.js';
import { SCRIPTS } from './scripts.js';

/** Options of `RedisStore`. */
export interface RedisStoreOptions {
  /**
   * The ioredis client: a `Redis` or a `Cluster`, best made with `recommendedRedisOptions`
   * (or `recommendedClusterOptions`). The store defines its script on it with `defineCommand`
   * (as `tieredLimiterApply`); it never connects, disconnects or reconfigures the client, which
   * may be shared.
   */
  redis: Redis | Cluster;
  /**
   * Starts every key: `prefix:{tag}:limitName`. 1 to 64 of `A-Z a-z 0-9 _ . : / -`.
   * @default 'tl'
   */
  prefix?: string;
  /**
   * Gathers ops into round trips (see `CoalesceOptions`), or `false` to send each op alone the
   * moment it is made.
   * @default { maxKeysPerCall: 64, maxInFlight: 2 }
   */
  coalesce?: CoalesceOptions | false;
}

const APPLY = 'tieredLimiterApply';

type ScriptArg = string | number;
type ScriptCommand = (...args: ScriptArg[]) => Promise<unknown>;
type ScriptedClient = Record<typeof APPLY, ScriptCommand> & {
  pipeline(): Record<typeof APPLY, (...args: ScriptArg[]) => unknown> & {
    exec(): Promise<[Error | null, unknown][] | null>;
  };
};

type Op = Pending<BucketOp, BucketReply>;

/**
 * The `GlobalStore` on Redis: one Lua script (`lua/apply.lua`) that applies a batch of ops
 * atomically, timed by the server's own `TIME`. Ops made in one tick, or while earlier calls
 * are out, leave together (`coalesce`), so many keys cost one round trip. Works alike on an
 * ioredis `Redis` and `Cluster`: the limits of one key share a hash tag, a call carries the ops
 * of one slot, and a Cluster master gets its slots' calls as one pipeline. A failed call
 * rejects every op it carried with a `StoreError` whose `cause` is the ioredis error; it is
 * never resent.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { perSecond } from '@tiered-limiter/core';
 * import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * const store = new RedisStore({ redis, prefix: 'api' });
 * const reply = await store.apply({ key: 'user:42', limits: [perSecond(10)], take: 1 });
 * // { ok: true, granted: 1, remaining: 9, … }
 */
export class RedisStore implements GlobalStore {
  readonly #redis: Redis | Cluster;
  readonly #client: ScriptedClient;
  readonly #prefix: string;
  readonly #cluster: boolean;
  readonly #coalescer: Coalescer<BucketOp, BucketReply>;

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('options', options, 'an object with a `redis` client');
    }
    const redis: unknown = options.redis;
    if (
      redis === null ||
      typeof redis !== 'object' ||
      typeof (redis as Partial<Redis>).defineCommand !== 'function'
    ) {
      throw new ConfigError('redis', redis, 'an ioredis Redis or Cluster client');
    }
    this.#prefix = assertPrefix(options.prefix ?? DEFAULT_PREFIX);
    this.#redis = redis as Redis | Cluster;
    this.#cluster = (redis as { isCluster?: boolean }).isCluster === true;
    this.#redis.defineCommand(APPLY, { lua: SCRIPTS.apply });
    this.#client = redis as unknown as ScriptedClient;
    this.#coalescer = coalescerFor(options.coalesce, (batches) => this.#send(batches));
  }

  /** The prefix of this store's keys. */
  get prefix(): string {
    return this.#prefix;
  }

  /** Round trips, ops and keys sent since the store was made. */
  stats(): CoalescerStats {
    return this.#coalescer.stats();
  }

  apply(op: BucketOp): Promise<BucketReply> {
    const keys = bucketKeys(this.#prefix, op.key, op.limits);
    const slot = this.#cluster ? calculateSlot(keys[0]!) : 0;
    return new Promise<BucketReply>((resolve, reject) => {
      this.#coalescer.submit(this.#destinationOf(slot), { op, keys, slot, resolve, reject });
    });
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#redis.del(...bucketKeys(this.#prefix, key, limits)).then(
      () => undefined,
      (error: unknown) => {
        throw failure('reset', error);
      },
    );
  }

  /** The Cluster master serving `slot` (ops to one master share a queue), or the one server. */
  #destinationOf(slot: number): string {
    if (!this.#cluster) return '';
    return (this.#redis as Cluster).slots[slot]?.[0] ?? `slot:${slot}`;
  }

  async #send(batches: readonly (readonly Op[])[]): Promise<void> {
    if (batches.length === 1) {
      const batch = batches[0]!;
      try {
        settle(batch, await this.#client[APPLY](...encodeOps(batch)));
      } catch (error) {
        for (const pending of batch) pending.reject(failure('apply', error));
      }
      return;
    }
    // Several slots of one Cluster master: one EVALSHA per slot, sent as one pipeline.
    const pipeline = this.#client.pipeline();
    for (const batch of batches) pipeline[APPLY](...encodeOps(batch));
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipeline.exec();
    } catch (error) {
      for (const batch of batches) for (const pending of batch) pending.reject(failure('apply', error));
      return;
    }
    batches.forEach((batch, i) => {
      const [error, reply] = results?.[i] ?? [new Error('no reply in the pipeline'), undefined];
      if (error) for (const pending of batch) pending.reject(failure('apply', error));
      else settle(batch, reply);
    });
  }
}

function coalescerFor(
  options: CoalesceOptions | false | undefined,
  send: (batches: readonly (readonly Op[])[]) => Promise<void>,
): Coalescer<BucketOp, BucketReply> {
  // Not coalescing is a coalescer that sends one op a call with no bound on calls in flight.
  if (options === false) return new Coalescer(send, 1, Number.MAX_SAFE_INTEGER);
  const o = options ?? {};
  if (o === null || typeof o !== 'object' || Array.isArray(o)) {
    throw new ConfigError('coalesce', options, 'an object or false');
  }
  return new Coalescer(
    send,
    assertInteger('coalesce.maxKeysPerCall', o.maxKeysPerCall ?? DEFAULT_MAX_KEYS_PER_CALL, 1, 10_000),
    assertInteger('coalesce.maxInFlight', o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, 1, 1024),
  );
}

function settle(batch: readonly Op[], reply: unknown): void {
  let replies: BucketReply[];
  try {
    replies = readReplies(reply, batch);
  } catch (error) {
    for (const pending of batch) pending.reject(error);
    return;
  }
  for (let i = 0; i < batch.length; i++) batch[i]!.resolve(replies[i]!);
}

function failure(command: string, error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreError(`redis ${command} failed: ${message}`, { cause: error });
}
