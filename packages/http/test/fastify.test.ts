/**
 * What only Fastify has: per-route `config.rateLimit`, the route's own `onRequest`, its error handler,
 * and a callback hook that can call `done()` before it returns.
 */
import { defineLimit, type LimitSpec, perSecond } from '@tiered-limiter/core';
import { clientIp, fastifyRateLimit, type HttpLimiter, ipKey, type RouteLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import {
  exactTieredLimiter,
  expectSynchronousWhenLeased,
  parseRateLimit,
  request,
  requestMany,
  watchLimiterCalls,
} from './helpers.js';
import { closeAfterEach } from './teardown.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RouteLimit<FastifyRequest> | false;
  }
}

const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const report = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'report' });

const apps: FastifyInstance[] = [];
const closers: (() => Promise<void>)[] = [];
closeAfterEach(apps, closers);

async function start(app: FastifyInstance): Promise<string> {
  apps.push(app);
  return app.listen({ host: '127.0.0.1', port: 0 });
}

function requestLimiter(limits: LimitSpec, clock = new FakeClock(0)): HttpLimiter {
  const limiter = new RequestLimiter({
    store: new MemoryStore({ clock }),
    limits,
    failurePolicy: 'open',
    clock,
  });
  closers.push(() => limiter.close());
  return limiter;
}

describe('fastifyRateLimit', () => {
  it("lets a route's config.rateLimit replace the hook's limit, or switch it off", async () => {
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit<FastifyRequest>({ limiter: requestLimiter(api) }));
    const login = requestLimiter(defineLimit({ capacity: 1, refillPerSecond: 0.1, name: 'login' }));
    let handled = 0;
    app.get('/login', { config: { rateLimit: { limiter: login, key: () => 'everyone' } } }, async () => {
      handled++;
      return 'login';
    });
    app.get('/health', { config: { rateLimit: false } }, async () => 'ok');
    app.get('/items', async () => 'items');
    const url = await start(app);

    // HEAD (Fastify's automatic HEAD route) counts against the GET route's own limit.
    const logins = [await request(`${url}/login`, { method: 'HEAD' }), await request(`${url}/login`)];
    expect(logins.map((r) => r.status)).toEqual([200, 429]);
    expect(parseRateLimit(logins[1]!.headers.ratelimit)).toEqual([{ name: 'login', r: 0, t: 10 }]);
    expect(handled).toBe(1);
    const health = await requestMany(`${url}/health`, 5);
    expect(health.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(health[0]!.headers.ratelimit).toBeUndefined();
    expect((await requestMany(`${url}/items`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 429]);
  });

  it('limits only routes with a config when the hook has no limit of its own; a bad config is a 500', async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const app = Fastify();
    app.addHook(
      'onRequest',
      fastifyRateLimit<FastifyRequest>({
        createLimiter: (limits) => {
          const limiter = new RequestLimiter({ store, limits, failurePolicy: 'open', clock });
          closers.push(() => limiter.close());
          return limiter;
        },
      }),
    );
    app.get('/a', { config: { rateLimit: { limit: perSecond(1, { name: 'a' }) } } }, async () => 'a');
    app.get('/bad', { config: { rateLimit: { max: 5 } as never } }, async () => 'bad');
    app.get('/free', async () => 'free');
    const url = await start(app);
    expect((await requestMany(`${url}/a`, 2)).map((r) => r.status)).toEqual([200, 429]);
    expect((await requestMany(`${url}/free`, 3)).map((r) => r.status)).toEqual([200, 200, 200]);
    const bad = await request(`${url}/bad`);
    expect(bad.status).toBe(500);
    expect(JSON.parse(bad.body)).toMatchObject({ code: 'ERR_TL_CONFIG' });
    expect(JSON.parse(bad.body).message).toMatch(/`config\.rateLimit \(GET \/bad\)\.max`/);
  });

  it("limits one route in its own onRequest, weighted, keyed by the route's pattern", async () => {
    const clock = new FakeClock(0);
    const limiter = exactTieredLimiter(report, clock);
    closers.push(() => limiter.close());
    const app = Fastify();
    const limit = fastifyRateLimit<FastifyRequest>({
      limiter,
      key: (r) => `${ipKey(clientIp(r.raw))} ${r.routeOptions.url}`,
      cost: (r) => Number((r.query as { pages?: string }).pages ?? 1),
    });
    app.get('/report/:id', { onRequest: limit }, async () => ({ ok: true }));
    const url = await start(app);
    const replies = [
      await request(`${url}/report/1?pages=4`),
      await request(`${url}/report/2?pages=4`),
      await request(`${url}/report/3?pages=4`),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    // 2 tokens left, 4 wanted, 1 per second: Retry-After 2 s; t is the next token, 1 s. (How many of
    // the 2 sit in this process's lease is the two-tier limiter's business, so `r` is not pinned.)
    expect(replies[2]!.headers['retry-after']).toBe('2');
    expect(replies[2]!.headers.ratelimit).toMatch(/^"report";r=[0-2];t=1$/);
    expect((await request(`${url}/report/4?pages=2`)).status).toBe(200);
  });

  it('calls done() before returning when the lease answers, and consume only when it cannot', async () => {
    const clock = new FakeClock(0);
    const limiter = exactTieredLimiter(defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' }), clock);
    closers.push(() => limiter.close());
    const calls = watchLimiterCalls(limiter);
    const hook = fastifyRateLimit<FastifyRequest>({ limiter });
    // Per request: whether the lease answered, and whether done() ran inside the hook's call.
    const seen: string[] = [];
    const app = Fastify();
    app.addHook('onRequest', (request, reply, done) => {
      const before = calls.length;
      let returned = false;
      hook(request, reply, (error) => {
        seen.push(`${calls[before]} ${returned ? 'later' : 'at once'}`);
        done(error);
      });
      returned = true;
    });
    app.get('/', async () => 'ok');
    const url = await start(app);
    expect((await requestMany(url, 10)).map((r) => r.status)).toEqual(Array(10).fill(200));
    expectSynchronousWhenLeased(seen, calls, 10);
  });

  it('sends an error from a cost beyond the capacity to the error handler', async () => {
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({ limiter: requestLimiter(api), cost: () => 4 }));
    app.get('/', async () => 'ok');
    const url = await start(app);
    const reply = await request(url);
    expect(reply.status).toBe(500);
    expect(JSON.parse(reply.body)).toMatchObject({ code: 'ERR_TL_COST_EXCEEDS_CAPACITY' });
  });
});
