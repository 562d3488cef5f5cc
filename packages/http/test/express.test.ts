/** What only Express has, on Express 4 and 5: a middleware mounted on one route, and `trust proxy`. */
import { createServer } from 'node:http';
import { defineLimit } from '@tiered-limiter/core';
import { expressRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import express5, { type Request } from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { type Listening, listen, parseRateLimit, request, requestMany } from './helpers.js';
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
});
