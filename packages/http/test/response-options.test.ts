/**
 * Options of the middleware the README promises and the adapter contract does not reach: the
 * variants of `problem`, `message` and `requestPropertyName`, `standardHeaders: 'draft-10'`, and
 * the legacy `X-RateLimit-Reset` of a denial. Over real sockets, on real limiters.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { defineLimit, type LimitSpec, perMinute } from '@tiered-limiter/core';
import {
  createRateLimit,
  expressRateLimit,
  fastifyRateLimit,
  type RateLimitOptions,
} from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, closeApps } from './adapters.js';
import { type Listening, listen, parseRateLimit, requestMany, serve } from './helpers.js';

// A burst of 2, a token a second; the fake clock never moves, so the third request is refused.
const api = defineLimit({ capacity: 2, refillPerSecond: 1, name: 'api' });

const servers: Listening[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  // The apps first: they call the limiters.
  await closeApps();
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

function limiter(limits: LimitSpec = api): RequestLimiter {
  const clock = new FakeClock(0);
  const made = new RequestLimiter({
    store: new MemoryStore({ clock }),
    limits,
    failurePolicy: 'open',
    clock,
  });
  closers.push(() => made.close());
  return made;
}

describe.each(ADAPTERS)('$name', (adapter) => {
  it('sends what a problem function returns, whole, as application/problem+json', async () => {
    const { url } = await adapter.start({
      limiter: limiter(),
      problem: (denial) => ({
        type: 'https://example.com/problems/quota',
        title: 'Quota spent',
        status: denial.status,
        retryIn: denial.retryAfterSeconds,
      }),
    });
    const [, , refused] = await requestMany(`${url}/items`, 3);
    expect(refused!.status).toBe(429);
    expect(refused!.headers['content-type']).toMatch(/^application\/problem\+json/);
    // The whole document: nothing of the default (no `detail`) is laid under it.
    expect(JSON.parse(refused!.body)).toEqual({
      type: 'https://example.com/problems/quota',
      title: 'Quota spent',
      status: 429,
      retryIn: 1,
    });
  });

  it('sends a plain-object message as JSON', async () => {
    const { url } = await adapter.start({
      limiter: limiter(),
      message: { error: 'rate_limited', docs: '/limits' },
    });
    const [, , refused] = await requestMany(`${url}/items`, 3);
    expect(refused!.status).toBe(429);
    expect(refused!.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(refused!.body)).toEqual({ error: 'rate_limited', docs: '/limits' });
  });

  it("sends the same headers with standardHeaders 'draft-10' as with 'draft-11'", async () => {
    const draft10 = await adapter.start({
      limiter: limiter(),
      standardHeaders: 'draft-10',
      legacyHeaders: true,
    });
    const draft11 = await adapter.start({
      limiter: limiter(),
      standardHeaders: 'draft-11',
      legacyHeaders: true,
    });
    const a = await requestMany(`${draft10.url}/items`, 3);
    const b = await requestMany(`${draft11.url}/items`, 3);
    expect(b.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(b.map((r) => parseRateLimit(r.headers.ratelimit))).toEqual([
      [{ name: 'api', r: 1, t: 1 }],
      [{ name: 'api', r: 0, t: 1 }],
      [{ name: 'api', r: 0, t: 1 }],
    ]);
    expect(a.map((r) => [r.status, r.headers])).toEqual(b.map((r) => [r.status, r.headers]));
  });

  it('sends X-RateLimit-Reset as the seconds until full on a denial too, as on the admission before it', async () => {
    // 5 per minute: empty after 5, full again in 60 s; the next token in 12 s.
    const { url } = await adapter.start({ limiter: limiter(perMinute(5)), legacyHeaders: true });
    const replies = await requestMany(`${url}/items`, 6);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(replies[4]!.headers).toMatchObject({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '60' });
    expect(replies[5]!.headers).toMatchObject({
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '60',
      'retry-after': '12',
    });
  });
});

/** What a request carries under `rateLimit` and under `limitInfo`, as the app reads them. */
function carried(req: object): unknown {
  const { rateLimit, limitInfo } = req as { rateLimit?: unknown; limitInfo?: unknown };
  return { rateLimit: rateLimit ?? null, limitInfo: limitInfo ?? null };
}

type Options = RateLimitOptions<object>;

/** An app on each framework that answers what the request carries; a denial's message says the same. */
const FRAMEWORKS: readonly { name: string; start(options: Options): Promise<string> }[] = [
  {
    name: 'node:http',
    async start(options) {
      const rateLimit = createRateLimit(options as RateLimitOptions<IncomingMessage>);
      const server = await serve(async (req, res) => {
        if (await rateLimit(req, res)) res.end(JSON.stringify(carried(req)));
      });
      servers.push(server);
      return server.url;
    },
  },
  {
    name: 'express 5',
    async start(options) {
      const app = express();
      app.use(expressRateLimit(options));
      app.get('/', (req, res) => {
        res.json(carried(req));
      });
      const server = await listen(createServer(app));
      servers.push(server);
      return server.url;
    },
  },
  {
    name: 'fastify',
    async start(options) {
      const app = Fastify();
      app.addHook('onRequest', fastifyRateLimit(options));
      app.get('/', async (request) => carried(request));
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      servers.push({ url, close: () => app.close() });
      return url;
    },
  },
];

describe.each(FRAMEWORKS)('requestPropertyName on $name', (framework) => {
  it('puts the decision, key and cost under the name given, admitted or refused, and none under rateLimit', async () => {
    const url = await framework.start({
      limiter: limiter(),
      requestPropertyName: 'limitInfo',
      message: (req) => carried(req) as object,
    });
    const replies = await requestMany(url, 3);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    const [first, , refused] = replies.map((r) => JSON.parse(r.body));
    expect(first).toEqual({
      rateLimit: null,
      limitInfo: expect.objectContaining({
        allowed: true,
        remaining: 1,
        name: 'api',
        key: '127.0.0.1',
        cost: 1,
      }),
    });
    expect(refused).toEqual({
      rateLimit: null,
      limitInfo: expect.objectContaining({
        allowed: false,
        remaining: 0,
        retryAfterMs: 1000,
        key: '127.0.0.1',
      }),
    });
  });
});
