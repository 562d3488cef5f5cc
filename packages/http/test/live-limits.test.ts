/**
 * A limiter's limits changed while it serves (`setLimits`): the next response's `RateLimit-Policy`
 * and `RateLimit` speak of the new limits, on every adapter, for both store-backed limiters.
 */
import { type BucketOp, type BucketReply, defineLimit, type LimitSpec } from '@tiered-limiter/core';
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

/** A `MemoryStore` whose replies wait for `open()` once `held` is set: a decision still out. */
class GatedStore extends MemoryStore {
  held = false;
  readonly #waiting: (() => void)[] = [];

  override async apply(op: BucketOp): Promise<BucketReply> {
    const reply = await super.apply(op);
    if (this.held) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    return reply;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  open(): void {
    this.held = false;
    for (const resolve of this.#waiting.splice(0)) resolve();
  }
}

describe.each(ADAPTERS)('setLimits while a decision is out, $name', (adapter) => {
  it.each(Object.keys(KINDS) as (keyof typeof KINDS)[])(
    '%s: the response names no limit of the new policy with the old numbers',
    async (kind) => {
      const clock = new FakeClock(0);
      const store = new GatedStore({ clock });
      const limiter = new KINDS[kind]({
        store,
        limits: defineLimit({ capacity: 100, refillPerSecond: 1, name: 'api' }),
        failurePolicy: 'closed',
        clock,
        timeoutMs: 5_000,
      });
      closers.push(() => limiter.close());
      const { url } = await adapter.start({ limiter } as ContractOptions);
      store.held = true;
      const pending = request(`${url}/items`);
      while (store.waiting === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      const next: LimitSpec[] = [
        defineLimit({ capacity: 3, refillPerSecond: 1, name: 'burst' }),
        defineLimit({ capacity: 1_000, refillPerSecond: 1, name: 'hourly' }),
      ];
      limiter.setLimits(next);
      store.open();
      const reply = await pending;
      const policy = parsePolicy(reply.headers['ratelimit-policy']);
      expect(policy.map((p) => p.name)).toEqual(['burst', 'hourly']);
      // Decided under `api` (99 of 100 left): "burst";r=99 told a client 99 of 3.
      expect(reply.headers.ratelimit).toBeUndefined();
    },
  );
});
