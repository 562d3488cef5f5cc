import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, type TieredLimiter } from '@tiered-limiter/local';
import { seededRandom } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { atRandom, CountingStore, fakeTime, limiter } from './sync-kit.js';

// How the periodic sync measures a key's rate, which sizes the lease it asks for: on fake time,
// read from the sync ops the store receives.

describe('TieredLimiter periodic sync: a key’s rate', () => {
  it('is what the key asked over the time since its first sample: a key new shortly before a sync is leased for its rate at the next', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    // 200 instances: a 1,111 ms period, as a fleet of 200 on the default budget has.
    const l = limiter(store, clock, {
      limits: defineLimit({ capacity: 2000, refillPerSecond: 2000 }),
      instances: 200,
    });
    const periodMs = l.stats().syncPeriodMs ?? 0;
    expect(periodMs).toBe(1111);
    // Ten requests a second, the first 300 ms before the first sync: that sync sees two after the
    // first, and reads them over a whole period (a rate from a single interval would be noise).
    await advance(periodMs - 300);
    for (let t = 0; t < 7 * periodMs; t += 100) {
      if (l.tryConsume('k') === undefined) await l.consume('k');
      await advance(100);
    }
    const wants = store.ops
      .filter((op) => op.background === true && op.reserve !== undefined)
      .map((op) => op.reserve!.want);
    expect(wants.length).toBeGreaterThanOrEqual(6);
    // From the second sync on, the key is leased for what it asks. When each sync's sample weighed
    // alike, the first sync's short view held the second's want to 16 tokens where a steady
    // 10 a second needs 22–23, and the estimate crept up for six periods (16, 18, 19, 20, 21, 22).
    const steady = wants[wants.length - 1]!;
    for (const want of wants.slice(1)) expect(want).toBeGreaterThanOrEqual(0.9 * steady);
  });

  it('lets a fleet of 200 just started, spread over a period, reach its keys’ rates within a few periods', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const limit = defineLimit({ capacity: 2000, refillPerSecond: 2000 });
    const fleet: TieredLimiter[] = [];
    // Started over one period (a deploy), as the bench's fleet rows start theirs.
    for (let i = 0; i < 200; i++) {
      fleet.push(limiter(store, clock, { limits: limit, instances: 200 }));
      await advance(5);
    }
    const random = seededRandom(11);
    let waited = 0;
    let decisions = 0;
    // 10,000 requests a second at random instances and 10 keys: 5 a second per instance and key.
    for (let ms = 0; ms < 4000; ms += 2) {
      for (const [l, key] of atRandom(fleet, random, 20)) {
        if (l.tryConsume(key) !== undefined) continue;
        void l.consume(key);
        // The first second is every key's first hits: takes, then each lease's first refill.
        if (ms < 2000) continue;
        waited++;
      }
      if (ms >= 2000) decisions += 20;
      await advance(2);
    }
    // Seconds 3 and 4: 55–79 of 20,000 decisions waited over ten seeds; 117–141 when each sync's
    // sample weighed alike (the first short), and leases fell short of demand for seconds.
    expect(decisions).toBe(20_000);
    expect(waited).toBeLessThan(100);
  });
});
