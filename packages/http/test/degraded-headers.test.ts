/**
 * What a client sees while the store is down, over real sockets on every adapter, with real
 * limiters over a store that refuses every call: the `local` policy's headers speak of the
 * in-process bucket that decided, and the `closed` policy's denial follows the limiter's options.
 */
import { defineLimit, type LimitSpec, perHour, perSecond } from '@tiered-limiter/core';
import {
  MemoryStore,
  RequestLimiter,
  type RequestLimiterOptions,
  TieredLimiter,
} from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { FlakyStore, parsePolicy, parseRateLimit, type Reply, request } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  // The apps first: they call the limiters.
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

type Kind = 'RequestLimiter' | 'TieredLimiter';
const KINDS: readonly Kind[] = ['RequestLimiter', 'TieredLimiter'];

/** A limiter of `kind` whose store refuses every call from the start, on a fake clock. */
function downLimiter(kind: Kind, options: Omit<RequestLimiterOptions, 'store' | 'clock'>) {
  const clock = new FakeClock(0);
  const store = new FlakyStore(new MemoryStore({ clock }));
  store.failing = true;
  const made = { ...options, store, clock };
  const limiter = kind === 'RequestLimiter' ? new RequestLimiter(made) : new TieredLimiter(made);
  closers.push(() => limiter.close());
  return { clock, limiter };
}

/** The one `RateLimit` item and the `RateLimit-Policy` items of a reply, parsed. */
function fields(reply: Reply) {
  const [limit, ...more] = parseRateLimit(reply.headers.ratelimit);
  expect(more).toEqual([]);
  return { limit: limit!, policy: parsePolicy(reply.headers['ratelimit-policy']) };
}

describe.each(ADAPTERS)('store down, $name', (adapter) => {
  describe.each(KINDS)('%s', (kind) => {
    it("local policy, limits divided by fallback.instances: q, r, t and Retry-After are the fallback bucket's", async () => {
      // 4 at 1/s divided by 4: a bucket of 1 refilled every 4 s (w stays 4).
      const api = defineLimit({ capacity: 4, refillPerSecond: 1, name: 'api' });
      const { clock, limiter } = downLimiter(kind, {
        limits: api,
        failurePolicy: 'local',
        fallback: { instances: 4 },
      });
      const { url } = await adapter.start({ limiter, legacyHeaders: true } as ContractOptions);

      const admitted = await request(`${url}/items`);
      expect(admitted.status).toBe(200);
      expect(admitted.headers['ratelimit-degraded']).toBe('policy=local');
      expect(fields(admitted)).toEqual({
        limit: { name: 'api', r: 0, t: 4 },
        policy: [{ name: 'api', q: 1, w: 4 }],
      });
      expect(admitted.headers['x-ratelimit-limit']).toBe('1');

      const refused = await request(`${url}/items`);
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('4');
      const { limit, policy } = fields(refused);
      expect(limit).toEqual({ name: 'api', r: 0, t: 4 });
      expect(limit.t).toBe(Number(refused.headers['retry-after'])); // a cost of 1 waits for the next token
      expect(policy).toEqual([{ name: 'api', q: 1, w: 4 }]);

      // The wait announced is the wait there is: one token, 4 s later.
      clock.advance(4000);
      expect((await request(`${url}/items`)).status).toBe(200);
    });

    it('local policy, fallback.limits under names of their own: the headers name and measure them', async () => {
      // The fallback: a burst of 2, a token every 2 s; the limits it stands in for announce neither.
      const degraded = defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'degraded' });
      const limits: LimitSpec[] = [perSecond(10, { name: 'burst' }), perHour(1000, { name: 'hourly' })];
      const { clock, limiter } = downLimiter(kind, {
        limits,
        failurePolicy: 'local',
        fallback: { limits: degraded },
      });
      const { url } = await adapter.start({ limiter });

      const replies = [];
      for (let i = 0; i < 3; i++) replies.push(await request(`${url}/items`));
      expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
      expect(replies.map((r) => fields(r))).toEqual([
        { limit: { name: 'degraded', r: 1, t: 2 }, policy: [{ name: 'degraded', q: 2, w: 4 }] },
        { limit: { name: 'degraded', r: 0, t: 2 }, policy: [{ name: 'degraded', q: 2, w: 4 }] },
        { limit: { name: 'degraded', r: 0, t: 2 }, policy: [{ name: 'degraded', q: 2, w: 4 }] },
      ]);
      expect(replies[2]!.headers['retry-after']).toBe('2');

      clock.advance(2000);
      expect((await request(`${url}/items`)).status).toBe(200);
    });

    it('local policy, a cost the fallback bucket can never hold: refused in its terms, until the store is back', async () => {
      const degraded = defineLimit({ capacity: 2, refillPerSecond: 0.5, name: 'degraded' });
      const { limiter } = downLimiter(kind, {
        limits: perSecond(10, { name: 'burst' }),
        failurePolicy: 'local',
        fallback: { limits: degraded },
        closedRetryAfterMs: 5000,
      });
      const { url } = await adapter.start({ limiter, cost: () => 3, legacyHeaders: true });

      const refused = await request(`${url}/items`);
      expect(refused.status).toBe(429);
      expect(refused.headers['ratelimit-degraded']).toBe('policy=local');
      expect(fields(refused)).toEqual({
        limit: { name: 'degraded', r: 0 },
        policy: [{ name: 'degraded', q: 2, w: 4 }],
      });
      expect(refused.headers['x-ratelimit-limit']).toBe('2');
      expect(refused.headers['retry-after']).toBe('5');
    });

    it("closed policy: 503 with the limiter's closedRetryAfterMs as Retry-After, and onExceeded is told", async () => {
      const { limiter } = downLimiter(kind, {
        limits: perSecond(5, { name: 'login' }),
        failurePolicy: 'closed',
        closedRetryAfterMs: 2500,
      });
      const told: string[] = [];
      const { url, handled } = await adapter.start({
        limiter,
        onExceeded: (_req, denial) => told.push(`${denial.status} ${denial.decision.policy}`),
      });

      const refused = await request(`${url}/items`);
      expect(refused.status).toBe(503);
      expect(refused.headers).toMatchObject({ 'retry-after': '3', 'ratelimit-degraded': 'policy=closed' });
      expect(JSON.parse(refused.body)).toMatchObject({
        status: 503,
        detail: expect.stringMatching(/retry in 3 s/),
      });
      expect(told).toEqual(['503 closed']);
      expect(handled()).toBe(0);
    });
  });

  it('names the degraded header as degradedHeader says, or sends none with false', async () => {
    const { limiter } = downLimiter('RequestLimiter', { limits: perSecond(5), failurePolicy: 'open' });
    const renamed = await adapter.start({ limiter, degradedHeader: 'X-Limiter-Degraded' });
    const off = await adapter.start({ limiter, degradedHeader: false });

    const a = await fetch(`${renamed.url}/items`);
    expect(a.status).toBe(200);
    expect(a.headers.get('x-limiter-degraded')).toBe('policy=open');
    expect(a.headers.get('ratelimit-degraded')).toBeNull();

    const b = await fetch(`${off.url}/items`);
    expect(b.status).toBe(200);
    const names = [...b.headers.keys()];
    expect(names.filter((name) => name.endsWith('-degraded'))).toEqual([]);
    expect(names).toContain('ratelimit-policy'); // the other headers are still sent
    await Promise.all([a.text(), b.text()]);
  });
});
