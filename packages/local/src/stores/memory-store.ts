import {
  applyBucketOp,
  type BucketOp,
  type BucketReply,
  type Clock,
  ConfigError,
  freshSharedBucket,
  type GlobalStore,
  internal,
  isSharedBucketFull,
  type LimitSpec,
  type SharedBucketState,
} from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import { DEFAULT_MEMORY_STORE_MAX_KEYS, MAX_MAX_KEYS } from '../defaults.js';
import { lruTable } from '../table.js';

const {
  assertClock,
  assertInteger,
  assertKnownOptions,
  bucketOpWrites,
  copySharedBucket,
  refusedKeyLimits,
  refusedOp,
  resetSharedBucket,
  settleSharedBucket,
} = internal;

/** Options of `MemoryStore`. */
export interface MemoryStoreOptions {
  /**
   * The store's own clock, in ms. It plays the part of Redis's `TIME`: every instance that
   * shares this store shares this clock.
   * @default performance
   */
  clock?: Clock;
  /**
   * Buckets held at most; past it the least recently used is forgotten, which makes it full
   * again (as an evicted Redis key would). Buckets that have refilled are dropped as well.
   * @default 1_000_000
   */
  maxKeys?: number;
}

interface Entry {
  readonly state: SharedBucketState;
  spec: LimitSpec;
}

/** Buckets checked for a full refill, from the least recently used end, per op. */
const SWEEP_PER_OP = 2;

/**
 * A `GlobalStore` held in this process's memory: the same buckets and replies as `RedisStore`
 * (core's `applyBucketOp`, which `apply.lua` mirrors), for tests, single-process services, and
 * trying the two-tier limiter without Redis. Memory stays bounded: a bucket that is full with
 * nothing on lease is dropped, each op checks the least recently used buckets for that, and at
 * most `maxKeys` are held.
 *
 * @example
 * const store = new MemoryStore();
 * const reply = await store.apply({ key: 'user:42', limits: [perSecond(10)], take: 1 });
 * // { ok: true, granted: 1, remaining: 9, … }
 */
export class MemoryStore implements GlobalStore {
  readonly #clock: Clock;
  readonly #buckets: LRUCache<string, Entry>;
  /** Live instances of the fleets using this store, and when each stops counting. */
  readonly #instances = new Map<string, number>();

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object' || Array.isArray(options))
      throw new ConfigError('options', options, 'an object');
    assertKnownOptions('', options, ['clock', 'maxKeys']);
    this.#clock = options.clock === undefined ? performance : assertClock('clock', options.clock);
    const maxKeys = assertInteger(
      'maxKeys',
      options.maxKeys ?? DEFAULT_MEMORY_STORE_MAX_KEYS,
      1,
      MAX_MAX_KEYS,
    );
    this.#buckets = lruTable<string, Entry>(maxKeys);
  }

  /** Buckets held now (full ones with nothing on lease are dropped as they are found). */
  get size(): number {
    return this.#buckets.size;
  }

  /**
   * Applies one op to its buckets at once, on this store's clock, as `apply.lua` does. Rejects with
   * an `ArgumentError` for an op on no limit or a key that is not a string.
   */
  apply(op: BucketOp): Promise<BucketReply> {
    const refused = refusedOp(op);
    if (refused !== undefined) return Promise.reject(refused);
    // Shared buckets count whole µs (see SharedBucketState), as Redis's TIME does.
    const now = Math.round(this.#clock.now() * 1000);
    const limits = op.limits;
    const states: SharedBucketState[] = [];
    for (const spec of limits) {
      const entry = this.#buckets.get(entryKey(op.key, spec));
      // A bucket full by the limits that made it is one the sweep would have dropped: read as gone
      // whether the sweep has reached it or not, so that an answer never hangs on how many ops came
      // between (after a raised capacity, one found 0 tokens where the sweep's store found 1).
      const gone = entry === undefined || refilledBy(entry.state, entry.spec, now);
      states.push(gone ? freshSharedBucket(spec, now) : copySharedBucket(entry.state));
    }
    const reply = applyBucketOp(states, limits, op, now);
    // Kept only when the op changed the buckets, as `apply.lua` writes only those. A peek or a
    // refusal kept here settled the bucket by its limits: after a peek at 1,000/s and a change to
    // 0.001/s, 30 ms on, a take found the 30 tokens the old rate gave, where Redis refills the whole
    // gap at the new rate and has 0.00003.
    if (bucketOpWrites(op, reply)) {
      limits.forEach((spec, i) => {
        const id = entryKey(op.key, spec);
        const state = states[i]!;
        if (isSharedBucketFull(state, spec)) this.#buckets.delete(id);
        else this.#buckets.set(id, { state, spec });
      });
    }
    this.#sweep(now);
    return Promise.resolve(reply);
  }

  /** Marks `instance` alive for `ttlMs` and resolves how many instances are alive now. */
  heartbeat(instance: string, ttlMs: number): Promise<number> {
    const now = this.#clock.now();
    this.#instances.set(instance, now + ttlMs);
    for (const [id, until] of this.#instances) if (until <= now) this.#instances.delete(id);
    return Promise.resolve(this.#instances.size);
  }

  /** Forgets `instance` in the fleet's registry. */
  leave(instance: string): Promise<void> {
    this.#instances.delete(instance);
    return Promise.resolve();
  }

  /** Makes `key`'s buckets full, forgetting what is on lease (fenced: `resetSharedBucket`). */
  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    const refused = refusedKeyLimits(key, limits);
    if (refused !== undefined) return Promise.reject(refused);
    const now = Math.round(this.#clock.now() * 1000);
    for (const spec of limits) {
      const id = entryKey(key, spec);
      const entry = this.#buckets.get(id);
      if (entry === undefined) continue;
      resetSharedBucket(entry.state, spec, now);
      // The sweep judges an entry by its spec: the reset's limits made this bucket, so they judge it.
      entry.spec = spec;
      if (isSharedBucketFull(entry.state, spec)) this.#buckets.delete(id);
    }
    return Promise.resolve();
  }

  /** Forgets every bucket. */
  clear(): void {
    this.#buckets.clear();
  }

  /** Drops the least recently used buckets that have refilled completely since they were touched. */
  #sweep(now: number): void {
    let checked = 0;
    const full: string[] = [];
    for (const id of this.#buckets.rkeys()) {
      if (checked++ === SWEEP_PER_OP) break;
      const entry = this.#buckets.peek(id)!;
      if (refilledBy(entry.state, entry.spec, now)) full.push(id);
    }
    // Deleting while lru-cache iterates would unlink the entry the iterator stands on.
    for (const id of full) this.#buckets.delete(id);
  }
}

/**
 * Whether `state` would be full with nothing on lease at `nowUs` under `spec`, the spec of the
 * last op that changed it, read on a copy: the sweep must not settle the bucket itself. Settled
 * here, a bucket refilled by that op's rate between ops, where Redis refills the whole gap at the
 * next op's (a rate lowered from 6/s to 5/s gave 2 tokens where Redis has 1.81). Dropping it when
 * full by the old spec is what Redis's TTL, set by the op that last wrote the key, does too.
 */
function refilledBy(state: SharedBucketState, spec: LimitSpec, nowUs: number): boolean {
  const last = state.held.at(-1);
  if (last !== undefined && last.releaseUs > nowUs) return false;
  // Settling only drops released generations from the list; it never writes one.
  const copy: SharedBucketState = {
    tokens: state.tokens,
    updatedAtUs: state.updatedAtUs,
    held: [...state.held],
  };
  settleSharedBucket(copy, spec, nowUs);
  return isSharedBucketFull(copy, spec);
}

function entryKey(key: string, spec: LimitSpec): string {
  // NUL cannot appear in a limit name, so no user key can reach another limit's entry.
  return `${spec.name}\u0000${key}`;
}
