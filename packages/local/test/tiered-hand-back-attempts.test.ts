// Hand-backs asked in one turn of the event loop share one guarded attempt (`TurnAttempt`): sent
// under an attempt each, late grants landing together or keys evicted in a burst timed out behind
// one another on a loaded machine, a `failure` event each (CI: 261 after `setLimits` on 10,000 keys).
import { type BucketOp, type BucketReply, defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A `MemoryStore` whose replies wait while it is `shut` (the ops run at once), and which fails every
 * hand-back (an op that neither takes nor leases) while `refusing`.
 */
class HandBackStore extends MemoryStore {
  shut = false;
  refusing = false;
  readonly #held: (() => void)[] = [];

  /** Replies held back. */
  get waiting(): number {
    return this.#held.length;
  }

  override apply(op: BucketOp): Promise<BucketReply> {
    if (this.refusing && op.take === undefined && op.reserve === undefined)
      return Promise.reject(new Error('connection refused'));
    const answer = super.apply(op);
    return this.shut ? new Promise((resolve) => this.#held.push(() => resolve(answer))) : answer;
  }

  /** Lets every held reply land, in this turn. */
  open(): void {
    this.shut = false;
    for (const release of this.#held.splice(0)) release();
  }
}

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

const LIMIT = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'api' });

/** Leases of 5 at a key's first request; no breaker, so that each failed attempt is a `failure` event. */
function limiterOn(
  store: HandBackStore,
  clock: FakeClock,
  { maxKeys, closeTimeoutMs }: { maxKeys?: number; closeTimeoutMs?: number } = {},
) {
  const limiter = new TieredLimiter({
    store,
    limits: LIMIT,
    failurePolicy: 'closed',
    clock,
    sync: false,
    timeoutMs: 1_000,
    breaker: false,
    lease: { minBatch: 5 },
    ...(maxKeys === undefined ? {} : { maxKeys }),
    ...(closeTimeoutMs === undefined ? {} : { closeTimeoutMs }),
  });
  open.push(limiter);
  const failures = { count: 0 };
  limiter.on('failure', () => failures.count++);
  return { limiter, failures };
}

describe('TieredLimiter: hand-backs asked in one turn go under one attempt', () => {
  it('grants landing together after setLimits: one failure event, not one a key', async () => {
    const clock = new FakeClock(1_000);
    const store = new HandBackStore({ clock });
    const { limiter, failures } = limiterOn(store, clock);
    store.shut = true;
    const KEYS = 20;
    const firsts = Array.from({ length: KEYS }, (_, i) => limiter.consume(`k${i}`));
    for (let i = 0; i < 10 && store.waiting < KEYS; i++) await settle();
    expect(store.waiting).toBe(KEYS);
    limiter.setLimits(defineLimit({ capacity: 50, refillPerSecond: 1, name: 'api' }));
    for (let i = 0; i < 5; i++) await settle();
    store.refusing = true;
    // Every grant lands in this turn, made under the replaced limit: each goes back, and fails.
    store.open();
    await Promise.all(firsts);
    for (let i = 0; i < 10; i++) await settle();
    // An attempt a key: 20 failure events for one moment of a store that refused them all.
    expect(failures.count).toBe(1);
    // Each grant of 5 went back whole (its request was asked again under the new limit), and what
    // the failed op carried is counted, never sent again.
    expect(limiter.stats().tokensUnreported).toBe(KEYS * 5);
  });

  it('keys evicted in a burst: one failure event, not one a key', async () => {
    const clock = new FakeClock(1_000);
    const store = new HandBackStore({ clock });
    const KEYS = 10;
    const { limiter, failures } = limiterOn(store, clock, { maxKeys: KEYS });
    for (let i = 0; i < KEYS; i++) expect((await limiter.consume(`old-${i}`)).allowed).toBe(true);
    expect(limiter.stats().tokensHeld).toBe(KEYS * 4);
    store.refusing = true;
    // Ten new keys in one turn push the ten old ones, each holding 4 tokens, out of the table.
    const news = Array.from({ length: KEYS }, (_, i) => limiter.consume(`new-${i}`));
    expect((await Promise.all(news)).every((d) => d.allowed)).toBe(true);
    for (let i = 0; i < 10; i++) await settle();
    // An attempt a key: 10 failure events for one moment of a store that refused them all.
    expect(failures.count).toBe(1);
    // Each failed op carried its key's spend of 1 and hand-back of 4: counted, never sent again.
    expect(limiter.stats().tokensUnreported).toBe(KEYS * 5);
  });

  it('grants landing together while close() runs: one failure event, not one a key', async () => {
    const clock = new FakeClock(1_000);
    const store = new HandBackStore({ clock });
    const { limiter, failures } = limiterOn(store, clock, { closeTimeoutMs: 5_000 });
    store.shut = true;
    const KEYS = 20;
    const firsts = Array.from({ length: KEYS }, (_, i) => limiter.consume(`k${i}`));
    for (let i = 0; i < 10 && store.waiting < KEYS; i++) await settle();
    expect(store.waiting).toBe(KEYS);
    // close() hands back every lease (none holds a token yet) and waits for the requests in flight.
    const closed = limiter.close();
    for (let i = 0; i < 5; i++) await settle();
    store.refusing = true;
    // Every grant lands in this turn, on a lease close() detached: each goes straight back, and fails.
    store.open();
    await Promise.all(firsts);
    await closed;
    // An attempt a key: 20 failure events for one moment of a store that refused them all.
    expect(failures.count).toBe(1);
    // Each grant of 5 went back whole, and what the failed op carried is counted, never sent again.
    expect(limiter.stats().tokensUnreported).toBe(KEYS * 5);
  });
});
