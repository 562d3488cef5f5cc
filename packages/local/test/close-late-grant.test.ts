// A grant that lands after close() has resolved (a refill that timed out, answered once Redis is
// back) goes straight back. Its hand-back was given what was left of close()'s wait, which by then
// is nothing: 1 ms, and a store that answered it 5 ms later was reported as a `failure` ("timed
// out after 1 ms") by a closed limiter, though the tokens landed.

import type { BucketOp, BucketReply, GlobalStore, LimitSpec, StoreError } from '@tiered-limiter/core';
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { afterEach, expect, it, vi } from 'vitest';

const LIMIT = defineLimit({ name: 'L', capacity: 1000, refillPerSecond: 0.001 });

/** `MemoryStore` whose ops wait, while `held`, until `release()`; after it, each answers `answerMs` later. */
class HeldStore implements GlobalStore {
  readonly inner = new MemoryStore();
  held = false;
  answerMs = 0;
  readonly #parked: (() => void)[] = [];

  apply(op: BucketOp): Promise<BucketReply> {
    if (this.held) return new Promise((resolve) => this.#parked.push(() => resolve(this.inner.apply(op))));
    const reply = this.inner.apply(op);
    if (this.answerMs === 0) return reply;
    return new Promise((resolve) => setTimeout(() => resolve(reply), this.answerMs));
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.inner.reset(key, limits);
  }

  /** Runs the parked ops now, in order, and answers them. */
  release(): void {
    this.held = false;
    for (const run of this.#parked.splice(0)) run();
  }
}

afterEach(() => {
  vi.useRealTimers();
});

it('a grant landing after close() resolved goes back with no failure reported: the store answered it', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance'] });
  const store = new HeldStore();
  const limiter = new TieredLimiter({
    store,
    limits: LIMIT,
    failurePolicy: 'open',
    sync: false,
    lease: { minBatch: 200 },
    timeoutMs: 20,
    closeTimeoutMs: 100,
    breaker: false,
  });
  expect((await limiter.consume('k')).tier).toBe('global');
  // Redis stops answering: a refill times out (the request gets its policy), close() waits in vain.
  store.held = true;
  const during = limiter.consume('k', 300);
  await vi.advanceTimersByTimeAsync(25);
  expect((await during).tier).toBe('fallback');
  const closed = limiter.close();
  await vi.advanceTimersByTimeAsync(110);
  await closed;
  const failures: StoreError[] = [];
  limiter.on('failure', (error) => failures.push(error));
  // Redis is back: it runs the refill (its grant lands on a lease close() handed back) and the
  // close's hand-back, and answers the late grant's hand-back 5 ms later, well within the timeout.
  store.answerMs = 5;
  store.release();
  await vi.advanceTimersByTimeAsync(50);
  expect(failures.map((e) => e.message)).toEqual([]);
  expect((await store.inner.apply({ key: 'k', limits: [LIMIT] })).remaining).toBe(1000 - 1);
});
