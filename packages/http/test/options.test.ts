/** Every option refused at construction with a typed error naming it; unknown options named too. */
import { ConfigError, type LimitSpec, perMinute, perSecond } from '@tiered-limiter/core';
import { createRateLimitCheck, type RateLimitOptions } from '@tiered-limiter/http';
import { ProcessReports } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { localHttpLimiter } from './helpers.js';

const limiter = localHttpLimiter({ limits: perSecond(3, { name: 'api' }) });

function refusal(options: Record<string, unknown>): ConfigError {
  try {
    createRateLimitCheck(options as RateLimitOptions);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(Object.keys(options))}`);
}

describe('options', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['no limit at all', {}, /`limiter`/],
    ['a limiter without consume', { limiter: { limits: [] } }, /`limiter`/],
    ['a key that is not a function', { limiter, key: 'ip' }, /`key`/],
    ['a cost that is not a function', { limiter, cost: 2 }, /`cost`/],
    ['skip', { limiter, skip: true }, /`skip`/],
    ['onExceeded', { limiter, onExceeded: 'log' }, /`onExceeded`/],
    ['trustProxy', { limiter, trustProxy: -1 }, /`trustProxy`/],
    ['trustProxy true', { limiter, trustProxy: true }, /`trustProxy`/],
    ['ipv6Subnet', { limiter, ipv6Subnet: 129 }, /`ipv6Subnet`/],
    ['ipv6Subnet 0', { limiter, ipv6Subnet: 0 }, /`ipv6Subnet`/],
    ['statusCode', { limiter, statusCode: 200 }, /`statusCode`/],
    ['failClosedStatus', { limiter, failClosedStatus: 500 }, /`failClosedStatus`/],
    ['message', { limiter, message: 42 }, /`message`/],
    ['problem', { limiter, problem: 'oops' }, /`problem`/],
    ['degradedHeader', { limiter, degradedHeader: 'bad header' }, /`degradedHeader`/],
    ['degradedHeader number', { limiter, degradedHeader: 7 }, /`degradedHeader`/],
    ['legacyHeaders', { limiter, legacyHeaders: 'yes' }, /`legacyHeaders`/],
    ['standardHeaders true', { limiter, standardHeaders: true }, /`standardHeaders`/],
    ['requestPropertyName', { limiter, requestPropertyName: '' }, /`requestPropertyName`/],
    ['requestPropertyName __proto__', { limiter, requestPropertyName: '__proto__' }, /`requestPropertyName`/],
    ['requestPropertyName headers', { limiter, requestPropertyName: 'headers' }, /`requestPropertyName`/],
    ['skipFailedRequests', { limiter, skipFailedRequests: 1 }, /`skipFailedRequests`/],
    ['skipFailedRequests without reward', { limiter, skipFailedRequests: true }, /`limiter`.*reward/],
    ['allowList', { limiter, allowList: ['nope'] }, /`allowList\[0\]`/],
    ['routes', { routes: [] }, /`routes`/],
    ['a route', { routes: { '/x': 5 } }, /`routes\['\/x'\]`/],
    ['a route path', { routes: { x: limiter } }, /`routes\['x'\]`/],
    ['a route cost', { routes: { '/x': { limiter, cost: 0 } } }, /`routes\['\/x'\]\.cost`/],
    ['a route option', { routes: { '/x': { limiter, max: 5 } } }, /`routes\['\/x'\]\.max`.*perMinute/],
    ['limit as a number (express-rate-limit)', { limit: 100 }, /`limit`.*perMinute/],
    ['limit without createLimiter', { limit: perMinute(5) }, /`createLimiter`/],
    [
      'limit and limiter',
      { limiter, limit: perMinute(5), createLimiter: () => limiter },
      /`limit`.*`limiter`/,
    ],
    ['maxLimiters', { limit: perMinute(5), createLimiter: () => limiter, maxLimiters: 0 }, /`maxLimiters`/],
    ['maxLimiters beside a fixed limiter', { limiter, maxLimiters: 10 }, /`maxLimiters`.*createLimiter/],
    [
      'a route cost no bucket can hold',
      { routes: { '/x': { limiter, cost: 4 } } },
      /`routes\['\/x'\]\.cost`.*\(3\)/,
    ],
    [
      'two route names for the same requests',
      { routes: { '/login': limiter, '/Login/': false } },
      /`routes\['\/Login\/'\]`/,
    ],
    [
      'createLimiter returning no limiter',
      { limit: perMinute(5), createLimiter: () => ({}) },
      /`createLimiter`/,
    ],
  ])('refuses %s', (_, options, pattern) => {
    const error = refusal(options);
    expect(error.code).toBe('ERR_TL_CONFIG');
    expect(error.message).toMatch(pattern);
  });

  it.each<[string, string]>([
    ['windowMs', 'perMinute'],
    ['max', 'perMinute'],
    ['timeWindow', 'perMinute'],
    ['points', 'perMinute'],
    ['duration', 'perMinute'],
    ['keyGenerator', '`key`'],
    ['store', 'belongs to the limiter'],
    ['whitelist', '`allowList`'],
    ['onLimitReached', '`onExceeded`'],
    ['errorResponseBuilder', '`message`'],
    ['requestWasSuccessful', 'below 400'],
    ['headers', '`standardHeaders`'],
    ['keyPrefix', 'prefix'],
    ['passOnStoreError', '`failurePolicy`'],
    ['skipOnError', '`failurePolicy`'],
    ['blockDuration', 'block'],
    ['global', 'config.rateLimit'],
  ])("names what to use instead of another package's %s", (option, instead) => {
    const error = refusal({ limiter, [option]: 1 });
    expect(error.option).toBe(option);
    expect(error.message).toContain(instead);
  });

  it('names the nearest known option for a typo, and lists them when nothing is near', () => {
    expect(refusal({ limiter, keys: () => 'k' }).message).toMatch(/did you mean `key`/);
    expect(refusal({ limiter, trustproxy: 1 }).message).toMatch(/did you mean `trustProxy`/);
    expect(refusal({ limiter, legacyHeader: true }).message).toMatch(/did you mean `legacyHeaders`/);
    expect(refusal({ limiter, zzzzzzzz: 1 }).message).toMatch(/known: limiter, limit,/);
  });

  it('accepts every option it documents', () => {
    expect(() =>
      createRateLimitCheck({
        limiter: { ...limiter, reward: async () => true },
        key: () => 'k',
        cost: () => 1,
        routes: { '/health': false },
        skip: () => false,
        allowList: ['10.0.0.0/8'],
        trustProxy: 1,
        ipv6Subnet: 64,
        statusCode: 429,
        message: 'slow down',
        problem: {},
        failClosedStatus: 429,
        onExceeded: () => {},
        requestPropertyName: 'limits',
        skipFailedRequests: true,
        skipSuccessfulRequests: false,
        standardHeaders: 'draft-10',
        legacyHeaders: true,
        degradedHeader: false,
      }),
    ).not.toThrow();
  });
});

/** A `createLimiter` that records each limiter it builds (by its first limit's name) and its close. */
function recordingLimiter(made: { name: string; closed: boolean }[]) {
  return (limits: readonly LimitSpec[]) => {
    const record = { name: limits[0]!.name, closed: false };
    made.push(record);
    return {
      ...localHttpLimiter({ limits }),
      close: async () => {
        record.closed = true;
      },
    };
  };
}

describe('limit with createLimiter', () => {
  const raw = { method: 'GET', url: '/', headers: {}, socket: {} } as never;

  it('refuses a skip that does not answer true or false at once (an async one would be ignored), naming `skip`', () => {
    const check = createRateLimitCheck({ limiter, skip: async () => true } as unknown as RateLimitOptions);
    const req = { headers: {}, socket: { remoteAddress: '127.0.0.1' } };
    expect(() => check(req as never, req as never)).toThrow(
      expect.objectContaining({ code: 'ERR_TL_CONFIG', option: 'skip' }),
    );
  });

  it('builds one limiter per distinct set of limits, equal values sharing one, and closes the least recently used past maxLimiters', async () => {
    const made: { name: string; closed: boolean }[] = [];
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
    process.on('warning', onWarning);
    try {
      const check = createRateLimitCheck<{ plan: string }>({
        key: () => 'k',
        limit: (req) => perMinute(10, { name: req.plan }),
        createLimiter: recordingLimiter(made),
        maxLimiters: 2,
      });
      for (const plan of ['a', 'b', 'a', 'c', 'b']) await check({ plan }, raw);
      // a, b built; a used again (b is now the least recent); c evicts b; b is built anew and evicts a.
      expect(made.map((m) => `${m.name}${m.closed ? ' closed' : ''}`)).toEqual([
        'a closed',
        'b closed',
        'c',
        'b',
      ]);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((code) => code === 'TL_HTTP_MAX_LIMITERS')).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('answers the request that evicts a limiter whose close throws (warned), or returns no promise', async () => {
    for (const [close, warned] of [
      [
        () => {
          throw new Error('already closed');
        },
        1,
      ],
      [() => undefined, 0],
    ] as const) {
      const reports = new ProcessReports();
      reports.start();
      try {
        const check = createRateLimitCheck<{ plan: string }>({
          key: () => 'k',
          limit: (req) => perMinute(10, { name: req.plan }),
          createLimiter: (limits) => ({ ...localHttpLimiter({ limits }), close }) as never,
          maxLimiters: 1,
        });
        await check({ plan: 'a' }, raw);
        // `b` evicts `a`, whose close misbehaves: the request is still decided.
        expect((await check({ plan: 'b' }, raw))?.allowed).toBe(true);
        expect(reports.warningCodes().filter((code) => code === 'TL_HTTP_CLOSE_FAILED')).toHaveLength(warned);
      } finally {
        reports.stop();
      }
    }
  });

  // The HTTP README's "at most `maxLimiters` (100)": a plan table's size is planned against it,
  // so the figure is written here, not read from DEFAULT_MAX_LIMITERS.
  it('keeps 100 limiters by default: the 101st distinct set of limits closes the least recently used, and only it', async () => {
    const made: { name: string; closed: boolean }[] = [];
    const check = createRateLimitCheck<{ plan: string }>({
      key: () => 'k',
      limit: (req) => perMinute(10, { name: req.plan }),
      createLimiter: recordingLimiter(made),
    });
    const closed = () => made.filter((m) => m.closed).map((m) => m.name);
    for (let i = 0; i < 100; i++) await check({ plan: `p${i}` }, raw);
    expect(made).toHaveLength(100);
    expect(closed()).toEqual([]);
    await check({ plan: 'p100' }, raw);
    expect(made).toHaveLength(101);
    expect(closed()).toEqual(['p0']);
  });

  it('refuses what a limit function returns when it is not limits, naming `limit`', () => {
    const check = createRateLimitCheck<{ n: number }>({
      key: () => 'k',
      limit: () => 100 as never,
      createLimiter: () => localHttpLimiter({ limits: perMinute(1) }),
    });
    expect(() => check({ n: 1 }, raw)).toThrow(/`limit`/);
  });
});
