import {
  allowDecision,
  type Decision,
  defineLimit,
  denyDecision,
  perHour,
  perMinute,
  perSecond,
  StoreError,
  shadowOf,
} from '@tiered-limiter/core';
import { rateLimitHeaders, rateLimitPolicy } from '@tiered-limiter/http';
import { describe, expect, it } from 'vitest';

const api = rateLimitPolicy(defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' }));
const failure = new StoreError('down');
const NAMES: Record<number, string> = { 3: 'api', 20: 'burst', 1000: 'hourly' };
const spec = (capacity: number) =>
  defineLimit({ capacity, refillPerSecond: 1, name: NAMES[capacity] ?? 'x' });

describe('rateLimitPolicy', () => {
  it('announces each limit with q its capacity and w the seconds to fill it', () => {
    expect(api.header).toBe('"api";q=3;w=3');
    expect(rateLimitPolicy(perSecond(10)).header).toBe('"10ps";q=10;w=1');
    expect(rateLimitPolicy(perMinute(5, { name: 'login' })).header).toBe('"login";q=5;w=60');
    expect(
      rateLimitPolicy([perSecond(20, { name: 'burst' }), perHour(1000, { name: 'hourly' })]).header,
    ).toBe('"burst";q=20;w=1, "hourly";q=1000;w=3600');
  });

  it('rounds a fractional window up, to at least 1 s', () => {
    expect(rateLimitPolicy(defineLimit({ capacity: 1, refillPerSecond: 3 })).header).toBe('"1-3ps";q=1;w=1');
    expect(rateLimitPolicy(defineLimit({ capacity: 5, refillPerSecond: 2, name: 'x' })).header).toBe(
      '"x";q=5;w=3',
    );
    expect(rateLimitPolicy(perMinute(7, { name: 'm' })).header).toBe('"m";q=7;w=60');
  });

  it('refuses what is not a limit', () => {
    expect(() => rateLimitPolicy([] as never)).toThrow(/`limits`/);
  });
});

describe('rateLimitHeaders', () => {
  it('gives an admitted request the policy and the tightest limit, t in seconds until full', () => {
    expect(rateLimitHeaders(allowDecision(2, 1000, spec(3), 'global'), api)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=2;t=1',
    });
    expect(rateLimitHeaders(allowDecision(0, 2001, spec(3), 'lease'), api).RateLimit).toBe('"api";r=0;t=3');
    expect(rateLimitHeaders(allowDecision(3, 0, spec(3), 'global'), api).RateLimit).toBe('"api";r=3;t=0');
  });

  it('gives a denial Retry-After in whole seconds rounded up, and t equal to it', () => {
    expect(rateLimitHeaders(denyDecision(1, 0, 3000, spec(3), 'global'), api)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=0;t=1',
      'Retry-After': '1',
    });
    expect(rateLimitHeaders(denyDecision(1000, 0, 3000, spec(3), 'global'), api)['Retry-After']).toBe('1');
    expect(rateLimitHeaders(denyDecision(1001, 0, 3000, spec(3), 'global'), api)['Retry-After']).toBe('2');
    // A weighted request denied with tokens left says how many are left.
    expect(rateLimitHeaders(denyDecision(2500, 2, 1000, spec(3), 'global'), api).RateLimit).toBe(
      '"api";r=2;t=3',
    );
  });

  it('names the tightest limit by its capacity', () => {
    const two = rateLimitPolicy([perSecond(20, { name: 'burst' }), perHour(1000, { name: 'hourly' })]);
    expect(rateLimitHeaders(allowDecision(19, 50, spec(20), 'global'), two).RateLimit).toBe(
      '"burst";r=19;t=1',
    );
    expect(rateLimitHeaders(allowDecision(7, 3_600_000, spec(1000), 'global'), two).RateLimit).toBe(
      '"hourly";r=7;t=3600',
    );
  });

  it('adds the legacy headers on request', () => {
    expect(
      rateLimitHeaders(denyDecision(1500, 0, 3000, spec(3), 'global'), api, { legacyHeaders: true }),
    ).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=0;t=2',
      'Retry-After': '2',
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '2',
    });
  });

  it.each<[string, Decision, Record<string, string>]>([
    [
      'open',
      allowDecision(0, 0, spec(3), 'fallback', 'open', failure),
      { 'RateLimit-Policy': '"api";q=3;w=3', 'RateLimit-Degraded': 'policy=open' },
    ],
    [
      'closed',
      denyDecision(1000, 0, 0, spec(3), 'fallback', 'closed', failure),
      { 'RateLimit-Policy': '"api";q=3;w=3', 'Retry-After': '1', 'RateLimit-Degraded': 'policy=closed' },
    ],
    [
      'local',
      allowDecision(1, 500, spec(3), 'fallback', 'local', failure),
      {
        'RateLimit-Policy': '"api";q=3;w=3',
        RateLimit: '"api";r=1;t=1',
        'RateLimit-Degraded': 'policy=local',
      },
    ],
  ])(
    'says when the %s failure policy decided, with RateLimit only if a bucket was read',
    (_, decision, want) => {
      expect(rateLimitHeaders(decision, api)).toEqual(want);
    },
  );

  it('names the degraded header as told, or sends none', () => {
    const decision = allowDecision(0, 0, spec(3), 'fallback', 'open', failure);
    expect(
      rateLimitHeaders(decision, api, { degradedHeader: 'X-Limiter-Degraded' })['X-Limiter-Degraded'],
    ).toBe('policy=open');
    expect(Object.keys(rateLimitHeaders(decision, api, { degradedHeader: false }))).toEqual([
      'RateLimit-Policy',
    ]);
  });

  it('admits a shadow-mode denial without Retry-After', () => {
    const headers = rateLimitHeaders(shadowOf(denyDecision(400, 0, 3000, spec(3), 'global')), api);
    expect(headers).toEqual({ 'RateLimit-Policy': '"api";q=3;w=3', RateLimit: '"api";r=0;t=3' });
  });
});
