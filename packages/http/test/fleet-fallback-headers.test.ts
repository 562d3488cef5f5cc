/**
 * A two-tier fleet that outgrew its declared `instances`: its `local` failure policy divides the
 * limit by the live count, and a degraded response's headers announce that smaller bucket, on every
 * adapter, over real sockets and real time (the fleet registry learns the count from heartbeats).
 */
import { defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { LosableStore } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { parsePolicy, request } from './helpers.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

// 12 at 3/s over 2 declared instances is a bucket of 6; over 3 live ones, of 4 (w stays 4).
const API = defineLimit({ capacity: 12, refillPerSecond: 3, name: 'api' });

describe.each(ADAPTERS)('a fleet past its declared size, store down, $name', (adapter) => {
  it('RateLimit-Policy announces the limit divided by the live count, not the declared one', async () => {
    const shared = new MemoryStore();
    const make = (store: GlobalStore) => {
      const limiter = new TieredLimiter({ store, limits: API, failurePolicy: 'local', instances: 2 });
      closers.push(() => limiter.close());
      return limiter;
    };
    const store = new LosableStore(shared);
    const limiter = make(store);
    make(shared);
    make(shared);
    const { url } = await adapter.start({ limiter } as ContractOptions);
    // Idle instances beat every 250 ms: the count reaches three within a few of them.
    const deadline = performance.now() + 3000;
    while (limiter.stats().instances !== 3 && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(limiter.stats().instances).toBe(3);
    store.lost = true;
    const reply = await request(`${url}/items`);
    expect(reply.status).toBe(200);
    expect(reply.headers['ratelimit-degraded']).toBe('policy=local');
    expect(parsePolicy(reply.headers['ratelimit-policy'])).toEqual([{ name: 'api', q: 4, w: 4 }]);
  });
});
