/**
 * The middleware's `cost` on every adapter and limiter (docs/DECISIONS.md, "Weighted decisions"):
 * a denied weighted request waits for its whole cost (`Retry-After`), `t` stays the next token's,
 * a refund gives the whole cost back, and a cost the limiter refuses (0, 2.5, NaN, above the
 * capacity) goes to the framework's error path naming the value, with nothing taken.
 */
import { defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ADAPTERS, closeApps } from './adapters.js';
import { request, tokensIn } from './helpers.js';

// A burst of 6, one token a second.
const api = defineLimit({ capacity: 6, refillPerSecond: 1, name: 'api' });

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** Each store-backed limiter on a `MemoryStore` and a fake clock (time stands still in a test). */
const LIMITERS = {
  RequestLimiter: (store: GlobalStore, clock: FakeClock) =>
    new RequestLimiter({ store, limits: api, failurePolicy: 'closed', clock }),
  TieredLimiter: (store: GlobalStore, clock: FakeClock) =>
    new TieredLimiter({ store, limits: api, failurePolicy: 'closed', clock, instances: 1 }),
  'TieredLimiter, sync: false': (store: GlobalStore, clock: FakeClock) =>
    new TieredLimiter({ store, limits: api, failurePolicy: 'closed', clock, instances: 1, sync: false }),
};

const costOf = (req: { readonly headers: Record<string, string | string[] | undefined> }) =>
  Number(req.headers['x-cost']);
const costed = (cost: number | string) => ({ headers: { 'x-cost': String(cost) } });

describe.each(ADAPTERS)('weighted requests: $name', (adapter) => {
  it.each(Object.entries(LIMITERS))('waits for the whole cost, and refunds it (%s)', async (_name, make) => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const limiter = make(store, clock);
    closers.push(() => limiter.close());
    const { url } = await adapter.start({ limiter, cost: costOf, skipFailedRequests: true });
    // 4 of 6, then 3 with 2 left: refused until the 3rd token is back (1 s), where one token is 1 s away too.
    expect((await request(`${url}/items`, costed(4))).status).toBe(200);
    const refused = await request(`${url}/items`, costed(3));
    expect([refused.status, refused.headers['retry-after'], refused.headers.ratelimit]).toEqual([
      429,
      '1',
      '"api";r=2;t=1',
    ]);
    // All 6 gone: a cost of 6 waits 6 s, a cost of 1 one.
    expect((await request(`${url}/items`, costed(2))).status).toBe(200);
    const full = await request(`${url}/items`, costed(6));
    expect([full.status, full.headers['retry-after'], full.headers.ratelimit]).toEqual([
      429,
      '6',
      '"api";r=0;t=1',
    ]);
    expect((await request(`${url}/items`, costed(1))).headers['retry-after']).toBe('1');
    // A failed request of cost 5 (after 5 s) is given back whole.
    clock.advance(5000);
    expect((await request(`${url}/status/500`, costed(5))).status).toBe(500);
    await vi.waitFor(async () => expect(await tokensIn(store, '127.0.0.1', [api])).toBe(5), {
      timeout: 5000,
    });
  });

  it('sends a cost the limiter refuses to the error path, naming it, and takes nothing', async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const limiter = new RequestLimiter({ store, limits: api, failurePolicy: 'closed', clock });
    closers.push(() => limiter.close());
    const { url } = await adapter.start({ limiter, cost: costOf });
    for (const [cost, named] of [
      ['0', 'got 0'],
      ['-1', 'got -1'],
      ['2.5', 'got 2.5'],
      ['NaN', 'got NaN'],
      ['Infinity', 'got Infinity'],
      ['7', 'at most the capacity 6'],
    ] as const) {
      const reply = await request(`${url}/items`, costed(cost));
      expect(reply.status, cost).toBe(500);
      expect(reply.body, cost).toContain(named);
    }
    expect(await tokensIn(store, '127.0.0.1', [api])).toBe(6);
    // A cost equal to the capacity passes.
    expect((await request(`${url}/items`, costed(6))).status).toBe(200);
  });
});

describe('LocalLimiter behind the middleware, weighted', () => {
  it.each(ADAPTERS)('waits for the whole cost on $name', async (adapter) => {
    const clock = new FakeClock(0);
    const local = new LocalLimiter({ limits: api, clock });
    const limiter = {
      limits: local.limits,
      tryConsume: (key: string, cost: number) => local.tryConsume(key, cost),
      consume: async (key: string, cost: number) => local.tryConsume(key, cost),
    };
    const { url } = await adapter.start({ limiter, cost: costOf });
    expect((await request(`${url}/items`, costed(6))).status).toBe(200);
    const refused = await request(`${url}/items`, costed(4));
    expect([refused.status, refused.headers['retry-after']]).toEqual([429, '4']);
  });
});
