import { ArgumentError, type Decision, internal, type LimitSpec } from '@tiered-limiter/core';
import { DEFAULT_DEGRADED_HEADER } from './defaults.js';
import { wholeSeconds } from './seconds.js';

const { assertLimits } = internal;

/** An HTTP field name (RFC 9110 token). */
const FIELD_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/** The options of `rateLimitHeaders`. */
const HEADER_OPTION_NAMES: readonly string[] = ['standardHeaders', 'legacyHeaders', 'degradedHeader'];

/** No options: the defaults, checked once. */
const NO_OPTIONS: RateLimitHeaderOptions = Object.freeze({});

/** Options objects already checked: a caller (the middleware) passes the same one per request. */
const checkedOptions = new WeakSet<object>([NO_OPTIONS]);

/** One limit as `RateLimit-Policy` announces it. */
export interface PolicyItem {
  /** The limit's name: the policy identifier in both fields. */
  readonly name: string;
  /** `q`: the quota, the limit's capacity (its burst). */
  readonly quota: number;
  /** `w`: seconds an empty bucket takes to fill again, rounded up, at least 1. */
  readonly windowSeconds: number;
  /** The limit itself. */
  readonly limit: LimitSpec;
}

/**
 * A limiter's limits as the IETF `RateLimit-Policy` field announces them, computed once per
 * limiter (and again after its `setLimits`) so that no request pays for it. Build it with
 * `rateLimitPolicy`.
 */
export interface RateLimitPolicy {
  /** One item per limit, in the limiter's order. */
  readonly items: readonly PolicyItem[];
  /** The `RateLimit-Policy` field value, e.g. `"api";q=10;w=1` or `"burst";q=20;w=2, "hourly";q=1000;w=3600`. */
  readonly header: string;
  /**
   * The policy of the in-process bucket the `local` failure policy decides by, when the limiter
   * has one: a decision of that policy is announced by it, not by the limits it stands in for.
   */
  readonly fallback?: RateLimitPolicy | undefined;
}

/**
 * Which fields of draft-ietf-httpapi-ratelimit-headers are sent: `'draft-11'` and `'draft-10'`
 * (the two revisions define the same `RateLimit-Policy` and `RateLimit` syntax, and for a token
 * bucket the same `t`), or `false` for none.
 */
export type StandardHeaders = 'draft-10' | 'draft-11' | false;

/** Options of `rateLimitHeaders`. */
export interface RateLimitHeaderOptions {
  /**
   * Send `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers), or not.
   * `Retry-After` is sent on every denial either way.
   * @default 'draft-11'
   */
  standardHeaders?: StandardHeaders;
  /**
   * Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds
   * from now until the limit is full, on a denial too; not an epoch time), for clients that
   * predate the IETF fields.
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
 * The `RateLimit-Policy` of a limiter's limits (draft-ietf-httpapi-ratelimit-headers-10 and -11):
 * one item per limit, named by the limit, with `q` its capacity and `w` the seconds an empty
 * bucket takes to fill. A token bucket of capacity `q` refilled over `w` seconds admits a
 * burst of `q`, then `q` per `w` seconds. `fallbackLimits` are the limits of the `local` failure
 * policy's in-process bucket (the limiter's `fallbackLimits`), which announce its decisions.
 * Throws a `ConfigError` for a list that is not limits.
 *
 * @example
 * const policy = rateLimitPolicy([perSecond(10, { name: 'api' })]);
 * policy.header; // '"api";q=10;w=1'
 * rateLimitPolicy(limiter.limits, limiter.fallbackLimits); // a limiter of failurePolicy 'local'
 */
export function rateLimitPolicy(
  limits: LimitSpec | readonly LimitSpec[],
  fallbackLimits?: LimitSpec | readonly LimitSpec[],
): RateLimitPolicy {
  const policy = policyOf('limits', limits);
  if (fallbackLimits === undefined) return policy;
  return Object.freeze({ ...policy, fallback: policyOf('fallbackLimits', fallbackLimits) });
}

function policyOf(option: string, limits: LimitSpec | readonly LimitSpec[]): RateLimitPolicy {
  const items = assertLimits(option, limits).map(
    (spec): PolicyItem =>
      Object.freeze({
        name: spec.name,
        quota: spec.capacity,
        windowSeconds: wholeSeconds(spec.fillMs),
        limit: spec,
      }),
  );
  const header = items
    .map((item) => `${quote(item.name)};q=${item.quota};w=${item.windowSeconds}`)
    .join(', ');
  return Object.freeze({ items: Object.freeze(items), header });
}

/**
 * The response headers for `decision`:
 * - `RateLimit-Policy`, always (unless `standardHeaders: false`);
 * - `RateLimit: "<limit>";r=<remaining>;t=<seconds>`, one item, for the limit the decision
 *   names (`decision.name`: the one that denied, else the tightest), when a bucket was read and
 *   `policy` has that limit (a decision made under limits replaced since gets none).
 *   `r` is its whole tokens left; `t` the seconds until its next token, which is what both
 *   revisions define for a token bucket (-10: "until additional quota is made available"; -11:
 *   "within which the client can use no more than the available quota"). A denial of cost 1
 *   waits exactly for that token, so its `t` equals `Retry-After`, however long (a blocked key's
 *   too, when `cost` is given as 1); a heavier request waits longer and its `Retry-After` is later
 *   than `t`, as the draft allows. A full bucket has no next token and no `t`;
 * - `Retry-After` on a denial, in whole seconds rounded up;
 * - the legacy `X-RateLimit-*` fields and the degraded header, as `options` say.
 *
 * A decision of the `open` or `closed` failure policy read no bucket, so it has no `RateLimit`
 * (nor legacy remaining and reset). One of the `local` policy read its in-process bucket: with
 * `policy.fallback`, both fields speak of that bucket. A shadow-mode denial is admitted and gets
 * no `Retry-After`. `cost`, the request's cost when known (the middleware passes it), lets a denial
 * of cost 1 say its wait as `t` exactly; without it, only a wait of at most one token's time is.
 *
 * @example
 * const policy = rateLimitPolicy(limiter.limits, limiter.fallbackLimits);
 * const decision = limiter.tryConsume(ip) ?? (await limiter.consume(ip));
 * for (const [name, value] of Object.entries(rateLimitHeaders(decision, policy))) res.setHeader(name, value);
 */
export function rateLimitHeaders(
  decision: Decision,
  policy: RateLimitPolicy,
  options: RateLimitHeaderOptions = NO_OPTIONS,
  cost?: number,
): RateLimitHeaders {
  if (!checkedOptions.has(options)) checkHeaderOptions(options);
  const headers: RateLimitHeaders = {};
  const standard = options.standardHeaders !== false;
  const local = decision.tier === 'fallback' && decision.policy === 'local';
  // The fallback bucket is smaller and slower than the limits it stands in for: announced by
  // those, its denial's t and q would not match its Retry-After and r.
  const announced = (local ? policy.fallback : undefined) ?? policy;
  if (standard) headers['RateLimit-Policy'] = announced.header;
  const readBucket = decision.tier !== 'fallback' || local;
  const retryAfter = decision.allowed ? 0 : wholeSeconds(decision.retryAfterMs);
  const item = standard && readBucket ? itemOf(decision, announced) : undefined;
  if (item !== undefined) {
    const t = nextTokenSeconds(decision, item.limit, cost);
    headers.RateLimit = `${quote(item.name)};r=${decision.remaining}${t === undefined ? '' : `;t=${t}`}`;
  }
  if (!decision.allowed) headers['Retry-After'] = String(retryAfter);
  if (options.legacyHeaders) {
    headers['X-RateLimit-Limit'] = String(decision.limit);
    if (readBucket) {
      headers['X-RateLimit-Remaining'] = String(decision.remaining);
      // Until full, denial or not, as express-rate-limit's reset is the window's end either way:
      // the wait for the next request is Retry-After's to say.
      headers['X-RateLimit-Reset'] = String(wholeSeconds(decision.resetMs, 0));
    }
  }
  const degraded = options.degradedHeader ?? DEFAULT_DEGRADED_HEADER;
  if (decision.tier === 'fallback' && degraded !== false) {
    headers[degraded] = `policy=${decision.policy ?? 'open'}`;
  }
  return headers;
}

/**
 * Seconds until the limit's next whole token, rounded up; `undefined` when it is full. The
 * decision gives the limit's whole tokens and its time until full (`resetMs`, whole ms rounded
 * up): the tokens missing are `resetMs × rate`, and the next token comes when the fraction of
 * one that is missing has refilled (a whole token's time when none is). The ms of rounding in
 * `resetMs` is allowed for, and the result is kept within one token's time and `resetMs`.
 */
function nextTokenSeconds(decision: Decision, spec: LimitSpec, cost: number | undefined): number | undefined {
  const perTokenMs = 1 / spec.refillPerMs;
  const retryAfterMs = decision.retryAfterMs;
  // A denial of cost 1 waits for exactly the next token (a blocked key's: the block's end); with
  // the cost unknown, a wait of at most one token's time with no whole token left does too. Then
  // `t` is its Retry-After, to the ms.
  if (
    !decision.allowed &&
    retryAfterMs > 0 &&
    (cost === 1 || (decision.remaining === 0 && retryAfterMs <= perTokenMs + 1))
  ) {
    return wholeSeconds(retryAfterMs);
  }
  const resetMs = decision.resetMs;
  if (!(resetMs > 0)) return undefined;
  const missing = resetMs * spec.refillPerMs;
  const slack = spec.refillPerMs + 1e-9;
  let nextMs = resetMs - (Math.ceil(missing - slack) - 1) * perTokenMs;
  if (nextMs > perTokenMs) nextMs = perTokenMs;
  if (nextMs > resetMs) nextMs = resetMs;
  return wholeSeconds(nextMs);
}

/**
 * The policy's item for the limit `decision` speaks of, or `undefined` when it has none: a decision
 * made under limits that `setLimits` replaced before its headers were written. Named by the policy's
 * first item, its `r` and `t` were another limit's numbers under that name (`"b";r=57` where `b`
 * has `q=50`); without an item of its own it sends no `RateLimit`, as a decision that read no bucket.
 */
function itemOf(decision: Decision, policy: RateLimitPolicy): PolicyItem | undefined {
  for (const item of policy.items) {
    if (item.name === decision.name && item.quota === decision.limit) return item;
  }
  return undefined;
}

/** A structured-field String (RFC 8941 §3.3.3): quoted, with `\` and `"` escaped. */
function quote(name: string): string {
  return `"${name.replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * Checks `rateLimitHeaders`' options as the middleware checks its own, once per object: unchecked,
 * `standardHeaders: true` or `'draft-7'` sent draft-11 fields, `legacyHeaders: 'false'` sent the
 * legacy ones, a misspelt name was ignored, and a `degradedHeader` that is no field name made
 * `res.setHeader` throw on the first degraded response.
 */
function checkHeaderOptions(options: unknown): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ArgumentError('options', options, 'an object');
  }
  const o = options as Record<string, unknown>;
  for (const [name, value] of Object.entries(o)) {
    if (value !== undefined && !HEADER_OPTION_NAMES.includes(name)) {
      throw new ArgumentError(
        name,
        value,
        `not set: it is not an option (known: ${HEADER_OPTION_NAMES.join(', ')})`,
      );
    }
  }
  const { standardHeaders, legacyHeaders, degradedHeader } = o;
  if (
    standardHeaders !== undefined &&
    standardHeaders !== 'draft-11' &&
    standardHeaders !== 'draft-10' &&
    standardHeaders !== false
  ) {
    throw new ArgumentError('standardHeaders', standardHeaders, "'draft-11', 'draft-10' or false");
  }
  if (legacyHeaders !== undefined && typeof legacyHeaders !== 'boolean') {
    throw new ArgumentError('legacyHeaders', legacyHeaders, 'true or false');
  }
  if (
    degradedHeader !== undefined &&
    degradedHeader !== false &&
    !(typeof degradedHeader === 'string' && FIELD_NAME.test(degradedHeader))
  ) {
    throw new ArgumentError('degradedHeader', degradedHeader, 'a header name, or false');
  }
  checkedOptions.add(options);
}
