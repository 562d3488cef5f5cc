import { createServer } from 'node:http';
import { defineLimit } from '@tiered-limiter/core';
import { expressRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import express, { type NextFunction, type Request, type Response } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock, FlakyStore, type Listening, listen, request, requestMany } from './helpers.js';

const api = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'api' });
const login = defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'login' });

const open: Listening[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function start(app: express.Express): Promise<string> {
  const server = await listen(createServer(app));
  open.push(server);
  return server.url;
}

describe('expressRateLimit', () => {
  it('limits every route with app.use, headers on each answer, 429 at the limit', async () => {
    const clock = new FakeClock(0);
    const limiter = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: api,
      failurePolicy: 'open',
      clock,
    });
    closers.push(() => limiter.close());
    const app = express();
    app.use(expressRateLimit({ limiter }));
    app.get('/items', (_req, res) => {
      res.json({ items: [] });
    });
    const url = await start(app);

    const replies = await requestMany(`${url}/items`, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(replies[0]!.headers).toEqual({
      'content-type': 'application/json; charset=utf-8',
      'ratelimit-policy': '"api";q=3;w=3',
      ratelimit: '"api";r=2;t=1',
    });
    expect(replies[3]!.headers).toEqual({
      'content-type': 'application/problem+json',
      'ratelimit-policy': '"api";q=3;w=3',
      ratelimit: '"api";r=0;t=1',
      'retry-after': '1',
    });
    expect(JSON.parse(replies[3]!.body)).toMatchObject({ status: 429, title: 'Too Many Requests' });
    clock.advance(1000);
    expect((await request(`${url}/items`)).status).toBe(200);
  });

  it('limits one route when mounted on it, keyed by what Express knows', async () => {
    const clock = new FakeClock(0);
    const store = new FlakyStore(new MemoryStore({ clock }));
    const limiter = new RequestLimiter({ store, limits: login, failurePolicy: 'closed', clock });
    closers.push(() => limiter.close());
    const app = express();
    app.post(
      '/login',
      expressRateLimit<Request>({ limiter, key: (req) => `${req.ip} ${req.route?.path}` }),
      (_req, res) => {
        res.send('welcome');
      },
    );
    app.get('/free', (_req, res) => {
      res.send('free');
    });
    const url = await start(app);

    const logins = await requestMany(`${url}/login`, 3, { method: 'POST' });
    expect(logins.map((r) => [r.status, r.headers['retry-after']])).toEqual([
      [200, undefined],
      [200, undefined],
      [429, '2'],
    ]);
    expect((await requestMany(`${url}/free`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 200]);

    store.failing = true;
    expect(await request(`${url}/login`, { method: 'POST' })).toMatchObject({
      status: 503,
      headers: { 'ratelimit-degraded': 'policy=closed', 'retry-after': '1' },
    });
  });

  it('takes the synchronous path of the two-tier limiter, and admits with the degraded header when its store fails', async () => {
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
    const app = express();
    app.use(expressRateLimit({ limiter, routes: {} }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await start(app);
    expect((await requestMany(url, 4)).map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(limiter.stats().decisions.lease).toBeGreaterThan(0);

    store.failing = true;
    clock.advance(60_000); // the lease has expired and the bucket refilled: only the store can answer
    const reply = await request(url);
    expect(reply).toMatchObject({ status: 200, headers: { 'ratelimit-degraded': 'policy=open' } });
    expect(reply.headers.ratelimit).toBeUndefined();
  });

  it('passes an error from a key function to the error handler', async () => {
    const limiter = new RequestLimiter({ store: new MemoryStore(), limits: api, failurePolicy: 'open' });
    closers.push(() => limiter.close());
    const app = express();
    app.use(
      expressRateLimit({
        limiter,
        key: () => {
          throw new Error('no key');
        },
      }),
    );
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    app.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
      res.status(500).send(error.message);
    });
    const url = await start(app);
    expect(await request(url)).toMatchObject({ status: 500, body: 'no key' });
  });
});
