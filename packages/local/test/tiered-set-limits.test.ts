import {
  type BucketOp,
  type BucketReply,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
} from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

/** Lets background refills and hand-backs (promise chains through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** 5 tokens, one per 1,000 s: nothing refills during a test. */
const FIVE = defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'five' });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

function tiered(store: GlobalStore, clock: FakeClock, limits: LimitSpec, minBatch = 1) {
  const limiter = new TieredLimiter({
    store,
    limits,
    failurePolicy: 'closed',
    clock,
    sync: false,
    timeoutMs: 1_000,
    lease: { minBatch },
  });
  open.push(limiter);
  return limiter;
}

/** Decisions for `key`, one after another, the hot path first. */
async function run(limiter: TieredLimiter | RequestLimiter, key: string, n: number) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const fast = limiter instanceof TieredLimiter ? limiter.tryConsume(key) : undefined;
    out.push(fast ?? (await limiter.consume(key)));
    await settle();
  }
  return out;
}

describe('TieredLimiter.setLimits and the denials it remembers', () => {
  it('a renamed limit starts full: a denial remembered under the old limit is forgotten', async () => {
    const clock = new FakeClock(1_000);
    const limiter = tiered(new MemoryStore({ clock }), clock, FIVE);
    const before = await run(limiter, 'k', 6);
    expect(before.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
    limiter.setLimits(defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'renamed' }));
    await settle();
    // The old denial's wait was 1,000 s; a new name is a full bucket (RequestLimiter, LocalLimiter).
    expect((await run(limiter, 'k', 1))[0]).toMatchObject({ allowed: true, name: 'renamed' });
  });

  it('a faster rate under the same name applies at once, not after the old wait', async () => {
    const clock = new FakeClock(1_000);
    const limiter = tiered(new MemoryStore({ clock }), clock, FIVE);
    await run(limiter, 'k', 6);
    limiter.setLimits(defineLimit({ capacity: 5, refillPerSecond: 1_000, name: 'five' }));
    await settle();
    clock.advance(10);
    // 10 ms at 1,000/s: the bucket is full again.
    expect((await run(limiter, 'k', 1))[0]).toMatchObject({ allowed: true });
  });

  it('a block outlives the forgotten denial', async () => {
    const clock = new FakeClock(1_000);
    const limiter = tiered(new MemoryStore({ clock }), clock, FIVE);
    await run(limiter, 'k', 6);
    limiter.block('k', 5_000);
    limiter.setLimits(defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'renamed' }));
    await settle();
    expect((await run(limiter, 'k', 1))[0]).toMatchObject({ allowed: false, tier: 'local' });
    clock.advance(5_000);
    expect((await run(limiter, 'k', 1))[0]).toMatchObject({ allowed: true, name: 'renamed' });
  });

  it('RequestLimiter with rememberDenials, for comparison, forgets its denials on setLimits', async () => {
    const clock = new FakeClock(1_000);
    const limiter = new RequestLimiter({
      store: new MemoryStore({ clock }),
      limits: FIVE,
      failurePolicy: 'closed',
      clock,
      rememberDenials: true,
    });
    open.push(limiter);
    await run(limiter, 'k', 6);
    limiter.setLimits(defineLimit({ capacity: 5, refillPerSecond: 0.001, name: 'renamed' }));
    expect((await run(limiter, 'k', 1))[0]).toMatchObject({ allowed: true, name: 'renamed' });
  });
});

/** A store whose replies wait while it is `shut`; the ops themselves run at once. */
class GatedStore implements GlobalStore {
  shut = false;
  readonly #inner: GlobalStore;
  readonly #held: (() => void)[] = [];

  constructor(inner: GlobalStore) {
    this.#inner = inner;
  }

  /** Replies held back. */
  get waiting(): number {
    return this.#held.length;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    const answer = this.#inner.apply(op);
    if (!this.shut) return answer;
    return new Promise((resolve) => this.#held.push(() => resolve(answer)));
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }

  /** Lets every held reply land. */
  open(): void {
    this.shut = false;
    for (const release of this.#held.splice(0)) release();
  }
}

describe('TieredLimiter.setLimits while a lease is on its way', () => {
  it('a grant made under the old limits and landing after setLimits goes back, as the drained leases did', async () => {
    const clock = new FakeClock(1_000);
    const store = new GatedStore(new MemoryStore({ clock }));
    const limiter = tiered(store, clock, defineLimit({ capacity: 100, refillPerSecond: 1, name: 'api' }), 20);
    store.shut = true;
    // A minimum batch of 20 leases at the first request: the op runs, its reply waits.
    const first = limiter.consume('k');
    for (let i = 0; i < 10 && store.waiting === 0; i++) await settle();
    expect(store.waiting).toBe(1);
    limiter.setLimits(defineLimit({ capacity: 2, refillPerSecond: 1, name: 'api' }));
    store.open();
    const decisions = [await first, ...(await run(limiter, 'k', 30))];
    // The new limit holds 2 tokens (the clock stands still); the old grant of 20 admitted 22.
    expect(decisions.filter((d) => d.allowed)).toHaveLength(2);
    // And nothing of the old grant is kept to be spent later.
    expect(limiter.stats().tokensHeld).toBe(0);
  });
});
