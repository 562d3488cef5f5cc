import type { BucketOp, BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

/** A store that answers each op `delays.shift()` ms of (fake) time after it was asked. */
class SlowStore implements GlobalStore {
  constructor(
    readonly inner: GlobalStore,
    readonly delays: number[],
  ) {}

  apply(op: BucketOp): Promise<BucketReply> {
    const delay = this.delays.shift() ?? 0;
    return new Promise((resolve) => setTimeout(resolve, delay)).then(() => this.inner.apply(op));
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.inner.reset(key, limits);
  }
}

describe('TieredLimiter stats', () => {
  it('reports the round trip of the store calls requests waited on: count, mean and max', async () => {
    const { clock, advance } = fakeTime();
    const store = new SlowStore(new MemoryStore({ clock }), [4, 12]);
    const l = limiter(store, clock, { sync: false });
    expect(l.stats().refillLatencyMs).toEqual({ count: 0, mean: 0, max: 0 });
    // Two keys' first hits, each a call a request waits on: answered 4 and 12 ms later.
    // advance(0) lets each call leave before time moves.
    const first = l.consume('a');
    await advance(0);
    await advance(4);
    expect((await first).allowed).toBe(true);
    const second = l.consume('b');
    await advance(0);
    await advance(12);
    expect((await second).allowed).toBe(true);
    expect(l.stats().refillLatencyMs).toEqual({ count: 2, mean: 8, max: 12 });
  });
});
