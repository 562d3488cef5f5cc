// A limiter with no declared `instances` told the store it was alive only at its first tick, in the
// call that carried its first round: the round, and every refill before it, was sized as if the
// limiter were alone (a 20 ms period, a fair share of the whole bucket) while nine others shared it.
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

describe('TieredLimiter joining a live fleet, no instances declared', () => {
  it('sizes its first round and the refills before it for the live fleet', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    for (let i = 0; i < 9; i++) await store.inner.heartbeat(`other-${i}`, 60_000);
    // Ten alive at 200 calls a second: a period of 10 ÷ (0.9 × 200) s, 56 ms; alone it is 20 ms.
    const l = limiter(store, clock, { limits: defineLimit({ capacity: 1000, refillPerSecond: 1000 }) });
    await advance(1);
    // A busy key, 10 requests a ms, until just past the first tick.
    for (let ms = 1; ms < 25; ms++) {
      for (let i = 0; i < 10; i++) l.tryConsume('k') ?? (await l.consume('k'));
      await advance(1);
    }
    const asking = store.ops.filter((op) => op.reserve !== undefined);
    expect(asking.length).toBeGreaterThanOrEqual(2);
    // Before: every lease borrowed 20 ms, and the first round's asked for 700 tokens (a fair share
    // of 1,020 alone). Now at most a tenth of the bucket and the period it borrows, (1,000 + 56) ÷ 10,
    // or a quarter of what the bucket has left: 100, 91 and 205 tokens.
    expect(asking.map((op) => op.aheadMs)).toEqual(asking.map(() => 56));
    for (const op of asking) expect(op.reserve!.want).toBeLessThanOrEqual(1000 / 4);
    expect(l.stats()).toMatchObject({ instances: 10, syncPeriodMs: 56 });
    // One heartbeat as it was made, one at the first tick: none added later.
    expect(store.heartbeats).toBe(2);
  });
});
