// Why this file exists: the two-tier limiter remembers a denial on the key's lease (`reply.ts`),
// and a `reward` or `penalty` forgets it. A refill or take sent just before the call reached the
// store first and was turned away; its reply, read after the call, was remembered again: the key
// was turned away here for 980 ms (1 s without the sync) with the rewarded token in the store
// (with the sync, a grant that emptied the bucket held the key until the next sync the same way). A
// first hit's take turned away before a `reset` made the key's lease at its reply, with the
// denial. A penalty left the denial in place, its wait shorter than the store's. A remembered
// wait counted from when the reply was read, so a round trip or a stalled loop lengthened it past
// the store's. And a waiting `acquire()` whose try was out when the reward landed missed the
// wake and slept the stale wait.

import { defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { type AcquireResult, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LateReplies } from './late-replies.js';

/** Lets promise chains (through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A few turns: a held op reaches the store, and its reply waits in the hold. */
async function turns(): Promise<void> {
  for (let i = 0; i < 5; i++) await settle();
}

/** One token a second: nothing refills while the fake clock stands still. */
const ONE = defineLimit({ capacity: 1, refillPerSecond: 1, name: 'one' });

const open: TieredLimiter[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((l) => l.close()));
});

function setup(sync: Partial<TieredLimiterOptions>, limits: LimitSpec = ONE) {
  const clock = new FakeClock(1_000);
  const store = new LateReplies(clock);
  // A timeout far past a held reply's real wait, on a busy machine too.
  const limiter = new TieredLimiter({
    store,
    limits,
    failurePolicy: 'closed',
    clock,
    timeoutMs: 5_000,
    ...sync,
  });
  open.push(limiter);
  return { clock, store, limiter };
}

describe.each([
  ['with the periodic sync', {}],
  ['without it', { sync: false as const }],
])('TieredLimiter: a remembered denial and the calls that race it, %s', (_, sync) => {
  // reset and setLimits passed before too: a reset drops the lease the reply lands on, and a
  // reply to limits setLimits replaced clears its denial.
  for (const call of ['reward', 'penalty', 'reset', 'setLimits'] as const) {
    it(`keeps no denial asked for before a ${call} that landed`, async () => {
      const { store, limiter } = setup(sync);
      expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
      // The key's second hit: its lease's call reaches the store first and is turned away.
      store.hold = true;
      const pending = limiter.consume('k');
      await turns();
      let done: Promise<boolean> | undefined;
      if (call === 'reward') done = limiter.reward('k', 1);
      else if (call === 'penalty') done = limiter.penalty('k', 1);
      else if (call === 'reset') done = limiter.reset('k');
      else limiter.setLimits(defineLimit({ capacity: 1, refillPerSecond: 1, name: 'renamed' }));
      await turns();
      store.release();
      const denied = await pending;
      expect(denied).toMatchObject({ allowed: false, tier: 'global' });
      if (done !== undefined) expect(await done).toBe(true);
      // Before: turned away here, for the denial's wait (980 ms with the sync, 1 s without).
      expect(limiter.tryConsume('k')).toBeUndefined();
      if (call === 'penalty') {
        // The store's wait, a token longer. Before: the wait from before the penalty.
        expect(await limiter.consume('k')).toMatchObject({
          allowed: false,
          tier: 'global',
          retryAfterMs: denied.retryAfterMs + 1000,
        });
      } else {
        expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
      }
    });
  }

  it('forgets a remembered denial on a penalty, whose wait is longer', async () => {
    const { clock, limiter } = setup(sync);
    await limiter.consume('k');
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, tier: 'global' });
    expect(await limiter.penalty('k', 1)).toBe(true);
    clock.advance(500);
    // Before: the denial's 500 ms left, from the lease, and turned away again at its end.
    expect(limiter.tryConsume('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({
      allowed: false,
      tier: 'global',
      retryAfterMs: denied.retryAfterMs + 500,
    });
  });

  it('makes no lease for a first hit turned away before a reset that landed', async () => {
    const { store, limiter } = setup(sync);
    // Another instance spent the bucket.
    await store.inner.apply({ key: 'k', limits: limiter.limits, take: 1 });
    store.hold = true;
    const pending = limiter.consume('k');
    await turns();
    const done = limiter.reset('k');
    await turns();
    store.release();
    expect(await pending).toMatchObject({ allowed: false, tier: 'global' });
    expect(await done).toBe(true);
    // Before: the reply made the key's lease after the reset, and the lease turned it away (1 s,
    // or 980 ms with the sync's borrowing).
    expect(limiter.tryConsume('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });

  it('counts a remembered wait from when its call was sent, not from when the reply was read', async () => {
    const { clock, store, limiter } = setup(
      sync,
      defineLimit({ capacity: 1, refillPerSecond: 10, name: 'ten' }),
    );
    await limiter.consume('k');
    store.lagMs = 15;
    const sentAt = clock.now();
    const denied = await limiter.consume('k');
    store.lagMs = 0;
    // The store turned the key away when the call was sent; its reply came 15 ms later.
    expect(denied).toMatchObject({ allowed: false, tier: 'global' });
    expect(clock.now()).toBe(sentAt + 15);
    clock.advance(50);
    // Before: 15 ms longer than the store's wait.
    expect(limiter.tryConsume('k')).toMatchObject({
      allowed: false,
      tier: 'lease',
      retryAfterMs: denied.retryAfterMs - 65,
    });
    clock.advance(denied.retryAfterMs - 65);
    // The store's wait is over. Before: still turned away here.
    expect(limiter.tryConsume('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });

  it('wakes a waiting acquire() whose try was out when a reward landed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const { clock, store, limiter } = setup(
      sync,
      defineLimit({ capacity: 1, refillPerSecond: 0.2, name: 'slow' }),
    );
    expect((await limiter.consume('k')).allowed).toBe(true);
    store.hold = true;
    let result: AcquireResult | undefined;
    void limiter.acquire('k', 1, { maxWaitMs: 8_000 }).then((r) => (result = r));
    await turns();
    const done = limiter.reward('k', 1);
    await turns();
    store.release();
    expect(await done).toBe(true);
    for (let i = 0; i < 10; i++) {
      clock.advance(1);
      await vi.advanceTimersByTimeAsync(1);
    }
    await settle();
    // Before: asleep for the 5 s its try's denial said, the rewarded token in the store.
    expect(result).toMatchObject({ acquired: true, decision: { tier: 'global' } });
    expect(result!.waitedMs).toBeLessThanOrEqual(10);
  });
});

describe('TieredLimiter with the periodic sync: a dry lease and a reward that races it', () => {
  it('does not hold the key for the next sync after a grant that emptied the bucket before a reward', async () => {
    const { store, limiter } = setup({}, defineLimit({ capacity: 2, refillPerSecond: 1, name: 'two' }));
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    // The key's second hit leases the last token; the reward lands after the store granted it.
    store.hold = true;
    const pending = limiter.consume('k');
    await turns();
    const done = limiter.reward('k', 1);
    await turns();
    store.release();
    expect(await pending).toMatchObject({ allowed: true, tier: 'global' });
    expect(await done).toBe(true);
    expect(limiter.stats().tokensLeased).toBe(1);
    // Before: the key at its limit, turned away here until the next sync, the token in the store.
    expect(limiter.tryConsume('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });
});
