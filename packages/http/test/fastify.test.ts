import { defineLimit } from '@tiered-limiter/core';
import { clientIp, fastifyRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock, FlakyStore, request, requestMany } from './helpers.js';

const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const report = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'report' });

const apps: FastifyInstance[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function start(app: FastifyInstance): Promise<string> {
  apps.push(app);
  return app.listen({ host: '127.0.0.1', port: 0 });
}

describe('fastifyRateLimit', () => {
  it('limits every route as an onRequest hook, headers on each answer, 429 at the limit', async () => {
    const clock = new FakeClock(0);
    const limiter = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: api,
      failurePolicy: 'open',
      clock,
    });
    closers.push(() => limiter.close());
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({ limiter }));
    app.get('/items', async () => ({ items: [] }));
    const url = await start(app);

    const replies = await requestMany(`${url}/items`, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies[2]!.headers).toEqual({
      'content-type': 'application/json; charset=utf-8',
      'ratelimit-policy': '"api";q=3;w=3',
      ratelimit: '"api";r=0;t=3',
    });
    expect(replies[3]!.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': '"api";q=3;w=3',
      ratelimit: '"api";r=0;t=1',
      'retry-after': '1',
    });
    expect(JSON.parse(replies[3]!.body)).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: 'Too many requests; retry in 1 s.',
    });
    clock.advance(1000);
    expect((await request(`${url}/items`)).status).toBe(200);
  });

  it('limits one route with a weighted cost, keyed by route pattern', async () => {
    const clock = new FakeClock(0);
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: report,
      failurePolicy: 'open',
      clock,
      instances: 1,
    });
    closers.push(() => limiter.close());
    const app = Fastify();
    const limit = fastifyRateLimit<FastifyRequest>({
      limiter,
      key: (r) => `${clientIp(r.raw)} ${r.routeOptions.url}`,
      cost: (r) => Number((r.query as { pages?: string }).pages ?? 1),
    });
    app.get('/report/:id', { onRequest: limit }, async () => ({ ok: true }));
    app.get('/free', async () => 'free');
    const url = await start(app);

    const replies = [
      await request(`${url}/report/1?pages=4`),
      await request(`${url}/report/2?pages=4`),
      await request(`${url}/report/3?pages=4`),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    // 2 tokens left, 4 wanted, 1 per second: 2 s. (How many of the 2 sit in this process's lease is the
    // two-tier limiter's business, so `r` is not pinned.)
    expect(replies[2]!.headers).toMatchObject({ 'retry-after': '2' });
    expect(replies[2]!.headers.ratelimit).toMatch(/^"report";r=[0-2];t=2$/);
    expect((await request(`${url}/report/4?pages=2`)).status).toBe(200);
    expect((await requestMany(`${url}/free`, 12)).every((r) => r.status === 200)).toBe(true);
  });

  it('answers 503 with the degraded header when the store fails and the policy is closed', async () => {
    const clock = new FakeClock(0);
    const store = new FlakyStore(new MemoryStore({ clock }));
    const limiter = new RequestLimiter({ store, limits: api, failurePolicy: 'closed', clock });
    closers.push(() => limiter.close());
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({ limiter, legacyHeaders: true }));
    app.get('/', async () => 'ok');
    const url = await start(app);
    store.failing = true;
    const reply = await request(url);
    expect(reply.status).toBe(503);
    expect(reply.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': '"api";q=3;w=3',
      'retry-after': '1',
      'x-ratelimit-limit': '3',
      'ratelimit-degraded': 'policy=closed',
    });
  });

  it('sends an error from a cost beyond the capacity to the error handler', async () => {
    const limiter = new RequestLimiter({ store: new MemoryStore(), limits: api, failurePolicy: 'open' });
    closers.push(() => limiter.close());
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({ limiter, cost: () => 4 }));
    app.get('/', async () => 'ok');
    const url = await start(app);
    const reply = await request(url);
    expect(reply.status).toBe(500);
    expect(JSON.parse(reply.body)).toMatchObject({ code: 'ERR_TL_COST_EXCEEDS_CAPACITY' });
  });
});
