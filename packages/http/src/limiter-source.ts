import { ConfigError, internal, type LimitSpec } from '@tiered-limiter/core';
import { DEFAULT_MAX_LIMITERS } from './defaults.js';
import { type RateLimitPolicy, rateLimitPolicy } from './headers.js';
import { type HttpLimiter, isLimiter } from './limiter.js';
import type { LimitOption } from './options.js';
import { warnOnce } from './warn.js';

const { assertInteger, assertLimits } = internal;

/** A limiter with the `RateLimit-Policy` of its limits as in force now. */
export interface LimiterEntry {
  readonly limiter: HttpLimiter;
  readonly policy: RateLimitPolicy;
}

/**
 * A limiter's entry whose policy follows `setLimits`: a limiter replaces its `limits` (and its
 * `fallbackLimits`) with new objects when its limits change, so two reference comparisons a
 * request tell whether the policy computed last still holds.
 */
class FollowingEntry implements LimiterEntry {
  readonly limiter: HttpLimiter;
  #limits: HttpLimiter['limits'];
  #fallback: HttpLimiter['fallbackLimits'];
  #policy: RateLimitPolicy;

  constructor(limiter: HttpLimiter) {
    this.limiter = limiter;
    this.#limits = limiter.limits;
    this.#fallback = limiter.fallbackLimits;
    this.#policy = rateLimitPolicy(this.#limits, this.#fallback);
  }

  get policy(): RateLimitPolicy {
    const { limits, fallbackLimits } = this.limiter;
    if (limits !== this.#limits || fallbackLimits !== this.#fallback) {
      this.#limits = limits;
      this.#fallback = fallbackLimits;
      this.#policy = rateLimitPolicy(limits, fallbackLimits);
    }
    return this.#policy;
  }
}

/** Where a request's limiter comes from: one fixed limiter, or one per distinct set of limits. */
export type LimiterSource<Req> = (req: Req) => LimiterEntry;

/** What the middleware needs of every limiter it uses, by its options. */
export interface LimiterNeeds {
  /** `skipFailedRequests` or `skipSuccessfulRequests` is on: `reward` is called. */
  readonly reward: boolean;
}

/** Checks a limiter against what the options need, naming `option` when it falls short. */
export function entryOf(option: string, limiter: unknown, needs: LimiterNeeds): LimiterEntry {
  if (!isLimiter(limiter)) {
    throw new ConfigError(option, limiter, 'a limiter (an object with limits and consume)');
  }
  if (needs.reward && typeof limiter.reward !== 'function') {
    throw new ConfigError(
      option,
      limiter,
      'a limiter with reward(key, tokens), which skipFailedRequests and skipSuccessfulRequests call',
    );
  }
  return new FollowingEntry(limiter);
}

/**
 * The limiters built for `limit`: one per distinct set of limits (same names, capacities and
 * rates), made by the user's `createLimiter`, kept up to `maxLimiters`, the least recently used
 * closed past it. A `limit` function that returns the same objects each time (a table of plans)
 * is answered by identity, without comparing limits.
 */
export class LimiterCache {
  readonly #create: (limits: readonly LimitSpec[]) => HttpLimiter;
  readonly #max: number;
  readonly #needs: LimiterNeeds;
  readonly #byValue = new Map<string, LimiterEntry>();
  /** The value key of limits already seen, by the object the `limit` function returned. */
  readonly #byIdentity = new WeakMap<object, string>();

  constructor(create: unknown, maxLimiters: unknown, needs: LimiterNeeds) {
    if (typeof create !== 'function') {
      throw new ConfigError(
        'createLimiter',
        create,
        "a function building a limiter for some limits ((limits) => new TieredLimiter({ store, limits, failurePolicy: 'open' }))",
      );
    }
    this.#create = create as (limits: readonly LimitSpec[]) => HttpLimiter;
    this.#max = assertInteger('maxLimiters', maxLimiters ?? DEFAULT_MAX_LIMITERS, 1, 1_000_000);
    this.#needs = needs;
  }

  /** The limiter of `limits`, built on first use. Throws a `ConfigError` for what is not limits. */
  get(option: string, limits: unknown): LimiterEntry {
    const seen = limits !== null && typeof limits === 'object' ? this.#byIdentity.get(limits) : undefined;
    const key = seen ?? valueKey(assertLimits(option, limits));
    let entry = this.#byValue.get(key);
    if (entry === undefined) {
      entry = entryOf('createLimiter', this.#create(assertLimits(option, limits)), this.#needs);
      this.#byValue.set(key, entry);
      if (this.#byValue.size > this.#max) this.#evictOldest();
    } else {
      // Most recently used last: a Map keeps insertion order.
      this.#byValue.delete(key);
      this.#byValue.set(key, entry);
    }
    if (seen === undefined) this.#byIdentity.set(limits as object, key);
    return entry;
  }

  #evictOldest(): void {
    const [oldestKey, oldest] = this.#byValue.entries().next().value as [string, LimiterEntry];
    this.#byValue.delete(oldestKey);
    const close = (oldest.limiter as { close?: () => Promise<void> }).close;
    if (typeof close !== 'function') return;
    warnOnce(
      this,
      'TL_HTTP_MAX_LIMITERS',
      `more than maxLimiters (${this.#max}) distinct limits were asked for; the least recently used limiter is closed. ` +
        'Return limits from a small table (plans), or raise maxLimiters.',
    );
    const failed = (error: unknown) =>
      process.emitWarning(`closing an evicted limiter failed: ${String(error)}`, {
        type: 'TieredLimiterWarning',
        code: 'TL_HTTP_CLOSE_FAILED',
      });
    // A `createLimiter` limiter whose close throws, or returns no promise, failed the request that
    // evicted it: the eviction is not that request's business.
    try {
      const closing: unknown = close.call(oldest.limiter);
      if (closing instanceof Promise) closing.catch(failed);
    } catch (error) {
      failed(error);
    }
  }
}

/** The same for two lists with the same names, capacities and rates. */
function valueKey(limits: readonly LimitSpec[]): string {
  let key = '';
  for (const spec of limits) key += `${spec.name}\u0000${spec.capacity}\u0000${spec.refillPerSecond}\u0001`;
  return key;
}

/**
 * The source of a request's limiter from `limiter` or `limit` (one of them, or neither):
 * `undefined` when neither is given.
 */
export function limiterSource<Req>(
  option: string,
  limiter: unknown,
  limit: LimitOption<Req> | undefined,
  cache: () => LimiterCache,
  needs: LimiterNeeds,
): LimiterSource<Req> | undefined {
  if (limiter !== undefined && limit !== undefined) {
    throw new ConfigError(
      `${option}limit`,
      limit,
      `not set together with \`${option}limiter\` (one or the other)`,
    );
  }
  if (limiter !== undefined) {
    const entry = entryOf(`${option}limiter`, limiter, needs);
    return () => entry;
  }
  if (limit === undefined) return undefined;
  if (typeof limit === 'function') {
    const pick = limit;
    const limiters = cache();
    return (req) => limiters.get(`${option}limit`, pick(req));
  }
  const limitName = `${option}limit`;
  if (limit === null || typeof limit !== 'object') {
    throw new ConfigError(
      limitName,
      limit,
      'limits (perMinute(100), or an array of them) or a function of the request returning them',
    );
  }
  const entry = cache().get(limitName, limit);
  return () => entry;
}
