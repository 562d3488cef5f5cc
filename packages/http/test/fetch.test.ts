/**
 * What only the Fetch adapter has: a `Request` carries no client address, a `Response` may have
 * headers that cannot change, the client's leaving is the request's `signal`, and the handler
 * answers with a `Response`. Everything the adapters share runs in the adapter contract, on Hono.
 */
import { ConfigError, defineLimit } from '@tiered-limiter/core';
import { fetchRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { tokensIn } from './helpers.js';

const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  vi.restoreAllMocks();
});

function limiterOnFakeClock() {
  const clock = new FakeClock(0);
  const store = new MemoryStore({ clock });
  const limiter = new RequestLimiter({ store, limits: api, failurePolicy: 'open', clock });
  closers.push(() => limiter.close());
  return { store, limiter };
}

const get = (path = '/items', headers: Record<string, string> = {}, init: RequestInit = {}) =>
  new Request(`http://example.test${path}`, { headers, ...init });

/** Codes of the `TieredLimiterWarning`s emitted from now on. */
function watchWarnings(): string[] {
  const codes: string[] = [];
  vi.spyOn(process, 'emitWarning').mockImplementation(((_message: string, options?: { code?: string }) => {
    if (options?.code !== undefined) codes.push(options.code);
  }) as typeof process.emitWarning);
  return codes;
}

describe('fetchRateLimit', () => {
  it('keys by the address the server passes, and counts requests without one under "unknown", warning once', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter });
    const warnings = watchWarnings();
    expect((await rateLimit(get(), '192.0.2.1')).decision?.key).toBe('192.0.2.1');
    expect((await rateLimit(get(), '::ffff:192.0.2.1')).decision?.key).toBe('192.0.2.1');
    expect(warnings).toEqual([]);
    const anonymous = await Promise.all([1, 2, 3, 4].map(() => rateLimit(get())));
    expect(anonymous.map((r) => r.decision?.key)).toEqual(['unknown', 'unknown', 'unknown', 'unknown']);
    expect(anonymous.map((r) => r.allowed)).toEqual([true, true, true, false]);
    expect(warnings).toEqual(['TL_HTTP_NO_CLIENT_ADDRESS']);
    // A key of the caller's own that answers "unknown" is no missing address.
    warnings.length = 0;
    const keyed = fetchRateLimit({ limiter, key: () => 'unknown' });
    expect((await keyed(get())).decision?.key).toBe('unknown');
    expect(warnings).toEqual([]);
  });

  it('reads the trusted proxy’s X-Forwarded-For entry with no address from the server, and never the client’s own', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter, trustProxy: 1 });
    const warnings = watchWarnings();
    const forwarded = get('/items', { 'x-forwarded-for': '203.0.113.9, 198.51.100.7' });
    expect((await rateLimit(forwarded)).decision?.key).toBe('198.51.100.7');
    expect(warnings).toEqual([]);
  });

  it('answers a denial with the whole Response: 429, Retry-After, the rate-limit headers, a problem document', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter });
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await rateLimit(get(), '192.0.2.1'));
    expect(results.map((r) => r.response)).toEqual([undefined, undefined, undefined, expect.any(Response)]);
    const refused = results[3]!;
    expect(refused.allowed).toBe(false);
    expect(refused.response!.status).toBe(429);
    expect(refused.response!.headers.get('retry-after')).toBe('1');
    expect(refused.response!.headers.get('ratelimit-policy')).toBe('"api";q=3;w=3');
    expect(refused.response!.headers.get('content-type')).toBe('application/problem+json');
    expect(await refused.response!.json()).toMatchObject({ status: 429, title: 'Too Many Requests' });
    // A denial's finish leaves the answer as it is.
    const other = new Response('x');
    expect(refused.finish(other)).toBe(other);
  });

  it('puts the headers on the response in place, or on a copy when its headers cannot change', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter });
    const mine = new Response('hello', { status: 201 });
    const first = await rateLimit(get(), '192.0.2.1');
    expect(first.finish(mine)).toBe(mine);
    expect(mine.headers.get('ratelimit')).toBe('"api";r=2;t=1');

    const redirect = Response.redirect('http://example.test/elsewhere', 302);
    expect(() => redirect.headers.set('x-probe', '1')).toThrow(TypeError);
    const second = await rateLimit(get(), '192.0.2.1');
    const sent = second.finish(redirect);
    expect(sent).not.toBe(redirect);
    expect(sent.status).toBe(302);
    expect(sent.headers.get('location')).toBe('http://example.test/elsewhere');
    expect(sent.headers.get('ratelimit')).toMatch(/^"api";r=1;t=\d+$/);
  });

  it('lets a request no limit names through, with no headers', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter, skip: (request) => request.headers.get('x-health') === '1' });
    const skipped = await rateLimit(get('/items', { 'x-health': '1' }), '192.0.2.1');
    expect(skipped).toMatchObject({ allowed: true, response: undefined, decision: undefined, headers: {} });
    const mine = new Response('ok');
    expect(skipped.finish(mine)).toBe(mine);
    expect([...mine.headers.keys()]).toEqual(['content-type']);
  });

  it('counts a request whose client left before finish as failed, and a finished one once', async () => {
    const { store, limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({ limiter, skipFailedRequests: true });
    const left = new AbortController();
    await rateLimit(get('/items', {}, { signal: left.signal }), '192.0.2.1');
    expect(await tokensIn(store, '192.0.2.1', [api])).toBe(2);
    left.abort();
    await vi.waitFor(async () => expect(await tokensIn(store, '192.0.2.1', [api])).toBe(3));

    const stayed = new AbortController();
    const done = await rateLimit(get('/items', {}, { signal: stayed.signal }), '192.0.2.1');
    done.finish(new Response('ok', { status: 200 }));
    stayed.abort(); // after the response: counted already, as a success
    done.finish(new Response('again', { status: 500 }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await tokensIn(store, '192.0.2.1', [api])).toBe(2);

    const failed = await rateLimit(get(), '192.0.2.1');
    failed.finish(new Response('no', { status: 500 }));
    await vi.waitFor(async () => expect(await tokensIn(store, '192.0.2.1', [api])).toBe(2));
  });

  // Deno.serve warns once a process, to stderr, when a handler has read `request.signal`: it
  // aborts the signal after a successful response (test/runtimes.test.ts runs it on Deno).
  it('reads the request’s signal only when a skip option counts by outcome', async () => {
    const { limiter } = limiterOnFakeClock();
    const watched = () => {
      const request = get();
      const reads = { count: 0 };
      const { signal } = request;
      Object.defineProperty(request, 'signal', {
        get: () => {
          reads.count++;
          return signal;
        },
      });
      return { request, reads };
    };
    for (const [options, expected] of [
      [{}, 0],
      [{ skipFailedRequests: true }, 1],
      [{ skipSuccessfulRequests: true }, 1],
    ] as const) {
      const rateLimit = fetchRateLimit({ limiter, ...options });
      const { request, reads } = watched();
      const result = await rateLimit(request, '192.0.2.9');
      result.finish(new Response('ok'));
      expect([result.allowed, reads.count], JSON.stringify(options)).toEqual([true, expected]);
    }
  });

  it('takes the handler’s Response, adding the rate-limit headers it did not set', async () => {
    const { limiter } = limiterOnFakeClock();
    const rateLimit = fetchRateLimit({
      limiter,
      handler: async (_request, denial) =>
        new Response(`wait ${Math.ceil(denial.decision.retryAfterMs / 1000)} s`, {
          status: 420,
          headers: { 'retry-after': '9' },
        }),
    });
    for (let i = 0; i < 3; i++) await rateLimit(get(), '192.0.2.1');
    const { response } = await rateLimit(get(), '192.0.2.1');
    expect(response!.status).toBe(420);
    expect(await response!.text()).toBe('wait 1 s');
    expect(response!.headers.get('retry-after')).toBe('9');
    expect(response!.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(response!.headers.get('ratelimit-policy')).toBe('"api";q=3;w=3');
  });

  it('refuses a handler that is not a function and a request property a Request has when made, and a handler that answers no Response when it runs', async () => {
    const { limiter } = limiterOnFakeClock();
    expect(() => fetchRateLimit({ limiter, handler: 'nope' as never })).toThrow(ConfigError);
    expect(() => fetchRateLimit({ limiter, windowMs: 60_000 } as never)).toThrow(/windowMs/);
    for (const name of ['json', 'signal', 'clone', 'bodyUsed'])
      expect(() => fetchRateLimit({ limiter, requestPropertyName: name }), name).toThrow(
        /requestPropertyName/,
      );
    const named = await fetchRateLimit({ limiter, requestPropertyName: 'limits' })(get(), '192.0.2.2');
    expect(named.decision).toMatchObject({ key: '192.0.2.2', remaining: 2 });
    const rateLimit = fetchRateLimit({ limiter, handler: (() => 'denied') as never });
    for (let i = 0; i < 3; i++) await rateLimit(get(), '192.0.2.1');
    await expect(rateLimit(get(), '192.0.2.1')).rejects.toThrow(/`handler`[\s\S]*"denied"/);
    await expect(rateLimit(get(), '192.0.2.1')).rejects.toBeInstanceOf(ConfigError);
  });
});
