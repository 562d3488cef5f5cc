import type { Clock, Decision, LimiterStats, LimitSpec, SyncLimiter } from '@tiered-limiter/core';
import {
  allowDecision,
  ClosedError,
  ConfigError,
  denyDecision,
  internal,
  shadowOf,
} from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';
import { assertBlockMs, BlockList } from './block-list.js';
import {
  addTokens,
  allFull,
  type Buckets,
  carryTable,
  consumeAll,
  dropFull,
  entryOf,
  fullBuckets,
  listOf,
  peekAll,
} from './local-buckets.js';
import { assertTokens } from './management.js';
import { lruTable, resolveMaxKeys } from './table.js';

const {
  assertBoolean,
  assertClock,
  assertCost,
  assertKey,
  assertKnownOptions,
  assertLimits,
  fullBucket,
  msUntilFull,
  msUntilTokens,
  smallestCapacity,
  tightestWhenFull,
  tryTake,
  wholeTokens,
} = internal;
type BucketState = internal.BucketState;

/** Options of `LocalLimiter`. */
export interface LocalLimiterOptions {
  /**
   * The limit, or several limits that a request must pass all at once (e.g. 10 per second
   * and 1000 per hour): a request takes its cost from every one of them or from none.
   * Required.
   */
  limits: LimitSpec | readonly LimitSpec[];
  /**
   * Keys tracked at most (and keys `block` remembers at most). Past it the least recently used
   * key is forgotten and comes back with full buckets: memory stays bounded, at the price of
   * leniency to a key so rarely seen that `maxKeys` others were seen since. The table grows with
   * use. At most 2^24 (`MAX_MAX_KEYS`).
   * @default 100_000 (`DEFAULT_MAX_KEYS`)
   */
  maxKeys?: number;
  /**
   * Where time comes from: any object with a monotonic `now()` in milliseconds. Tests pass
   * a fake clock and advance it by hand.
   * @default performance
   */
  clock?: Clock;
  /**
   * Decide but never enforce: every request is admitted, and one that would have been denied
   * is marked `shadowDenied`. Buckets are charged as if enforcing, so the decisions are the
   * ones enforcement would make.
   * @default false
   */
  shadow?: boolean;
}

/**
 * An in-process token-bucket limiter over many keys: synchronous, no I/O. Each key gets a bucket
 * per limit the first time it is seen; past `maxKeys` the least recently used key is forgotten
 * and comes back with full buckets.
 * Every decision has tier `local` and speaks of one limit, as every limiter's does
 * (`Decision.name`): a denial of the limit that keeps the request waiting longest, so its
 * `retryAfterMs` is the wait until every limit could admit it. It fulfils the `SyncLimiter` contract like the store-backed limiters (`consume` and
 * the management calls resolve at once, having done their work in process), so the HTTP
 * middleware and any code written against the contract take it too. Use it alone in a single
 * process, or as the fallback of a shared limit.
 */
export class LocalLimiter implements SyncLimiter {
  /** Whether the limiter runs in shadow mode (decides, never enforces). */
  readonly shadow: boolean;
  readonly #clock: Clock;
  #limits: readonly LimitSpec[];
  #maxCost: number;
  /** The one limit when there is exactly one: the hot path then skips every loop. */
  #single: LimitSpec | undefined;
  /** The tightest limit of a key with full buckets: smallest capacity, first on ties. */
  #tightestWhenFull: LimitSpec;
  // No per-entry ttl: a full bucket is dropped lazily (by `peek` and `size`); a ttl at "ms until
  // full" cost 178 against 113 ns a decision on a hot key (docs/DECISIONS.md).
  readonly #buckets: LRUCache<string, Buckets>;
  readonly #blocked: BlockList;
  #allowed = 0;
  #denied = 0;
  #closed = false;

  /**
   * Validates every option and throws a `ConfigError` naming the one refused.
   *
   * @example
   * import { perHour, perSecond, internal } from '@tiered-limiter/core';
   * import { LocalLimiter } from '@tiered-limiter/local';
   *
   * const limiter = new LocalLimiter({ limits: [perSecond(10), perHour(1000)] });
   * const decision = limiter.tryConsume('user:42');
   * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
   */
  constructor(options: LocalLimiterOptions) {
    if (options === null || typeof options !== 'object')
      throw new ConfigError('options', options, 'an object');
    assertKnownOptions('', options, ['limits', 'maxKeys', 'clock', 'shadow']);
    this.#limits = assertLimits('limits', options.limits);
    const maxKeys = resolveMaxKeys(options.maxKeys);
    this.#clock = options.clock === undefined ? performance : assertClock('clock', options.clock);
    this.shadow = options.shadow === undefined ? false : assertBoolean('shadow', options.shadow);
    this.#maxCost = smallestCapacity(this.#limits);
    this.#single = this.#limits.length === 1 ? this.#limits[0] : undefined;
    this.#tightestWhenFull = tightestWhenFull(this.#limits);
    this.#buckets = lruTable<string, Buckets>(maxKeys);
    this.#blocked = new BlockList(maxKeys, this.#clock);
  }

  /** The limits every request must pass, frozen, in the order given. */
  get limits(): readonly LimitSpec[] {
    return this.#limits;
  }

  /**
   * Takes `cost` tokens for `key` from every limit if all of them have that many, else from
   * none. Throws `ArgumentError` for a key that is not a string or a cost that is not a
   * whole number from 1 up, `CostExceedsCapacityError` for a cost no bucket could ever
   * hold, and `ClosedError` after `close()`; every other outcome is a `Decision`.
   */
  tryConsume(key: string, cost = 1): Decision {
    if (this.#closed) throw new ClosedError('LocalLimiter');
    assertKey(key);
    assertCost(cost, this.#maxCost);
    const now = this.#clock.now();
    const blockedMs = this.#blocked.blockedFor(key);
    if (blockedMs > 0) return this.#count(this.#blockedFor(blockedMs));
    const spec = this.#single;
    if (spec === undefined) {
      let stored = this.#buckets.get(key) as BucketState[] | undefined;
      if (stored === undefined) {
        stored = fullBuckets(this.#limits, now);
        this.#buckets.set(key, stored);
      }
      return this.#count(consumeAll(stored, this.#limits, cost, now));
    }
    let bucket = this.#buckets.get(key) as BucketState | undefined;
    if (bucket === undefined) {
      bucket = fullBucket(spec, now);
      this.#buckets.set(key, bucket);
    }
    if (tryTake(bucket, spec, cost, now)) {
      this.#allowed++;
      const left = bucket.tokens;
      return allowDecision(wholeTokens(left), msUntilFull(left, spec), spec, 'local');
    }
    const have = bucket.tokens;
    const wait = msUntilTokens(have, cost, spec);
    return this.#count(denyDecision(wait, wholeTokens(have), msUntilFull(have, spec), spec, 'local'));
  }

  /** `tryConsume` as a resolved promise, for code written against the `Limiter` contract. */
  consume(key: string, cost = 1): Promise<Decision> {
    return Promise.resolve(this.tryConsume(key, cost));
  }

  /**
   * What a request of cost 1 would get now, without taking anything or refreshing the key's
   * place in the LRU order (a blocked key is denied). A key whose buckets have all refilled is
   * forgotten on the way.
   */
  peek(key: string): Promise<Decision> {
    this.#check(key);
    const blockedMs = this.#blocked.blockedFor(key);
    if (blockedMs > 0) return Promise.resolve(this.#shadowed(this.#blockedFor(blockedMs)));
    const stored = this.#buckets.peek(key);
    const decision = stored && peekAll(listOf(stored), this.#limits, this.#clock.now());
    if (decision !== undefined) return Promise.resolve(this.#shadowed(decision));
    if (stored !== undefined) this.#buckets.delete(key);
    const spec = this.#tightestWhenFull;
    return Promise.resolve(allowDecision(spec.capacity, 0, spec, 'local'));
  }

  /** Forgets `key` (and lifts its block): its next request finds full buckets. Resolves `true`. */
  reset(key: string): Promise<boolean> {
    this.#check(key);
    this.#buckets.delete(key);
    this.#blocked.unblock(key);
    return Promise.resolve(true);
  }

  /** Gives `tokens` back to `key`, never past its capacity. Resolves `true`. */
  reward(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    assertTokens(tokens);
    const stored = this.#buckets.get(key);
    // No entry is full buckets: nothing to give back to.
    if (stored !== undefined) {
      const now = this.#clock.now();
      addTokens(listOf(stored), this.#limits, tokens, now);
      if (allFull(stored, this.#limits, now)) this.#buckets.delete(key);
    }
    return Promise.resolve(true);
  }

  /** Takes `tokens` from `key` regardless; a bucket goes at most its capacity into debt. Resolves `true`. */
  penalty(key: string, tokens: number): Promise<boolean> {
    this.#check(key);
    assertTokens(tokens);
    const now = this.#clock.now();
    let stored = this.#buckets.get(key);
    if (stored === undefined) {
      stored = entryOf(fullBuckets(this.#limits, now));
      this.#buckets.set(key, stored);
    }
    addTokens(listOf(stored), this.#limits, -tokens, now);
    return Promise.resolve(true);
  }

  /** Denies `key` for `ms` (a later end replaces an earlier one, never the reverse). */
  block(key: string, ms: number): void {
    this.#check(key);
    this.#blocked.block(key, assertBlockMs(ms));
  }

  /**
   * Replaces the limits. Every key keeps its state: a limit of the same name keeps its tokens
   * (cut to a lower capacity; a bucket already full is full to a raised one), a new name starts
   * full, as the shared stores do.
   */
  setLimits(limits: LimitSpec | readonly LimitSpec[]): void {
    if (this.#closed) throw new ClosedError('LocalLimiter');
    const next = assertLimits('limits', limits);
    carryTable(this.#buckets, this.#limits, next, this.#clock.now());
    this.#limits = next;
    this.#maxCost = smallestCapacity(next);
    this.#single = next.length === 1 ? next[0] : undefined;
    this.#tightestWhenFull = tightestWhenFull(next);
  }

  /** Decisions since the limiter was made (shadow-mode denials count as denied). */
  stats(): LimiterStats {
    return { allowed: this.#allowed, denied: this.#denied };
  }

  /** Forgets every key and makes later calls throw `ClosedError`. Resolves at once. */
  close(): Promise<void> {
    this.#closed = true;
    this.clear();
    return Promise.resolve();
  }

  /** Forgets every key and lifts every block, as `reset` does for one key. */
  clear(): void {
    this.#buckets.clear();
    this.#blocked.clear();
  }

  /**
   * Keys whose buckets are not yet full. Counting first forgets every key whose buckets have
   * refilled completely, so it walks all keys held: meant for metrics and tests, not for the
   * request path.
   */
  get size(): number {
    return dropFull(this.#buckets, this.#limits, this.#clock.now());
  }

  #check(key: string): void {
    if (this.#closed) throw new ClosedError('LocalLimiter');
    assertKey(key);
  }

  /** Counts a decision of the slow paths and applies shadow mode. */
  #count(decision: Decision): Decision {
    if (decision.allowed) this.#allowed++;
    else this.#denied++;
    return this.#shadowed(decision);
  }

  /** A blocked key's denial: nothing left until the block ends. */
  #blockedFor(ms: number): Decision {
    // resetMs is whole ms, rounded up, as every decision's (retryAfterMs is rounded by denyDecision).
    return denyDecision(ms, 0, Math.ceil(ms), this.#tightestWhenFull, 'local');
  }

  #shadowed(decision: Decision): Decision {
    return this.shadow ? shadowOf(decision) : decision;
  }
}
