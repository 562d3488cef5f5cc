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
import { LocalLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { parsePolicy, parseRateLimit } from './helpers.js';

const apiLimit = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const api = rateLimitPolicy(apiLimit);
const failure = new StoreError('down');

describe('rateLimitPolicy', () => {
  it('announces each limit with q its capacity and w the seconds to fill it', () => {
    expect(api.header).toBe('"api";q=3;w=3');
    expect(rateLimitPolicy(perSecond(10)).header).toBe('"10ps";q=10;w=1');
    expect(rateLimitPolicy(perMinute(5, { name: 'login' })).header).toBe('"login";q=5;w=60');
    const two = rateLimitPolicy([perSecond(20, { name: 'burst' }), perHour(1000, { name: 'hourly' })]).header;
    expect(two).toBe('"burst";q=20;w=1, "hourly";q=1000;w=3600');
    expect(parsePolicy(two)).toEqual([
      { name: 'burst', q: 20, w: 1 },
      { name: 'hourly', q: 1000, w: 3600 },
    ]);
  });

  it('rounds a fractional window up, to at least 1 s', () => {
    expect(rateLimitPolicy(defineLimit({ capacity: 1, refillPerSecond: 3 })).header).toBe('"1-3ps";q=1;w=1');
    expect(rateLimitPolicy(defineLimit({ capacity: 5, refillPerSecond: 2, name: 'x' })).header).toBe(
      '"x";q=5;w=3',
    );
  });

  it('refuses what is not a limit', () => {
    expect(() => rateLimitPolicy([] as never)).toThrow(/`limits`/);
  });
});

describe('rateLimitHeaders: t is the seconds until the next token of the limit the decision names', () => {
  it('2 per minute: t=30 after the first and after the second request (a token every 30 s), not 60', () => {
    const spec = perMinute(2, { name: 'slow' });
    const policy = rateLimitPolicy(spec);
    expect(rateLimitHeaders(allowDecision(1, 30_000, spec, 'global'), policy).RateLimit).toBe(
      '"slow";r=1;t=30',
    );
    expect(rateLimitHeaders(allowDecision(0, 60_000, spec, 'global'), policy).RateLimit).toBe(
      '"slow";r=0;t=30',
    );
    // 10 s later: 1/3 of a token in, 20 s to the next one.
    expect(rateLimitHeaders(allowDecision(0, 50_000, spec, 'global'), policy).RateLimit).toBe(
      '"slow";r=0;t=20',
    );
  });

  it('counts a fraction of a token already refilled, and sends no t for a full bucket', () => {
    const slow = defineLimit({ capacity: 3, refillPerSecond: 0.1, name: 'api' }); // a token per 10 s
    const policy = rateLimitPolicy(slow);
    expect(rateLimitHeaders(allowDecision(2, 5_000, slow, 'local'), policy).RateLimit).toBe('"api";r=2;t=5');
    expect(rateLimitHeaders(allowDecision(1, 12_500, slow, 'local'), policy).RateLimit).toBe('"api";r=1;t=3');
    expect(rateLimitHeaders(allowDecision(3, 0, slow, 'local'), policy).RateLimit).toBe('"api";r=3');
    expect(parseRateLimit('"api";r=3')).toEqual([{ name: 'api', r: 3, t: undefined }]);
  });

  it('gives a denial of cost 1 t equal to its Retry-After however long it waits (a blocked key), when told the cost', () => {
    // `block(key, 60_000)`: nothing until the block ends, whatever the bucket holds.
    const blocked = denyDecision(60_000, 0, 60_000, apiLimit, 'local');
    expect(rateLimitHeaders(blocked, api, {}, 1)).toMatchObject({
      RateLimit: '"api";r=0;t=60',
      'Retry-After': '60',
    });
    // A request of cost 3 denied with the same wait: t is still the next token's.
    expect(rateLimitHeaders(denyDecision(3000, 0, 3000, apiLimit, 'global'), api, {}, 3).RateLimit).toBe(
      '"api";r=0;t=1',
    );
  });

  it('gives a denial of cost 1 a Retry-After in whole seconds rounded up, and t equal to it', () => {
    expect(rateLimitHeaders(denyDecision(1, 0, 3000, apiLimit, 'global'), api)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=0;t=1',
      'Retry-After': '1',
    });
    const login = perMinute(5, { name: 'login' });
    const headers = rateLimitHeaders(
      denyDecision(11_001, 0, 59_001, login, 'global'),
      rateLimitPolicy(login),
    );
    expect(headers.RateLimit).toBe('"login";r=0;t=12');
    expect(headers['Retry-After']).toBe('12');
  });

  it('gives a heavier denial a Retry-After for its cost and t for the next token, never later', () => {
    // 0.5 tokens, a cost of 3 at 1 per second: 2.5 s to wait, the next token in 0.5 s.
    const headers = rateLimitHeaders(denyDecision(2500, 0, 2500, apiLimit, 'global'), api);
    expect(headers.RateLimit).toBe('"api";r=0;t=1');
    expect(headers['Retry-After']).toBe('3');
    // 2 whole tokens, a cost of 3: r says what is left.
    expect(rateLimitHeaders(denyDecision(1000, 2, 1000, apiLimit, 'global'), api).RateLimit).toBe(
      '"api";r=2;t=1',
    );
  });

  it('names the limit of the decision, never another limit of equal capacity, with its own numbers', () => {
    const second = perSecond(5, { name: 'second' });
    const minute = perMinute(5, { name: 'minute' });
    const clock = new FakeClock(0);
    const limiter = new LocalLimiter({ limits: [second, minute], clock });
    const policy = rateLimitPolicy(limiter.limits);
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const headers = rateLimitHeaders(limiter.tryConsume('k'), policy);
      seen.push(`${headers.RateLimit} ${headers['Retry-After'] ?? '-'}`);
    }
    expect(seen.at(-1)).toBe('"minute";r=0;t=12 12');
    for (const line of seen) {
      const [field] = parseRateLimit(line.split(' ')[0]);
      const limit = field!.name === 'second' ? second : minute;
      expect(field!.r).toBeLessThanOrEqual(limit.capacity);
      expect(field!.t! * 1000).toBeLessThanOrEqual(1000 / limit.refillPerSecond + 999);
    }
  });

  it('sends no RateLimit for a decision whose limit the policy does not have (limits replaced since)', () => {
    const old = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'old' });
    const policy = rateLimitPolicy([perSecond(3, { name: 'burst' }), perHour(1000, { name: 'hourly' })]);
    // Decided under `old` (57 of 100 left), written after setLimits: `"burst";r=57` said 57 of 3.
    const headers = rateLimitHeaders(allowDecision(57, 43_000, old, 'global'), policy);
    expect(headers.RateLimit).toBeUndefined();
    expect(headers['RateLimit-Policy']).toBe('"burst";q=3;w=1, "hourly";q=1000;w=3600');
    // A limit of the same name whose capacity changed is another limit too.
    const wider = defineLimit({ capacity: 50, refillPerSecond: 3, name: 'burst' });
    expect(rateLimitHeaders(denyDecision(500, 0, 17_000, wider, 'global'), policy).RateLimit).toBeUndefined();
    expect(rateLimitHeaders(denyDecision(500, 0, 17_000, wider, 'global'), policy)['Retry-After']).toBe('1');
  });

  it('adds the legacy headers on request, reset in seconds until full, on a denial too', () => {
    // 0.5 tokens, a cost of 2: 1.5 s to wait, the next token in 0.5 s, full in 2.5 s.
    expect(
      rateLimitHeaders(denyDecision(1500, 0, 2500, apiLimit, 'global'), api, { legacyHeaders: true }),
    ).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=0;t=1',
      'Retry-After': '2',
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': '3',
    });
    expect(
      rateLimitHeaders(allowDecision(1, 2000, apiLimit, 'global'), api, { legacyHeaders: true })[
        'X-RateLimit-Reset'
      ],
    ).toBe('2');
  });

  it("sends the same fields for 'draft-10' as for 'draft-11' (the default)", () => {
    const decisions = [
      allowDecision(2, 1000, apiLimit, 'global'),
      allowDecision(3, 0, apiLimit, 'lease'),
      denyDecision(2500, 0, 2500, apiLimit, 'global'),
      allowDecision(0, 0, apiLimit, 'fallback', 'open', failure),
      denyDecision(1000, 0, 0, apiLimit, 'fallback', 'closed', failure),
      shadowOf(denyDecision(400, 0, 2400, apiLimit, 'global')),
    ];
    for (const decision of decisions) {
      for (const legacyHeaders of [false, true]) {
        const draft11 = rateLimitHeaders(decision, api, { standardHeaders: 'draft-11', legacyHeaders });
        expect(draft11['RateLimit-Policy']).toBe('"api";q=3;w=3');
        expect(rateLimitHeaders(decision, api, { standardHeaders: 'draft-10', legacyHeaders })).toEqual(
          draft11,
        );
        expect(rateLimitHeaders(decision, api, { legacyHeaders })).toEqual(draft11);
      }
    }
  });

  it('sends no standard fields with standardHeaders: false, Retry-After still', () => {
    expect(
      rateLimitHeaders(denyDecision(1500, 0, 3000, apiLimit, 'global'), api, { standardHeaders: false }),
    ).toEqual({ 'Retry-After': '2' });
  });

  it.each<[string, Decision, Record<string, string>]>([
    [
      'open',
      allowDecision(0, 0, apiLimit, 'fallback', 'open', failure),
      { 'RateLimit-Policy': '"api";q=3;w=3', 'RateLimit-Degraded': 'policy=open' },
    ],
    [
      'closed',
      denyDecision(1000, 0, 0, apiLimit, 'fallback', 'closed', failure),
      { 'RateLimit-Policy': '"api";q=3;w=3', 'Retry-After': '1', 'RateLimit-Degraded': 'policy=closed' },
    ],
    [
      'local',
      allowDecision(1, 1500, apiLimit, 'fallback', 'local', failure),
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

  it("announces a local-policy decision by the fallback bucket's policy, any other by the limits'", () => {
    // apiLimit divided by 3: a bucket of 1 refilled every 3 s.
    const fallback = defineLimit({ capacity: 1, refillPerSecond: 1 / 3, name: 'api' });
    const policy = rateLimitPolicy(apiLimit, fallback);
    expect(policy.header).toBe('"api";q=3;w=3');
    expect(policy.fallback?.header).toBe('"api";q=1;w=3');
    expect(
      rateLimitHeaders(denyDecision(3000, 0, 3000, fallback, 'fallback', 'local', failure), policy),
    ).toEqual({
      'RateLimit-Policy': '"api";q=1;w=3',
      RateLimit: '"api";r=0;t=3',
      'Retry-After': '3',
      'RateLimit-Degraded': 'policy=local',
    });
    expect(rateLimitHeaders(denyDecision(1000, 0, 3000, apiLimit, 'global'), policy)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      RateLimit: '"api";r=0;t=1',
      'Retry-After': '1',
    });
    expect(rateLimitHeaders(allowDecision(0, 0, apiLimit, 'fallback', 'open', failure), policy)).toEqual({
      'RateLimit-Policy': '"api";q=3;w=3',
      'RateLimit-Degraded': 'policy=open',
    });
    expect(() => rateLimitPolicy(apiLimit, [] as never)).toThrow(/`fallbackLimits`/);
  });

  it('names the degraded header as told, or sends none', () => {
    const decision = allowDecision(0, 0, apiLimit, 'fallback', 'open', failure);
    expect(
      rateLimitHeaders(decision, api, { degradedHeader: 'X-Limiter-Degraded' })['X-Limiter-Degraded'],
    ).toBe('policy=open');
    expect(Object.keys(rateLimitHeaders(decision, api, { degradedHeader: false }))).toEqual([
      'RateLimit-Policy',
    ]);
  });

  it('admits a shadow-mode denial without Retry-After', () => {
    const headers = rateLimitHeaders(shadowOf(denyDecision(400, 0, 2400, apiLimit, 'global')), api);
    expect(headers).toEqual({ 'RateLimit-Policy': '"api";q=3;w=3', RateLimit: '"api";r=0;t=1' });
  });
});
