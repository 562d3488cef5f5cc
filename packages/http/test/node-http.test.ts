import { defineLimit } from '@tiered-limiter/core';
import { createRateLimit, type RateLimitOptions } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock, FlakyStore, type Listening, request, requestMany, serve } from './helpers.js';

// A burst of 3, refilled at 1 per second: w = 3.
const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const POLICY = '"api";q=3;w=3';
const TOO_MANY = {
  type: 'about:blank',
  title: 'Too Many Requests',
  status: 429,
  detail: 'Too many requests; retry in 1 s.',
};

const open: Listening[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

function setup(failurePolicy: 'open' | 'closed' = 'open') {
  const clock = new FakeClock(0);
  const store = new FlakyStore(new MemoryStore({ clock }));
  const limiter = new RequestLimiter({ store, limits: api, failurePolicy, clock });
  closers.push(() => limiter.close());
  return { clock, store, limiter };
}

async function start(options: RateLimitOptions): Promise<string> {
  const rateLimit = createRateLimit(options);
  const server = await serve(async (req, res) => {
    if (!(await rateLimit(req, res))) return;
    res.setHeader('Content-Type', 'text/plain');
    res.end('ok');
  });
  open.push(server);
  return server.url;
}

describe('createRateLimit (Node http)', () => {
  it('sets the headers on every answer and answers 429 at the limit, not before', async () => {
    const { limiter } = setup();
    const url = await start({ limiter });
    const replies = await requestMany(url, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies.slice(0, 3).map((r) => r.headers)).toEqual([
      { 'content-type': 'text/plain', 'ratelimit-policy': POLICY, ratelimit: '"api";r=2;t=1' },
      { 'content-type': 'text/plain', 'ratelimit-policy': POLICY, ratelimit: '"api";r=1;t=2' },
      { 'content-type': 'text/plain', 'ratelimit-policy': POLICY, ratelimit: '"api";r=0;t=3' },
    ]);
    expect(replies[0]!.body).toBe('ok');
    expect(replies[3]!.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': POLICY,
      ratelimit: '"api";r=0;t=1',
      'retry-after': '1',
    });
    expect(JSON.parse(replies[3]!.body)).toEqual(TOO_MANY);
  });

  it('admits again once Retry-After has passed, and not a millisecond before', async () => {
    const { clock, limiter } = setup();
    const url = await start({ limiter });
    await requestMany(url, 3);
    clock.advance(500);
    const early = await request(url);
    expect(early).toMatchObject({ status: 429, headers: { 'retry-after': '1' } });
    clock.advance(499);
    expect((await request(url)).status).toBe(429);
    clock.advance(1);
    expect((await request(url)).status).toBe(200);
    expect((await request(url)).status).toBe(429);
  });

  it('counts each client key apart', async () => {
    const { limiter } = setup();
    const url = await start({ limiter, key: (req) => String(req.headers['x-api-key']) });
    await requestMany(url, 3, { headers: { 'x-api-key': 'a' } });
    expect((await request(url, { headers: { 'x-api-key': 'a' } })).status).toBe(429);
    expect((await request(url, { headers: { 'x-api-key': 'b' } })).status).toBe(200);
  });

  it('says so in RateLimit-Degraded when the store fails and the open policy admits', async () => {
    const { store, limiter } = setup('open');
    const url = await start({ limiter });
    store.failing = true;
    const replies = await requestMany(url, 5);
    for (const reply of replies) {
      expect(reply.status).toBe(200);
      expect(reply.headers).toEqual({
        'content-type': 'text/plain',
        'ratelimit-policy': POLICY,
        'ratelimit-degraded': 'policy=open',
      });
    }
  });

  it('answers 503 with Retry-After when the store fails and the closed policy refuses', async () => {
    const { store, limiter } = setup('closed');
    const url = await start({ limiter });
    store.failing = true;
    const reply = await request(url);
    expect(reply.status).toBe(503);
    expect(reply.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': POLICY,
      'retry-after': '1',
      'ratelimit-degraded': 'policy=closed',
    });
    expect(JSON.parse(reply.body)).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'This route is unavailable for a moment; retry in 1 s.',
    });
    store.failing = false;
  });

  it('answers 429 for a closed-policy denial when failClosedStatus says so', async () => {
    const { store, limiter } = setup('closed');
    const url = await start({ limiter, failClosedStatus: 429 });
    store.failing = true;
    expect(await request(url)).toMatchObject({
      status: 429,
      headers: { 'ratelimit-degraded': 'policy=closed' },
    });
  });

  it('adds the legacy headers on request', async () => {
    const { limiter } = setup();
    const url = await start({ limiter, legacyHeaders: true });
    const replies = await requestMany(url, 4);
    expect(replies[0]!.headers).toMatchObject({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '2',
      'x-ratelimit-reset': '1',
    });
    expect(replies[3]!.headers).toMatchObject({
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1',
    });
  });

  it('writes the problem document as told: a partial one laid over the default, or a function', async () => {
    const { limiter } = setup();
    const merged = await start({
      limiter,
      problem: { type: 'https://example.com/problems/rate-limited', plan: 'free' },
    });
    const [, , , reply] = await requestMany(merged, 4);
    expect(JSON.parse(reply!.body)).toEqual({
      ...TOO_MANY,
      type: 'https://example.com/problems/rate-limited',
      plan: 'free',
    });

    const other = setup();
    const custom = await start({
      limiter: other.limiter,
      problem: ({ status, retryAfterSeconds }) => ({ title: 'Slow down', status, wait: retryAfterSeconds }),
    });
    const [, , , mine] = await requestMany(custom, 4);
    expect(JSON.parse(mine!.body)).toEqual({ title: 'Slow down', status: 429, wait: 1 });
  });

  it('gives each route its own limiter and cost, and leaves other paths alone', async () => {
    const { clock, limiter } = setup();
    const login = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: defineLimit({ capacity: 1, refillPerSecond: 0.1, name: 'login' }),
      failurePolicy: 'closed',
      clock,
    });
    closers.push(() => login.close());
    const url = await start({ routes: { 'POST /login': login, '/api/*': { limiter, cost: 2 } } });

    const logins = await requestMany(`${url}/login`, 2, { method: 'POST' });
    expect(logins.map((r) => [r.status, r.headers.ratelimit, r.headers['retry-after']])).toEqual([
      [200, '"login";r=0;t=10', undefined],
      [429, '"login";r=0;t=10', '10'],
    ]);
    expect(logins[0]!.headers['ratelimit-policy']).toBe('"login";q=1;w=10');

    // Cost 2 of a burst of 3: the second is refused with 1 token left, which RateLimit says.
    const reports = await requestMany(`${url}/api/report`, 2);
    expect(reports.map((r) => [r.status, r.headers.ratelimit, r.headers['retry-after']])).toEqual([
      [200, '"api";r=1;t=2', undefined],
      [429, '"api";r=1;t=1', '1'],
    ]);

    const free = await requestMany(`${url}/about`, 5);
    expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(free[0]!.headers).toEqual({ 'content-type': 'text/plain' });
  });

  it('uses the two-tier limiter, its synchronous path first', async () => {
    const clock = new FakeClock(0);
    const store = new FlakyStore(new MemoryStore({ clock }));
    const limiter = new TieredLimiter({
      store,
      limits: api,
      failurePolicy: 'open',
      clock,
      instances: 1,
    });
    closers.push(() => limiter.close());
    const url = await start({ limiter });
    const replies = await requestMany(url, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies[3]!.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': POLICY,
      ratelimit: '"api";r=0;t=1',
      'retry-after': '1',
    });
    expect(limiter.stats().decisions.lease).toBeGreaterThan(0);
  });

  it('refuses options it cannot work with, naming them', () => {
    expect(() => createRateLimit({})).toThrow(/`limiter`/);
    expect(() => createRateLimit({ limiter: {} as never })).toThrow(/`limiter`/);
    const { limiter } = setup();
    expect(() => createRateLimit({ limiter, trustProxy: -1 })).toThrow(/`trustProxy`/);
    expect(() => createRateLimit({ limiter, failClosedStatus: 500 as never })).toThrow(/`failClosedStatus`/);
    expect(() => createRateLimit({ limiter, degradedHeader: 'bad header' })).toThrow(/`degradedHeader`/);
  });
});
