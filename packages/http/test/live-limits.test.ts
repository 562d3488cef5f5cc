/**
 * A limiter's limits changed while it serves (`setLimits`): the next response's `RateLimit-Policy`
 * and `RateLimit` speak of the new limits, on every adapter, for both store-backed limiters.
 */
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { parsePolicy, parseRateLimit, request } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

const KINDS = { RequestLimiter, TieredLimiter } as const;

describe.each(ADAPTERS)('setLimits while serving, $name', (adapter) => {
  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    '%s: the next response announces the new limits',
    async (kind) => {
      const clock = new FakeClock(0);
      const limiter = new KINDS[kind]({
        store: new MemoryStore({ clock }),
        limits: defineLimit({ capacity: 10, refillPerSecond: 1, name: 'api' }),
        failurePolicy: 'closed',
        clock,
      });
      closers.push(() => limiter.close());
      const { url } = await adapter.start({ limiter } as ContractOptions);
      expect(parsePolicy((await request(`${url}/items`)).headers['ratelimit-policy'])).toEqual([
        { name: 'api', q: 10, w: 10 },
      ]);
      limiter.setLimits(defineLimit({ capacity: 3, refillPerSecond: 1, name: 'burst' }));
      const after = await request(`${url}/items`);
      expect(parsePolicy(after.headers['ratelimit-policy'])).toEqual([{ name: 'burst', q: 3, w: 3 }]);
      expect(parseRateLimit(after.headers.ratelimit)[0]?.name).toBe('burst');
    },
  );
});
