import { assertLimits, type Decision, type LimitSpec } from '@tiered-limiter/core';
import { DEFAULT_DEGRADED_HEADER } from './defaults.js';
import { wholeSeconds } from './seconds.js';

/** One limit as `RateLimit-Policy` announces it. */
export interface PolicyItem {
  /** The limit's name: the policy identifier in both fields. */
  readonly name: string;
  /** `q`: the quota, the limit's capacity (its burst). */
  readonly quota: number;
  /** `w`: seconds an empty bucket takes to fill again, rounded up, at least 1. */
  readonly windowSeconds: number;
}

/**
 * A limiter's limits as the IETF `RateLimit-Policy` field announces them, computed once per
 * limiter so that no request pays for it. Build it with `rateLimitPolicy`.
 */
export interface RateLimitPolicy {
  /** One item per limit, in the limiter's order. */
  readonly items: readonly PolicyItem[];
  /** The `RateLimit-Policy` field value, e.g. `"api";q=10;w=1` or `"burst";q=20;w=2, "hourly";q=1000;w=3600`. */
  readonly header: string;
}

/** Options of `rateLimitHeaders`. */
export interface RateLimitHeaderOptions {
  /**
   * Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds
   * from now, not an epoch time), for clients that predate the IETF fields.
   * @default false
   */
  legacyHeaders?: boolean;
  /**
   * The header that says a store failure made the decision, valued `policy=open`,
   * `policy=closed` or `policy=local`; `false` sends none.
   * @default 'RateLimit-Degraded'
   */
  degradedHeader?: string | false;
}

/** Response headers, by name, in the case the specifications write them. */
export type RateLimitHeaders = Record<string, string>;

/**
 * The `RateLimit-Policy` of a limiter's limits (draft-ietf-httpapi-ratelimit-headers-10):
 * one item per limit, named by the limit, with `q` its capacity and `w` the seconds an empty
 * bucket takes to fill. A token bucket of capacity `q` refilled over `w` seconds admits a
 * burst of `q`, then `q` per `w` seconds. Throws a `ConfigError` for a list that is not limits.
 *
 * @example
 * const policy = rateLimitPolicy([perSecond(10, { name: 'api' })]);
 * policy.header; // '"api";q=10;w=1'
 */
export function rateLimitPolicy(limits: LimitSpec | readonly LimitSpec[]): RateLimitPolicy {
  const items = assertLimits('limits', limits).map(
    (spec): PolicyItem =>
      Object.freeze({ name: spec.name, quota: spec.capacity, windowSeconds: wholeSeconds(spec.fillMs) }),
  );
  const header = items
    .map((item) => `${quote(item.name)};q=${item.quota};w=${item.windowSeconds}`)
    .join(', ');
  return Object.freeze({ items: Object.freeze(items), header });
}

/**
 * The response headers for `decision`:
 * - `RateLimit-Policy`, always;
 * - `RateLimit: "<limit>";r=<remaining>;t=<seconds>` for the tightest limit, when a bucket was
 *   read: `t` is the seconds until it is full when admitted, the `Retry-After` when denied.
 *   A decision of the `open` or `closed` failure policy read no bucket, so it carries none;
 * - `Retry-After`, on a denial: `retryAfterMs` in whole seconds, rounded up (at least 1);
 * - `X-RateLimit-Limit`, `-Remaining`, `-Reset` with `legacyHeaders` (the last two, as
 *   `RateLimit`, only when a bucket was read);
 * - the degraded header (`RateLimit-Degraded: policy=open`) when a store failure made the
 *   decision.
 *
 * A shadow-mode decision that would have denied is admitted: it gets no `Retry-After`.
 *
 * @example
 * const policy = rateLimitPolicy(limiter.limits);
 * const decision = limiter.tryConsume(ip) ?? (await limiter.consume(ip));
 * for (const [name, value] of Object.entries(rateLimitHeaders(decision, policy))) res.setHeader(name, value);
 */
export function rateLimitHeaders(
  decision: Decision,
  policy: RateLimitPolicy,
  options: RateLimitHeaderOptions = {},
): RateLimitHeaders {
  const headers: RateLimitHeaders = { 'RateLimit-Policy': policy.header };
  const readBucket = decision.tier !== 'fallback' || decision.policy === 'local';
  const retryAfter = decision.allowed ? 0 : wholeSeconds(decision.retryAfterMs);
  const reset = decision.allowed ? wholeSeconds(decision.resetMs, 0) : retryAfter;
  if (readBucket) {
    headers.RateLimit = `${quote(nameOf(decision.limit, policy))};r=${decision.remaining};t=${reset}`;
  }
  if (!decision.allowed) headers['Retry-After'] = String(retryAfter);
  if (options.legacyHeaders) {
    headers['X-RateLimit-Limit'] = String(decision.limit);
    if (readBucket) {
      headers['X-RateLimit-Remaining'] = String(decision.remaining);
      headers['X-RateLimit-Reset'] = String(reset);
    }
  }
  const degraded = options.degradedHeader ?? DEFAULT_DEGRADED_HEADER;
  if (decision.tier === 'fallback' && degraded !== false) {
    headers[degraded] = `policy=${decision.policy ?? 'open'}`;
  }
  return headers;
}

/**
 * The limit a decision speaks of: the first whose capacity is the decision's `limit`. A
 * decision names its tightest limit by capacity only; two limits of one limiter with the same
 * capacity are told apart by nothing, and the first is named.
 */
function nameOf(limit: number, policy: RateLimitPolicy): string {
  for (const item of policy.items) if (item.quota === limit) return item.name;
  return policy.items[0]!.name;
}

/** A structured-field String (RFC 8941 §3.3.3): quoted, with `\` and `"` escaped. */
function quote(name: string): string {
  return `"${name.replace(/[\\"]/g, '\\$&')}"`;
}
