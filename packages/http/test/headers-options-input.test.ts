import { ArgumentError, defineLimit, denyDecision } from '@tiered-limiter/core';
import { type RateLimitHeaderOptions, rateLimitHeaders, rateLimitPolicy } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';

const LIMIT = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' });
const policy = rateLimitPolicy([LIMIT]);
/** A denial by the `closed` failure policy: it carries the degraded header. */
const degraded = denyDecision(1000, 0, 0, LIMIT, 'fallback', 'closed');

describe('rateLimitHeaders options', () => {
  it.each([
    ['standardHeaders', { standardHeaders: true }],
    ['standardHeaders', { standardHeaders: 'draft-7' }],
    ['legacyHeaders', { legacyHeaders: 'false' }],
    ['degradedHeader', { degradedHeader: '' }],
    ['degradedHeader', { degradedHeader: 'Bad Header' }],
    ['legacy', { legacy: true }],
    ['options', 'draft-11'],
  ])('refuses a bad %s by an ArgumentError naming it, before any header is made', (name, options) => {
    const call = () => rateLimitHeaders(degraded, policy, options as RateLimitHeaderOptions);
    expect(call).toThrow(ArgumentError);
    expect(call).toThrow(new RegExp(`\`${name}\``));
  });

  it('takes what the middleware takes, and the same object again', () => {
    const options = {
      standardHeaders: 'draft-10',
      legacyHeaders: true,
      degradedHeader: 'X-Degraded',
    } as const;
    const first = rateLimitHeaders(degraded, policy, options);
    expect(first['X-Degraded']).toBe('policy=closed');
    expect(rateLimitHeaders(degraded, policy, options)).toEqual(first);
    expect(rateLimitHeaders(degraded, policy)['RateLimit-Degraded']).toBe('policy=closed');
    expect(rateLimitHeaders(degraded, policy, { standardHeaders: false, degradedHeader: false })).toEqual({
      'Retry-After': '1',
    });
  });
});
