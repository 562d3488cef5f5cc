import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

// Keys seen once (issue 11, sparse keys) and the periodic sync, on fake time: a key's first hit is
// a take and a mark with no lease, and the next round leases for the keys marked since the last one
// as far as its last call has room, so a fleet's few keys are leased by the sync, not by a call of
// their own at their second hit, while a burst of new keys adds no call to the round.

/** 100 instances declared: the sync's period is 100 ÷ (0.9 × 200) s = 556 ms. */
function fleetMember() {
  const { clock, advance } = fakeTime();
  const store = new CountingStore(new MemoryStore({ clock }));
  const l = limiter(store, clock, {
    limits: defineLimit({ capacity: 400, refillPerSecond: 400 }),
    instances: 100,
  });
  return { store, l, advance };
}

describe('TieredLimiter keys seen once, and the sync round', () => {
  it('leases, at the next round, a key first seen since the last one: its second hit costs no call', async () => {
    const { store, l, advance } = fleetMember();
    expect(l.stats().syncPeriodMs).toBe(556);
    expect((await l.consume('k')).allowed).toBe(true);
    expect(l.stats()).toMatchObject({ keys: 0, keysSeenOnce: 1 });
    expect(store.ops.map((op) => [op.take, op.reserve])).toEqual([[1, undefined]]);
    await advance(600);
    // Seen once in the period before a 612 ms lease life: 0.61 requests expected, enough to lease.
    const leased = store.ops.filter((op) => op.key === 'k' && (op.reserve?.want ?? 0) > 0);
    expect(leased).toHaveLength(1);
    expect(l.stats()).toMatchObject({ keys: 1, keysSeenOnce: 0 });
    const ops = store.ops.length;
    expect(l.tryConsume('k')).toMatchObject({ allowed: true, tier: 'lease' });
    expect(store.ops).toHaveLength(ops);
  });

  it('leases, of a burst of new keys, as many as the round’s last call has room for; the rest stay marks', async () => {
    const { store, l, advance } = fleetMember();
    for (let i = 0; i < 40; i++) await l.consume(`new-${i}`);
    expect(l.stats()).toMatchObject({ keys: 0, keysSeenOnce: 40 });
    await advance(600);
    // A round over no held key: one call, 32 ops of room; the first 32 keys marked fill it.
    const leased = new Set(store.ops.filter((op) => (op.reserve?.want ?? 0) > 0).map((op) => op.key));
    expect(leased).toEqual(new Set(Array.from({ length: 32 }, (_, i) => `new-${i}`)));
    expect(l.stats()).toMatchObject({ keys: 32, keysSeenOnce: 8 });
    // The next round has no new mark to weigh: the 8 keep their marks until they come back.
    await advance(600);
    expect(l.stats()).toMatchObject({ keys: 32, keysSeenOnce: 8 });
    // One of them, back: its lease is made now, seeded from its first hit.
    expect((await l.consume('new-35')).allowed).toBe(true);
    expect(l.stats()).toMatchObject({ keys: 33, keysSeenOnce: 7 });
  });

  it('forgets the marks two windows on though no new key comes to turn them over', async () => {
    const { l, advance } = fleetMember();
    for (let i = 0; i < 40; i++) await l.consume(`new-${i}`);
    await advance(600);
    expect(l.stats()).toMatchObject({ keys: 32, keysSeenOnce: 8 });
    // A mark lives one to two windows (the 5 s floor here): by 10 s none is left.
    await advance(4_400);
    expect(l.stats().keysSeenOnce).toBe(8);
    await advance(5_100);
    expect(l.stats().keysSeenOnce).toBe(0);
    // Back now, a key is new again: a take and a mark.
    expect((await l.consume('new-39')).allowed).toBe(true);
    expect(l.stats()).toMatchObject({ keys: 32, keysSeenOnce: 1 });
  });
});
