import {
  advance,
  type BucketReply,
  type BucketState,
  type Clock,
  covers,
  type GlobalStore,
  type LimitSpec,
  msUntilFull,
  msUntilTokens,
  type ReserveReply,
  type TakeReply,
  wholeTokens,
} from '@tiered-limiter/core';

/** Options of `MemoryStore`. */
export interface MemoryStoreOptions {
  /**
   * The store's own clock, in ms. It plays the part of Redis's `TIME`: every instance that
   * shares this store shares this clock.
   * @default performance
   */
  clock?: Clock;
}

/**
 * A `GlobalStore` held in this process's memory: the same buckets and replies as
 * `RedisStore`, for tests, for single-process services, and for trying the two-tier limiter
 * without Redis. A bucket that has refilled completely is deleted, as a Redis key expires.
 *
 * @example
 * const store = new MemoryStore();
 * const reply = await store.take('user:42', [perSecond(10)], 1); // { allowed: true, remaining: 9, ... }
 */
export class MemoryStore implements GlobalStore {
  readonly #clock: Clock;
  readonly #buckets = new Map<string, BucketState>();

  constructor(options: MemoryStoreOptions = {}) {
    this.#clock = options.clock ?? performance;
  }

  /** Buckets currently held (full ones are not). */
  get size(): number {
    return this.#buckets.size;
  }

  take(key: string, limits: readonly LimitSpec[], cost: number): Promise<TakeReply> {
    const states = this.#load(key, limits);
    const allowed = states.every((state) => covers(state.tokens, cost));
    if (allowed) for (const state of states) state.tokens = Math.max(0, state.tokens - cost);
    const view = this.#view(key, limits, states, allowed ? 0 : cost);
    return Promise.resolve({ allowed, ...view });
  }

  reserve(key: string, limits: readonly LimitSpec[], want: number, min: number): Promise<ReserveReply> {
    const states = this.#load(key, limits);
    let available = want;
    for (const state of states) available = Math.min(available, wholeTokens(state.tokens));
    const granted = available >= min ? available : 0;
    if (granted > 0) for (const state of states) state.tokens = Math.max(0, state.tokens - granted);
    const view = this.#view(key, limits, states, granted > 0 ? 0 : min);
    return Promise.resolve({ granted, ...view });
  }

  refund(key: string, limits: readonly LimitSpec[], tokens: number): Promise<BucketReply> {
    const states = this.#load(key, limits);
    limits.forEach((spec, i) => {
      const state = states[i]!;
      state.tokens = Math.min(spec.capacity, state.tokens + tokens);
    });
    const { retryAfterMs: _, ...view } = this.#view(key, limits, states, 0);
    return Promise.resolve(view);
  }

  peek(key: string, limits: readonly LimitSpec[]): Promise<BucketReply> {
    const states = this.#load(key, limits);
    const { retryAfterMs: _, ...view } = this.#view(key, limits, states, 0, false);
    return Promise.resolve(view);
  }

  /** Forgets every bucket. */
  clear(): void {
    this.#buckets.clear();
  }

  #load(key: string, limits: readonly LimitSpec[]): BucketState[] {
    const now = this.#clock.now();
    return limits.map((spec) => {
      const state = this.#buckets.get(entryKey(key, spec)) ?? { tokens: spec.capacity, updatedAtMs: now };
      advance(state, spec, now);
      return state;
    });
  }

  /** Replies for the tightest limit, stores what is not full, and forgets what is. */
  #view(key: string, limits: readonly LimitSpec[], states: BucketState[], need: number, write = true) {
    let remaining = Number.POSITIVE_INFINITY;
    let limit = 0;
    let retryAfterMs = 0;
    let resetMs = 0;
    limits.forEach((spec, i) => {
      const state = states[i]!;
      const whole = wholeTokens(state.tokens);
      if (whole < remaining) {
        remaining = whole;
        limit = spec.capacity;
      }
      if (need > 0) retryAfterMs = Math.max(retryAfterMs, msUntilTokens(state.tokens, need, spec));
      const untilFull = msUntilFull(state.tokens, spec);
      resetMs = Math.max(resetMs, untilFull);
      if (!write) return;
      const id = entryKey(key, spec);
      if (untilFull === 0) this.#buckets.delete(id);
      else this.#buckets.set(id, state);
    });
    return { remaining, retryAfterMs, resetMs, limit };
  }
}

function entryKey(key: string, spec: LimitSpec): string {
  // NUL cannot appear in a limit name, so no user key can reach another limit's entry.
  return `${spec.name}\u0000${key}`;
}
