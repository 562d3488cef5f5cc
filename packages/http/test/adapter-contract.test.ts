/**
 * The adapter contract: every behaviour of the middleware, over real sockets, on node:http,
 * Express 4, Express 5 and Fastify alike. What only one framework has (Express's `trust proxy`,
 * Fastify's `config.rateLimit`) is in that framework's own file.
 */
import { defineLimit, type GlobalStore, type LimitSpec, perMinute, perSecond } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADAPTERS, CUSTOM, closeApps } from './adapters.js';
import {
  exactTieredLimiter,
  FlakyStore,
  localHttpLimiter,
  parsePolicy,
  parseRateLimit,
  request,
  requestMany,
  tokensIn,
  watchLimiterCalls,
} from './helpers.js';

// A burst of 3, refilled at 1 per second: w = 3, one token a second.
const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
  vi.restoreAllMocks();
});

function requestLimiter(failurePolicy: 'open' | 'closed' = 'open', limits = api) {
  const clock = new FakeClock(0);
  const store = new FlakyStore(new MemoryStore({ clock }));
  const limiter = new RequestLimiter({ store, limits, failurePolicy, clock });
  closers.push(() => limiter.close());
  return { clock, store, limiter };
}

/** Waits (at most 5 s) until the client's bucket holds `tokens` again: the reward has landed. */
async function tokensBack(store: GlobalStore, tokens: number): Promise<void> {
  await vi.waitFor(async () => expect(await tokensIn(store, '127.0.0.1', [api])).toBe(tokens), {
    timeout: 5000,
  });
}

const xff = (address: string) => ({ headers: { 'x-forwarded-for': address } });

describe.each(ADAPTERS)('adapter contract: $name', (adapter) => {
  it('sends RateLimit-Policy and RateLimit as the draft defines them, and 429 with Retry-After = t at the limit', async () => {
    const { limiter } = requestLimiter();
    const { url, handled } = await adapter.start({ limiter });
    const replies = await requestMany(`${url}/items`, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(handled()).toBe(3);
    for (const reply of replies) {
      expect(parsePolicy(reply.headers['ratelimit-policy'])).toEqual([{ name: 'api', q: 3, w: 3 }]);
    }
    // r: whole tokens left; t: seconds until the next token (one per second), never until full.
    expect(replies.map((r) => parseRateLimit(r.headers.ratelimit))).toEqual([
      [{ name: 'api', r: 2, t: 1 }],
      [{ name: 'api', r: 1, t: 1 }],
      [{ name: 'api', r: 0, t: 1 }],
      [{ name: 'api', r: 0, t: 1 }],
    ]);
    const denied = replies[3]!;
    expect(denied.headers['retry-after']).toBe('1');
    expect(denied.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(denied.body)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Too many requests; retry in 1 s.',
    });
  });

  it('admits again once Retry-After has passed, and not a millisecond before', async () => {
    const { clock, limiter } = requestLimiter();
    const { url } = await adapter.start({ limiter });
    await requestMany(url, 3);
    clock.advance(500);
    expect(await request(url)).toMatchObject({ status: 429, headers: { 'retry-after': '1' } });
    clock.advance(499);
    expect((await request(url)).status).toBe(429);
    clock.advance(1);
    expect((await request(url)).status).toBe(200);
  });

  it('names in RateLimit the limit the decision names, with that limit’s r and t only', async () => {
    // 5 per second and 5 per minute: equal capacity; once both are empty the minute denies longest.
    const clock = new FakeClock(0);
    const limiter = localHttpLimiter({
      limits: [perSecond(5, { name: 'second' }), perMinute(5, { name: 'minute' })],
      clock,
    });
    const { url } = await adapter.start({ limiter });
    const replies = await requestMany(url, 6);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(parsePolicy(replies[0]!.headers['ratelimit-policy']).map((p) => [p.name, p.q, p.w])).toEqual([
      ['second', 5, 1],
      ['minute', 5, 60],
    ]);
    expect(parseRateLimit(replies[5]!.headers.ratelimit)).toEqual([{ name: 'minute', r: 0, t: 12 }]);
    expect(replies[5]!.headers['retry-after']).toBe('12');
    // 2 per second and 4 per minute (the case): the burst binds first, with its own t.
    const mixed = localHttpLimiter({
      limits: [perSecond(2, { name: 'burst' }), perMinute(4, { name: 'minute' })],
      clock,
    });
    const other = await adapter.start({ limiter: mixed });
    expect(parseRateLimit((await request(other.url)).headers.ratelimit)).toEqual([
      { name: 'burst', r: 1, t: 1 },
    ]);
  });

  it('counts HEAD against the GET route of its path', async () => {
    const { limiter } = requestLimiter();
    const { url, handled } = await adapter.start({ routes: { 'GET /report': limiter } });
    const heads = await requestMany(`${url}/report`, 20, { method: 'HEAD' });
    expect(heads.filter((r) => r.status === 200)).toHaveLength(3);
    expect(heads.filter((r) => r.status === 429)).toHaveLength(17);
    expect(handled()).toBe(3);
    expect((await request(`${url}/report`)).status).toBe(429);
  });

  it('gives routes their own limiter and cost, leaves other paths alone, and `false` exempts a path', async () => {
    const { limiter } = requestLimiter();
    const login = requestLimiter('closed', defineLimit({ capacity: 1, refillPerSecond: 0.1, name: 'login' }));
    const { url } = await adapter.start({
      routes: { 'POST /login': login.limiter, '/*': { limiter, cost: 2 }, '/other': false },
    });
    const logins = await requestMany(`${url}/login`, 2, { method: 'POST' });
    expect(logins.map((r) => [r.status, r.headers.ratelimit, r.headers['retry-after']])).toEqual([
      [200, '"login";r=0;t=10', undefined],
      [429, '"login";r=0;t=10', '10'],
    ]);
    // Cost 2 of a burst of 3: the second is refused with 1 token left; its Retry-After (1 s for
    // the second token) is not before t (the next token), as the draft asks.
    const reports = await requestMany(`${url}/report`, 2);
    expect(reports.map((r) => [r.status, r.headers.ratelimit, r.headers['retry-after']])).toEqual([
      [200, '"api";r=1;t=1', undefined],
      [429, '"api";r=1;t=1', '1'],
    ]);
    const free = await requestMany(`${url}/other`, 5);
    expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(free[0]!.headers.ratelimit).toBeUndefined();
  });

  it('counts keys apart, and skip and allowList let requests through untouched', async () => {
    const { limiter } = requestLimiter();
    const { url } = await adapter.start({
      limiter,
      key: (req) => String(req.headers['x-api-key']),
      skip: (req) => req.headers['x-health'] === '1',
    });
    await requestMany(url, 3, { headers: { 'x-api-key': 'a' } });
    expect((await request(url, { headers: { 'x-api-key': 'a' } })).status).toBe(429);
    expect((await request(url, { headers: { 'x-api-key': 'b' } })).status).toBe(200);
    const skipped = await request(url, { headers: { 'x-api-key': 'a', 'x-health': '1' } });
    expect(skipped).toMatchObject({ status: 200, headers: {} });
    expect(skipped.headers.ratelimit).toBeUndefined();

    const other = requestLimiter();
    const allowed = await adapter.start({ limiter: other.limiter, allowList: ['127.0.0.0/8'] });
    const replies = await requestMany(allowed.url, 5);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(replies[0]!.headers['ratelimit-policy']).toBeUndefined();
  });

  it('keys IPv6 clients by /56 by default, /64 when told, and IPv4-mapped addresses as IPv4', async () => {
    const { limiter } = requestLimiter('open', perMinute(5, { name: 'ip' }));
    const { url } = await adapter.start({ limiter, trustProxy: 1 });
    // 200 addresses of one /64 (and so of one /56): one client.
    let admitted = 0;
    for (let i = 1; i <= 200; i++) {
      if ((await request(url, xff(`2001:db8:0:ab01::${i.toString(16)}`))).status === 200) admitted++;
    }
    expect(admitted).toBe(5);
    expect((await request(url, xff('2001:db8:0:ab02::1'))).status).toBe(429); // same /56
    expect((await request(url, xff('2001:db8:0:ac00::1'))).status).toBe(200); // the next /56

    const per64 = requestLimiter('open', perMinute(1, { name: 'ip' }));
    const narrow = await adapter.start({ limiter: per64.limiter, trustProxy: 1, ipv6Subnet: 64 });
    expect((await request(narrow.url, xff('2001:db8:0:ab01::1'))).status).toBe(200);
    expect((await request(narrow.url, xff('2001:db8:0:ab01::2'))).status).toBe(429);
    expect((await request(narrow.url, xff('2001:db8:0:ab02::1'))).status).toBe(200);
    expect((await request(narrow.url, xff('203.0.113.9'))).status).toBe(200);
    expect((await request(narrow.url, xff('::ffff:203.0.113.9'))).status).toBe(429);
  });

  it('warns once when X-Forwarded-For arrives while nothing trusts it, and keys by the socket', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
    process.on('warning', onWarning);
    try {
      const { limiter } = requestLimiter();
      const { url } = await adapter.start({ limiter });
      const replies = await Promise.all(
        ['203.0.113.1', '203.0.113.2', '203.0.113.3', '203.0.113.4'].map((ip) => request(url, xff(ip))),
      );
      expect(replies.filter((r) => r.status === 429)).toHaveLength(1); // one key: the socket's
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      expect(warnings.filter((code) => code === 'TL_HTTP_UNTRUSTED_FORWARDED_FOR')).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('builds one limiter per distinct limit of a `limit` function (plans), with createLimiter', async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const plans = { free: perMinute(2, { name: 'free' }), pro: perMinute(4, { name: 'pro' }) };
    const built: string[] = [];
    const { url } = await adapter.start({
      limit: (req) => (req.headers['x-plan'] === 'pro' ? plans.pro : plans.free),
      createLimiter: (limits) => {
        built.push(limits.map((l) => l.name).join());
        const limiter = new RequestLimiter({ store, limits, failurePolicy: 'open', clock });
        closers.push(() => limiter.close());
        return limiter;
      },
      key: (req) => String(req.headers['x-user']),
    });
    const as = (plan: string, user: string) => ({ headers: { 'x-plan': plan, 'x-user': user } });
    expect((await requestMany(url, 3, as('free', 'ann'))).map((r) => r.status)).toEqual([200, 200, 429]);
    expect((await requestMany(url, 5, as('pro', 'bob'))).map((r) => r.status)).toEqual([
      200, 200, 200, 200, 429,
    ]);
    expect((await request(url, as('pro', 'cy'))).headers['ratelimit-policy']).toBe('"pro";q=4;w=60');
    expect(built).toEqual(['free', 'pro']);
  });

  it('fails open with RateLimit-Degraded and no RateLimit, and closed with 503 (or failClosedStatus)', async () => {
    const open = requestLimiter('open');
    const a = await adapter.start({ limiter: open.limiter });
    open.store.failing = true;
    for (const reply of await requestMany(a.url, 4)) {
      expect(reply.status).toBe(200);
      expect(reply.headers).toMatchObject({
        'ratelimit-policy': '"api";q=3;w=3',
        'ratelimit-degraded': 'policy=open',
      });
      expect(reply.headers.ratelimit).toBeUndefined();
    }
    const closed = requestLimiter('closed');
    const b = await adapter.start({ limiter: closed.limiter });
    const c = await adapter.start({ limiter: closed.limiter, failClosedStatus: 429 });
    closed.store.failing = true;
    const refused = await request(b.url);
    expect(refused.status).toBe(503);
    expect(refused.headers).toMatchObject({ 'retry-after': '1', 'ratelimit-degraded': 'policy=closed' });
    expect(JSON.parse(refused.body)).toMatchObject({ title: 'Service Unavailable', status: 503 });
    expect((await request(c.url)).status).toBe(429);
  });

  it('sends the legacy headers when asked, and no standard ones with standardHeaders: false', async () => {
    const { limiter } = requestLimiter();
    const { url } = await adapter.start({ limiter, legacyHeaders: true, standardHeaders: false });
    const replies = await requestMany(url, 4);
    expect(replies[0]!.headers).toMatchObject({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '2',
      'x-ratelimit-reset': '1',
    });
    expect(replies[3]!.headers).toMatchObject({ 'x-ratelimit-remaining': '0', 'retry-after': '1' });
    expect(replies[3]!.headers.ratelimit).toBeUndefined();
    expect(replies[3]!.headers['ratelimit-policy']).toBeUndefined();
  });

  it('writes the denial as told: statusCode, message, problem, handler; calls onExceeded', async () => {
    const denials: number[] = [];
    const text = requestLimiter();
    const a = await adapter.start({
      limiter: text.limiter,
      statusCode: 503,
      message: 'Slow down.',
      onExceeded: (_req, denial) => denials.push(denial.decision.retryAfterMs),
    });
    const [, , , refused] = await requestMany(a.url, 4);
    expect(refused).toMatchObject({ status: 503, body: 'Slow down.' });
    expect(refused!.headers['content-type']).toMatch(/^text\/plain/);
    expect(denials).toEqual([1000]);

    const json = requestLimiter();
    const b = await adapter.start({
      limiter: json.limiter,
      message: (_req, { retryAfterSeconds }) => ({ error: 'rate_limited', wait: retryAfterSeconds }),
    });
    const [, , , byFunction] = await requestMany(b.url, 4);
    expect(JSON.parse(byFunction!.body)).toEqual({ error: 'rate_limited', wait: 1 });
    expect(byFunction!.headers['content-type']).toMatch(/^application\/json/);

    const problem = requestLimiter();
    const c = await adapter.start({
      limiter: problem.limiter,
      problem: { type: 'https://example.com/limit' },
    });
    const [, , , typed] = await requestMany(c.url, 4);
    expect(JSON.parse(typed!.body)).toMatchObject({ type: 'https://example.com/limit', status: 429 });

    const custom = requestLimiter();
    const d = await adapter.start({ limiter: custom.limiter }, { customHandler: true });
    const [, , , handled] = await requestMany(d.url, 4);
    expect(handled).toMatchObject({ status: CUSTOM.status, body: `${CUSTOM.body} 429` });
    expect(handled!.headers['retry-after']).toBe('1'); // the headers are set before the handler
  });

  it('puts the decision on the request as rateLimit, or as requestPropertyName says', async () => {
    const { limiter } = requestLimiter();
    const a = await adapter.start({ limiter });
    expect(JSON.parse((await request(a.url)).body).rateLimit).toMatchObject({
      allowed: true,
      remaining: 2,
      limit: 3,
      name: 'api',
      key: '127.0.0.1',
      cost: 1,
    });
    const b = await adapter.start({ limiter, requestPropertyName: false });
    expect(JSON.parse((await request(b.url)).body).rateLimit).toBeNull();
  });

  it('gives the tokens back by the response status with skipFailedRequests / skipSuccessfulRequests', async () => {
    const failed = requestLimiter();
    const a = await adapter.start({ limiter: failed.limiter, skipFailedRequests: true });
    // Failures (500, 404) are given back; so 10 of them leave the whole burst for successes.
    for (const status of [500, 404, 500, 500, 400, 500, 500, 503, 500, 500]) {
      expect((await request(`${a.url}/status/${status}`)).status).toBe(status);
      await tokensBack(failed.store, 3);
    }
    expect((await requestMany(`${a.url}/status/200`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 429]);

    const succeeded = requestLimiter();
    const b = await adapter.start({ limiter: succeeded.limiter, skipSuccessfulRequests: true });
    const flip = [200, 200, 200, 200, 200, 401, 401, 401, 401];
    const got: number[] = [];
    for (const status of flip) {
      got.push((await request(`${b.url}/status/${status}`)).status);
      if (status === 200) await tokensBack(succeeded.store, 3);
    }
    expect(got).toEqual([200, 200, 200, 200, 200, 401, 401, 401, 429]);
  });

  it('takes the synchronous path of the two-tier limiter: tryConsume, and consume only when it cannot answer', async () => {
    const clock = new FakeClock(0);
    const limiter = exactTieredLimiter(defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' }), clock);
    closers.push(() => limiter.close());
    const calls = watchLimiterCalls(limiter);
    const { url } = await adapter.start({ limiter });
    expect((await requestMany(url, 11)).map((r) => r.status)).toEqual([...Array(10).fill(200), 429]);
    // Every request asks tryConsume first; a request it answered (`hit`) never reaches consume.
    expect(calls.join(' ')).toMatch(/^(hit|miss consume)( (hit|miss consume))*$/);
    expect(calls.filter((call) => call === 'hit').length).toBeGreaterThan(0);
  });

  it('passes an error from a key function to the framework, as a 500', async () => {
    const { limiter } = requestLimiter();
    const { url } = await adapter.start({
      limiter,
      key: () => {
        throw new Error('no key');
      },
    });
    expect((await request(url)).status).toBe(500);
  });

  it('compares the allowList with the forwarded client behind a trusted proxy, not with the proxy', async () => {
    const { limiter } = requestLimiter();
    // The socket is 127.0.0.1 (the proxy); the client it forwards is 203.0.113.5.
    const clients = await adapter.start({ limiter, trustProxy: 1, allowList: ['203.0.113.0/24'] });
    const listed = await requestMany(clients.url, 5, xff('203.0.113.5'));
    expect(listed.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(listed[0]!.headers['ratelimit-policy']).toBeUndefined();
    const unlisted = await requestMany(clients.url, 4, xff('198.51.100.7'));
    expect(unlisted.map((r) => r.status)).toEqual([200, 200, 200, 429]);

    // Listing the proxy's address lets through no client it forwards.
    const other = requestLimiter();
    const proxy = await adapter.start({ limiter: other.limiter, trustProxy: 1, allowList: ['127.0.0.0/8'] });
    expect((await requestMany(proxy.url, 4, xff('198.51.100.7'))).map((r) => r.status)).toEqual([
      200, 200, 200, 429,
    ]);
  });

  it('lets no forged X-Forwarded-For reach the allowList while trustProxy is 0', async () => {
    for (const trustProxy of [undefined, 0]) {
      const { limiter } = requestLimiter();
      const { url } = await adapter.start({ limiter, trustProxy, allowList: ['203.0.113.0/24'] });
      const replies = await requestMany(url, 4, xff('203.0.113.5'));
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
      expect(replies[0]!.headers['ratelimit-policy']).toBe('"api";q=3;w=3');
    }
  });

  it('keys by the X-Forwarded-For entry trustProxy hops from the right; what the client wrote never counts', async () => {
    // The client wrote `forged`; its proxy appended 203.0.113.9 (the client), a second proxy 10.0.0.2.
    const chain = 'forged, 203.0.113.9, 10.0.0.2';
    const keyOf = async (url: string, forwarded: string) =>
      JSON.parse((await request(url, xff(forwarded))).body).rateLimit.key;
    const one = await adapter.start({ limiter: requestLimiter().limiter, trustProxy: 1 });
    expect(await keyOf(one.url, chain)).toBe('10.0.0.2');
    const two = await adapter.start({ limiter: requestLimiter().limiter, trustProxy: 2 });
    expect(await keyOf(two.url, chain)).toBe('203.0.113.9');
    // Whatever the client writes in front, and however many entries, it stays one key and one
    // bucket: with the request above, these empty the burst of 3.
    const forgeries = ['198.51.100.1, 203.0.113.9, 10.0.0.2', 'a, b, c, 203.0.113.9, 10.0.0.2'];
    const keys = [];
    for (const forwarded of forgeries) keys.push(await keyOf(two.url, forwarded));
    expect(keys).toEqual(['203.0.113.9', '203.0.113.9']);
    expect((await request(two.url, xff('203.0.113.9, 10.0.0.2'))).status).toBe(429);
  });

  it('gives back the tokens of a request whose connection closed before the response, as a failure', async () => {
    for (const option of ['skipFailedRequests', 'skipSuccessfulRequests'] as const) {
      const { store, limiter } = requestLimiter();
      const reward = vi.spyOn(limiter, 'reward');
      const app = await adapter.start({ limiter, [option]: true });
      const controller = new AbortController();
      const pending = fetch(`${app.url}/stall`, { signal: controller.signal }).catch(() => undefined);
      await vi.waitFor(() => expect(app.handled()).toBe(1), { timeout: 5000 });
      controller.abort();
      await pending;
      await vi.waitFor(() => expect(app.abandoned()).toBe(1), { timeout: 5000 });
      if (option === 'skipFailedRequests') {
        expect(reward).toHaveBeenCalledExactlyOnceWith('127.0.0.1', 1);
        await tokensBack(store, 3);
      } else {
        // A success is what skipSuccessfulRequests gives back; an abandoned request is none.
        expect(reward).not.toHaveBeenCalled();
        expect(await tokensIn(store, '127.0.0.1', [api])).toBe(2);
      }
    }
  });

  it('never gives back a decision of the failure policy (the store down), with either skip option', async () => {
    for (const failurePolicy of ['open', 'local'] as const) {
      const clock = new FakeClock(0);
      const store = new FlakyStore(new MemoryStore({ clock }));
      const limiter = new RequestLimiter({
        store,
        limits: api,
        failurePolicy,
        fallback: { instances: 1 },
        clock,
      });
      closers.push(() => limiter.close());
      const reward = vi.spyOn(limiter, 'reward');
      const failed = await adapter.start({ limiter, skipFailedRequests: true });
      const succeeded = await adapter.start({ limiter, skipSuccessfulRequests: true });
      store.failing = true;
      const degraded = [
        await request(`${failed.url}/status/500`),
        await request(`${succeeded.url}/status/200`),
      ];
      expect(degraded.map((r) => [r.status, r.headers['ratelimit-degraded']])).toEqual([
        [500, `policy=${failurePolicy}`],
        [200, `policy=${failurePolicy}`],
      ]);
      // With the store back, the same two requests are given back: the only rewards there are.
      store.failing = false;
      await request(`${failed.url}/status/500`);
      await request(`${succeeded.url}/status/200`);
      await vi.waitFor(() => expect(reward.mock.calls.length).toBeGreaterThanOrEqual(2), { timeout: 5000 });
      expect(reward.mock.calls).toEqual([
        ['127.0.0.1', 1],
        ['127.0.0.1', 1],
      ]);
    }
  });

  it('builds apart limits of the same names but other numbers, and once per set of equal limits', async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const built: string[] = [];
    // Fresh objects on every request: the limiter is found by the limits' value, not their identity.
    const plans: Record<string, () => LimitSpec> = {
      small: () => defineLimit({ capacity: 2, refillPerSecond: 1, name: 'plan' }),
      large: () => defineLimit({ capacity: 4, refillPerSecond: 1, name: 'plan' }),
      slow: () => defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'plan' }),
    };
    const { url } = await adapter.start({
      limit: (req) => plans[String(req.headers['x-plan'])]!(),
      createLimiter: (limits) => {
        built.push(limits.map((l) => `${l.name} ${l.capacity} ${l.refillPerSecond}`).join());
        const limiter = new RequestLimiter({ store, limits, failurePolicy: 'open', clock });
        closers.push(() => limiter.close());
        return limiter;
      },
      key: (req) => String(req.headers['x-user']),
    });
    const as = (plan: string, user: string) => ({ headers: { 'x-plan': plan, 'x-user': user } });
    const small = await requestMany(url, 3, as('small', 'ann'));
    const large = await requestMany(url, 5, as('large', 'bob'));
    const slow = await requestMany(url, 3, as('slow', 'cy'));
    expect(small.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(large.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    expect(slow.map((r) => r.status)).toEqual([200, 200, 429]);
    expect([small[0], large[0], slow[0]].map((r) => r!.headers['ratelimit-policy'])).toEqual([
      '"plan";q=2;w=2',
      '"plan";q=4;w=4',
      '"plan";q=2;w=4',
    ]);
    expect(built).toEqual(['plan 2 1', 'plan 4 1', 'plan 2 0.5']);
  });

  describe('routes: no spelling of a path dodges its limit', () => {
    const login = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'login' });

    /** The `RateLimit-Policy` name of each reply (`-` for none) and its status, one request at a time. */
    async function limitsOf(url: string, paths: readonly string[], method = 'GET') {
      const seen: string[] = [];
      for (const path of paths) {
        const reply = await request(`${url}${path}`, { method });
        const policy = reply.headers['ratelimit-policy'];
        seen.push(
          `${policy === undefined ? '-' : parsePolicy(policy)[0]!.name} ${reply.status === 429 ? 429 : 'ok'}`,
        );
      }
      return seen;
    }

    it('a path', async () => {
      const { limiter } = requestLimiter('open', login);
      const { url } = await adapter.start({ routes: { '/login': limiter } });
      const spellings = ['/Login/', '//login', '/%6Cogin', '/LOGIN//?next=/', '/log%69n/'];
      expect(await limitsOf(url, spellings)).toEqual([
        'login ok',
        'login ok',
        'login ok',
        'login 429',
        'login 429',
      ]);
      expect(await limitsOf(url, ['/login/x', '/logins', '/other'])).toEqual(['- ok', '- ok', '- ok']);
    });

    it('a METHOD /path', async () => {
      const { limiter } = requestLimiter('open', login);
      const { url } = await adapter.start({ routes: { 'POST /login': limiter } });
      const spellings = ['/Login/', '//login', '/%6Cogin', '/LOGIN?x=1'];
      expect(await limitsOf(url, spellings, 'POST')).toEqual([
        'login ok',
        'login ok',
        'login ok',
        'login 429',
      ]);
      expect(await limitsOf(url, ['/login', '/Login/'])).toEqual(['- ok', '- ok']); // GET: not the route
    });

    it('a /prefix/*', async () => {
      const { limiter } = requestLimiter('open', login);
      const { url } = await adapter.start({ routes: { '/api/*': limiter } });
      const spellings = ['/API/items', '//api//items', '/%61pi/items/', '/Api'];
      expect(await limitsOf(url, spellings)).toEqual(['login ok', 'login ok', 'login ok', 'login 429']);
      expect(await limitsOf(url, ['/apix', '/items'])).toEqual(['- ok', '- ok']);
    });

    it('the most specific name wins, however the request spells the path', async () => {
      const named = (name: string) => requestLimiter('open', perMinute(100, { name })).limiter;
      // The broadest names first: the order they are written in does not decide.
      const { url } = await adapter.start({
        routes: {
          '/*': named('all'),
          '/api/*': named('api'),
          '/api/login': named('path'),
          'POST /api/login': named('post'),
        },
      });
      expect(await limitsOf(url, ['/items', '/api/items', '/API/Login/', '/api/login/x'])).toEqual([
        'all ok',
        'api ok',
        'path ok',
        'api ok',
      ]);
      expect(await limitsOf(url, ['//api/LOGIN', '/api/login'], 'POST')).toEqual(['post ok', 'post ok']);
    });
  });

  it('refuses unknown options, naming what to use instead', () => {
    const { limiter } = requestLimiter();
    const refuse = (options: Record<string, unknown>) => () => adapter.make({ limiter, ...options } as never);
    expect(refuse({ windowMs: 60_000 })).toThrow(/`windowMs`.*perMinute/);
    expect(refuse({ max: 5 })).toThrow(/`max`.*limiter/);
    expect(refuse({ keyGenerator: () => 'k' })).toThrow(/`keyGenerator`.*`key`/);
    expect(refuse({ skipFaildRequests: true })).toThrow(/did you mean `skipFailedRequests`/);
    expect(refuse({ standardHeaders: 'draft-7' })).toThrow(/`standardHeaders`.*draft-11/);
    expect(refuse({ handler: 42 })).toThrow(/`handler`/);
    expect(() => adapter.make({ limit: 100 } as never)).toThrow(/`limit`.*perMinute/);
  });
});
