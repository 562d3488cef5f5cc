/**
 * What only Express has, on Express 4 and 5: a middleware mounted on one route, `trust proxy`, and
 * a middleware that can call `next()` before it returns.
 */
import { createServer } from 'node:http';
import { defineLimit } from '@tiered-limiter/core';
import { expressRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import express5, { type Request } from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import {
  exactTieredLimiter,
  expectSynchronousWhenLeased,
  type Listening,
  listen,
  parseRateLimit,
  request,
  requestMany,
  watchLimiterCalls,
} from './helpers.js';
import { closeAfterEach } from './teardown.js';

const login = defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'login' });

const open: Listening[] = [];
const closers: (() => Promise<void>)[] = [];
closeAfterEach(open, closers);

function limiter() {
  const clock = new FakeClock(0);
  const made = new RequestLimiter({
    store: new MemoryStore({ clock }),
    limits: login,
    failurePolicy: 'closed',
    clock,
  });
  closers.push(() => made.close());
  return made;
}

describe.each([
  ['express 4', express4 as unknown as typeof express5],
  ['express 5', express5],
])('%s', (_, express) => {
  async function start(app: express5.Express): Promise<string> {
    const server = await listen(createServer(app));
    open.push(server);
    return server.url;
  }

  it('limits one route when mounted on it, HEAD included, keyed by what Express knows', async () => {
    const app = express();
    let handled = 0;
    app.get(
      '/report',
      expressRateLimit<Request>({ limiter: limiter(), key: (req) => `${req.ip} ${req.route?.path}` }),
      (_req, res) => {
        handled++;
        res.send('report');
      },
    );
    app.get('/free', (_req, res) => {
      res.send('free');
    });
    const url = await start(app);
    const heads = await requestMany(`${url}/report`, 3, { method: 'HEAD' });
    expect(heads.map((r) => [r.status, r.headers['retry-after']])).toEqual([
      [200, undefined],
      [200, undefined],
      [429, '2'],
    ]);
    expect(parseRateLimit(heads[2]!.headers.ratelimit)).toEqual([{ name: 'login', r: 0, t: 2 }]);
    expect(handled).toBe(2);
    expect((await requestMany(`${url}/free`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
  });

  it('matches route names against the whole URL, also under a mount path', async () => {
    const app = express();
    // Mounted under /api: `req.url` is `/login` there, but a route is named by the path a client sends.
    app.use('/api', expressRateLimit({ routes: { '/api/login': limiter(), '/login': false } }));
    app.post('/api/login', (_req, res) => {
      res.send('in');
    });
    const url = await start(app);
    const statuses = (await requestMany(`${url}/api/login`, 3, { method: 'POST' })).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it("keys by req.ip when the app set 'trust proxy', and by the socket when it did not", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
    process.on('warning', onWarning);
    try {
      const trusting = express();
      trusting.set('trust proxy', 1);
      trusting.use(expressRateLimit({ limiter: limiter() }));
      trusting.get('/', (_req, res) => {
        res.send('ok');
      });
      const url = await start(trusting);
      const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
      expect((await requestMany(url, 3, from('203.0.113.1'))).map((r) => r.status)).toEqual([200, 200, 429]);
      expect((await request(url, from('203.0.113.2'))).status).toBe(200);
      expect((await request(url, from('2001:db8:0:ab01::1'))).status).toBe(200);
      expect((await request(url, from('2001:db8:0:ab99::2'))).status).toBe(200); // one /56 with the above
      expect((await request(url, from('2001:db8:0:abff::3'))).status).toBe(429);

      const plain = express();
      plain.use(expressRateLimit({ limiter: limiter() }));
      plain.get('/', (_req, res) => {
        res.send('ok');
      });
      const other = await start(plain);
      const statuses = [];
      for (const ip of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
        statuses.push((await request(other, from(ip))).status);
      }
      expect(statuses).toEqual([200, 200, 429]);
      await new Promise((resolve) => setImmediate(resolve));
      // Only the app that trusts nothing warned.
      expect(warnings.filter((code) => code === 'TL_HTTP_UNTRUSTED_FORWARDED_FOR')).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  /** An app behind `middleware` whose one route answers the key the request was counted under. */
  async function keyApp(trustProxy: number | boolean, middleware: express5.RequestHandler): Promise<string> {
    const app = express();
    app.set('trust proxy', trustProxy);
    app.use(middleware);
    app.get('/', (req, res) => {
      res.json({ key: (req as { rateLimit?: { key: string } }).rateLimit?.key ?? null });
    });
    return start(app);
  }
  const from = (chain: string) => ({ headers: { 'x-forwarded-for': chain } });
  const keyAt = async (url: string, chain: string) => JSON.parse((await request(url, from(chain))).body).key;
  // The client wrote `forged`; its proxy appended 203.0.113.9 (the client), a second proxy 10.0.0.2.
  const chain = 'forged, 203.0.113.9, 10.0.0.2';

  it("believes the app's 'trust proxy' as it is, hop count included, while trustProxy is 0", async () => {
    expect(await keyAt(await keyApp(1, expressRateLimit({ limiter: limiter() })), chain)).toBe('10.0.0.2');
    expect(await keyAt(await keyApp(2, expressRateLimit({ limiter: limiter() })), chain)).toBe('203.0.113.9');
  });

  it("counts hops by the middleware's trustProxy when set, whatever the app's 'trust proxy' says", async () => {
    // `true` trusts every hop: Express's req.ip would be the client's own `forged`.
    const everyHop = await keyApp(true, expressRateLimit({ limiter: limiter(), trustProxy: 1 }));
    expect(await keyAt(everyHop, chain)).toBe('10.0.0.2');
    const oneHop = await keyApp(1, expressRateLimit({ limiter: limiter(), trustProxy: 2 }));
    expect(await keyAt(oneHop, chain)).toBe('203.0.113.9');
  });

  it("compares the allowList with the client the app's 'trust proxy' names, not with the proxy", async () => {
    const listed = await keyApp(1, expressRateLimit({ limiter: limiter(), allowList: ['203.0.113.0/24'] }));
    const through = await requestMany(listed, 4, from('203.0.113.5'));
    expect(through.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(through[0]!.headers['ratelimit-policy']).toBeUndefined();
    expect((await requestMany(listed, 3, from('198.51.100.7'))).map((r) => r.status)).toEqual([
      200, 200, 429,
    ]);
    // The socket (the proxy) is 127.0.0.1: listing it lets through no client it forwards.
    const proxy = await keyApp(1, expressRateLimit({ limiter: limiter(), allowList: ['127.0.0.0/8'] }));
    expect((await requestMany(proxy, 3, from('198.51.100.7'))).map((r) => r.status)).toEqual([200, 200, 429]);
  });

  it('calls next() before returning when the lease answers, and consume only when it cannot', async () => {
    const clock = new FakeClock(0);
    const tiered = exactTieredLimiter(defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' }), clock);
    closers.push(() => tiered.close());
    const calls = watchLimiterCalls(tiered);
    const middleware = expressRateLimit({ limiter: tiered });
    // Per request: whether the lease answered, and whether next() ran inside the middleware's call.
    const seen: string[] = [];
    const app = express();
    app.use((req, res, next) => {
      const before = calls.length;
      let returned = false;
      middleware(req, res, (error?: unknown) => {
        seen.push(`${calls[before]} ${returned ? 'later' : 'at once'}`);
        next(error);
      });
      returned = true;
    });
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await start(app);
    expect((await requestMany(url, 10)).map((r) => r.status)).toEqual(Array(10).fill(200));
    expectSynchronousWhenLeased(seen, calls, 10);
  });
});
