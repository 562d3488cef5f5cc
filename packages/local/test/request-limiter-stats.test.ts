import {
  type BucketOp,
  type BucketReply,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
} from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';

/** A MemoryStore that counts every call it is sent. */
class CountingStore implements GlobalStore {
  calls = 0;
  readonly #inner = new MemoryStore();

  apply(op: BucketOp): Promise<BucketReply> {
    this.calls++;
    return this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    this.calls++;
    return this.#inner.reset(key, limits);
  }
}

describe('RequestLimiter stats().storeOps', () => {
  it('counts every call sent to the store: consume, peek, reward, penalty and reset', async () => {
    const store = new CountingStore();
    const limiter = new RequestLimiter({
      store,
      limits: defineLimit({ capacity: 10, refillPerSecond: 1 }),
      failurePolicy: 'open',
    });
    await limiter.consume('k');
    await limiter.peek('k');
    await limiter.reward('k', 1);
    await limiter.penalty('k', 1);
    await limiter.reset('k');
    await limiter.reset('k');
    expect(store.calls).toBe(6);
    expect(limiter.stats().storeOps).toBe(store.calls);
    await limiter.close();
  });
});
