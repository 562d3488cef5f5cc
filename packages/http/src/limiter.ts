import type { Limiter, LimitSpec, SyncLimiter } from '@tiered-limiter/core';

/**
 * What the middleware needs of a limiter: a subset of core's `Limiter` and `SyncLimiter`
 * contracts, so any limiter of tiered-limiter fits (`RequestLimiter`, `TieredLimiter`, on a
 * `MemoryStore` or a `RedisStore`) and so does a hand-written one. `limits` names the policy in
 * the headers and `consume` decides; `tryConsume`, when present, is asked first (the two-tier
 * limiter's synchronous hot path) and `consume` only when it returns `undefined`; `reward` is
 * what `skipFailedRequests` and `skipSuccessfulRequests` call to give a request's tokens back;
 * `fallbackLimits`, when present, are the `local` failure policy's in-process limits, which the
 * headers of its decisions announce (`RequestLimiter` and `TieredLimiter` have it).
 */
export type HttpLimiter = Pick<Limiter, 'limits' | 'consume'> &
  Partial<Pick<SyncLimiter, 'tryConsume'>> &
  Partial<Pick<Limiter, 'reward'>> & {
    /** The `local` failure policy's in-process limits; `undefined` (or absent) for other policies. */
    readonly fallbackLimits?: readonly LimitSpec[] | undefined;
  };

/** Whether `value` has what the middleware calls: `limits` and `consume`. */
export function isLimiter(value: unknown): value is HttpLimiter {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as HttpLimiter).consume === 'function' &&
    Array.isArray((value as HttpLimiter).limits)
  );
}
