/**
 * One scenario through express-rate-limit 8 and through this package, on Express 5 over real
 * sockets: statuses and the headers that mean the same thing must agree. Where the two differ by
 * design (a fixed window against a token bucket) the test says which field and why.
 */
import { createServer } from 'node:http';
import { perMinute } from '@tiered-limiter/core';
import { type ExpressRateLimitOptions, expressRateLimit } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import express, { type Request, type RequestHandler } from 'express';
import { rateLimit } from 'express-rate-limit';
import { describe, expect, it } from 'vitest';
import { type Listening, listen, parsePolicy, parseRateLimit, type Reply, request } from './helpers.js';
import { closeAfterEach } from './teardown.js';

const open: Listening[] = [];
const closers: (() => Promise<void>)[] = [];
closeAfterEach(open, closers);

async function app(limit: RequestHandler, trustProxy = false): Promise<string> {
  const made = express();
  made.set('trust proxy', trustProxy ? 1 : false);
  made.use(limit);
  made.get('/status/:code', (req, res) => {
    res.status(Number(req.params.code)).send('done');
  });
  const server = await listen(createServer(made));
  open.push(server);
  return server.url;
}

/** Ours: `count` per minute (a burst of `count`, then one every 60/count s), with the legacy headers too. */
function ours(options: Partial<ExpressRateLimitOptions<Request>> = {}, count = 5): RequestHandler {
  const store = new MemoryStore();
  const limiter = new RequestLimiter({
    store,
    limits: perMinute(count, { name: `${count}-in-1min` }),
    failurePolicy: 'open',
  });
  closers.push(() => limiter.close());
  return expressRateLimit<Request>({ limiter, legacyHeaders: true, ...options }) as unknown as RequestHandler;
}

/** Theirs: 5 per 1-minute window, draft-8 headers (the syntax of draft-10/11) and the legacy ones. */
function theirs(options: Parameters<typeof rateLimit>[0] = {}): RequestHandler {
  return rateLimit({
    windowMs: 60_000,
    limit: 5,
    standardHeaders: 'draft-8',
    legacyHeaders: true,
    ...options,
  });
}

async function run(url: string, paths: readonly string[], headers?: (i: number) => Record<string, string>) {
  const replies: Reply[] = [];
  for (const [i, path] of paths.entries())
    replies.push(await request(`${url}${path}`, { headers: headers?.(i) }));
  return replies;
}

describe('express-rate-limit and @tiered-limiter/http, side by side', () => {
  it('agree on statuses, q, w, r and the legacy limit and remaining of 5 per minute', async () => {
    const paths = Array.from({ length: 7 }, () => '/status/200');
    const [a, b] = [await run(await app(theirs()), paths), await run(await app(ours()), paths)];
    expect(b.map((r) => r.status)).toEqual(a.map((r) => r.status));
    expect(a.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
    for (const [i, theirReply] of a.entries()) {
      const ourReply = b[i]!;
      const [theirPolicy] = parsePolicy(theirReply.headers['ratelimit-policy']);
      const [ourPolicy] = parsePolicy(ourReply.headers['ratelimit-policy']);
      expect([ourPolicy!.q, ourPolicy!.w]).toEqual([theirPolicy!.q, theirPolicy!.w]);
      expect(parseRateLimit(ourReply.headers.ratelimit)[0]!.r).toBe(
        parseRateLimit(theirReply.headers.ratelimit)[0]!.r,
      );
      expect(ourReply.headers['x-ratelimit-limit']).toBe(theirReply.headers['x-ratelimit-limit']);
      expect(ourReply.headers['x-ratelimit-remaining']).toBe(theirReply.headers['x-ratelimit-remaining']);
      // Both refuse with Retry-After. Theirs waits for the window to end (60 s), ours for the next
      // token (12 s): a token bucket refills as it goes. t differs the same way, and their legacy
      // X-RateLimit-Reset is an epoch time where ours is seconds from now.
      expect(ourReply.headers['retry-after'] === undefined).toBe(
        theirReply.headers['retry-after'] === undefined,
      );
    }
    expect(b[5]!.headers['retry-after']).toBe('12');
    expect(Number(a[5]!.headers['retry-after'])).toBeGreaterThan(12);
  });

  it('agree with skipFailedRequests: failures are given back', async () => {
    const paths = [
      '/status/500',
      '/status/404',
      '/status/500',
      ...Array.from({ length: 6 }, () => '/status/200'),
    ];
    const [a, b] = [
      await run(await app(theirs({ skipFailedRequests: true })), paths),
      await run(await app(ours({ skipFailedRequests: true })), paths),
    ];
    expect(b.map((r) => r.status)).toEqual(a.map((r) => r.status));
    expect(a.map((r) => r.status)).toEqual([500, 404, 500, 200, 200, 200, 200, 200, 429]);
  });

  it("agree on IPv6 clients behind Express's trust proxy: one /56 is one client", async () => {
    const paths = Array.from({ length: 8 }, () => '/status/200');
    const from = (i: number) => ({
      'x-forwarded-for': `2001:db8:0:ab${(i * 7).toString(16).padStart(2, '0')}::${i + 1}`,
    });
    const [a, b] = [
      await run(await app(theirs(), true), paths, from),
      await run(await app(ours(), true), paths, from),
    ];
    expect(b.map((r) => r.status)).toEqual(a.map((r) => r.status));
    expect(a.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  });

  it('agree on skip and on a custom key', async () => {
    const paths = Array.from({ length: 8 }, () => '/status/200');
    const headers = (i: number) => ({ 'x-user': i % 2 === 0 ? 'ann' : 'bob', 'x-skip': i === 0 ? '1' : '0' });
    const keyOf = (req: Request) => String(req.headers['x-user']);
    const skip = (req: Request) => req.headers['x-skip'] === '1';
    const [a, b] = [
      await run(await app(theirs({ keyGenerator: keyOf, skip, limit: 3 })), paths, headers),
      await run(await app(ours({ key: keyOf, skip }, 3)), paths, headers),
    ];
    expect(b.map((r) => r.status)).toEqual(a.map((r) => r.status));
    // ann: skipped once, then 3 counted; bob: 4 counted, the 4th refused.
    expect(a.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 200, 429]);
  });
});
