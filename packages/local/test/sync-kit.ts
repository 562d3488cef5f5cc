// The periodic sync's test kit: a store that counts what it is sent, fake time for the limiters,
// the store and the sync timer alike, and limiters closed after each test.
import type { BucketOp, BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';
import { defineLimit } from '@tiered-limiter/core';
import { type MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, vi } from 'vitest';
import { settle } from './lease-properties.js';

/** Counts the ops a store receives, and the heartbeats. */
export class CountingStore implements GlobalStore {
  readonly ops: BucketOp[] = [];
  heartbeats = 0;
  readonly #inner: MemoryStore;

  constructor(inner: MemoryStore) {
    this.#inner = inner;
  }

  /** The store this one counts for. */
  get inner(): MemoryStore {
    return this.#inner;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    this.ops.push(op);
    return this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }

  heartbeat(instance: string, ttlMs: number): Promise<number> {
    this.heartbeats++;
    return this.#inner.heartbeat(instance, ttlMs);
  }
}

/** Every limiter `limiter` made, closed after each test. */
const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
  vi.useRealTimers();
});

/**
 * A store whose heartbeats register at once but answer only at `answer()`, as behind a paused
 * server or over a slow link.
 */
export class HeldBeats extends CountingStore {
  readonly #waiting: (() => void)[] = [];

  override heartbeat(instance: string, ttlMs: number): Promise<number> {
    const beat = super.heartbeat(instance, ttlMs);
    return new Promise((resolve, reject) => this.#waiting.push(() => beat.then(resolve, reject)));
  }

  answer(): void {
    for (const send of this.#waiting.splice(0)) send();
  }
}

/** Fake time for the limiters, the store and the sync timer alike. */
export function fakeTime() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  const clock = new FakeClock(0);
  return {
    clock,
    async advance(ms: number) {
      clock.advance(ms);
      await vi.advanceTimersByTimeAsync(ms);
      await settle();
    },
  };
}

export function limiter(store: GlobalStore, clock: FakeClock, options: Partial<TieredLimiterOptions> = {}) {
  const l = new TieredLimiter({
    store,
    limits: defineLimit({ capacity: 100, refillPerSecond: 100 }),
    failurePolicy: 'open',
    clock,
    ...options,
  });
  open.push(l);
  return l;
}

/**
 * `count` requests as a load balancer spreads them: each at a random instance of `fleet`, on a
 * random one of the keys `k0`…`k9` (the instance drawn first, then the key).
 */
export function* atRandom(
  fleet: readonly TieredLimiter[],
  random: () => number,
  count: number,
): Generator<readonly [TieredLimiter, string]> {
  for (let i = 0; i < count; i++) {
    const l = fleet[Math.floor(random() * fleet.length)]!;
    yield [l, `k${Math.floor(random() * 10)}`];
  }
}
