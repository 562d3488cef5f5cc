import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const step = fc.record({
  instance: fc.integer({ min: 0, max: 2 }),
  key: fc.integer({ min: 0, max: 1 }),
  cost: fc.integer({ min: 1, max: 3 }),
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 50, max: 400 })),
});

const TTL_MS = 200;

/**
 * `size` limiters sharing one in-memory bucket under one fake clock. One assumed instance lets a
 * lease take the whole bucket: the hardest case for the bound.
 */
function fleetOf(size: number, capacity: number, ratePerSecond: number) {
  const clock = new FakeClock(0);
  const store = new MemoryStore({ clock });
  const limit = defineLimit({ capacity, refillPerSecond: ratePerSecond });
  const fleet = Array.from(
    { length: size },
    () =>
      new TieredLimiter({
        store,
        limits: limit,
        failurePolicy: 'closed',
        coarseTickMs: 0,
        clock,
        instances: 1,
        lease: { ttlMs: TTL_MS },
      }),
  );
  return { clock, fleet };
}

/** Over every window between two admissions: admitted ≤ capacity + rate × (window + lease TTL). */
function expectFleetBound(
  admitted: { atMs: number; cost: number }[],
  capacity: number,
  ratePerSecond: number,
) {
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += admitted[j]!.cost;
      const windowMs = admitted[j]!.atMs - admitted[i]!.atMs;
      expect(sum).toBeLessThanOrEqual(capacity + (ratePerSecond * (windowMs + TTL_MS)) / 1000 + 1e-9);
    }
  }
}

describe('TieredLimiter lease logic (fake clock, in-memory store)', () => {
  it('admits no token that was not leased, counts none twice, and stays within the fleet bound', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 120 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 50 }),
        async (steps, capacity, ratePerSecond) => {
          const { clock, fleet } = fleetOf(3, capacity, ratePerSecond);
          const admitted: { atMs: number; key: number; cost: number }[] = [];
          const admittedBy = [0, 0, 0];
          try {
            for (const s of steps) {
              if (s.cost > capacity) continue;
              const limiter = fleet[s.instance]!;
              const key = `k${s.key}`;
              const d = limiter.tryConsume(key, s.cost) ?? (await limiter.consume(key, s.cost));
              expect(d.allowed).toBe(d.retryAfterMs === 0);
              expect(d.remaining).toBeGreaterThanOrEqual(0);
              expect(d.tier).not.toBe('fallback');
              if (d.allowed) {
                admitted.push({ atMs: clock.now(), key: s.key, cost: s.cost });
                admittedBy[s.instance]! += s.cost;
              }
              await settle();
              clock.advance(s.advanceMs);
            }
            await settle();
            fleet.forEach((limiter, i) => {
              const st = limiter.stats();
              // Conservation: every leased token was spent, is still held, or went back.
              expect(admittedBy[i]! + st.tokensHeld + st.tokensRefunded).toBe(st.tokensLeased);
            });
            // Over any window, per key.
            for (const key of [0, 1]) {
              expectFleetBound(
                admitted.filter((a) => a.key === key),
                capacity,
                ratePerSecond,
              );
            }
          } finally {
            await Promise.all(fleet.map((l) => l.close()));
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it('bursts after idle gaps: a lease never outlives its TTL, so every window keeps the bound', async () => {
    // Bursts on one key with gaps long enough for the bucket to refill behind a held lease: the
    // case where a token kept past its TTL would be spent beside a full bucket. (A lease TTL ten
    // times too long fails this within a few dozen runs.)
    const burst = fc.record({
      instance: fc.integer({ min: 0, max: 1 }),
      requests: fc.integer({ min: 1, max: 30 }),
      advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 100, max: 400 })),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(burst, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 2, max: 20 }),
        fc.integer({ min: 20, max: 200 }),
        async (bursts, capacity, ratePerSecond) => {
          const { clock, fleet } = fleetOf(2, capacity, ratePerSecond);
          const admitted: { atMs: number; cost: number }[] = [];
          try {
            for (const b of bursts) {
              const limiter = fleet[b.instance]!;
              for (let i = 0; i < b.requests; i++) {
                const d = limiter.tryConsume('k') ?? (await limiter.consume('k'));
                if (d.allowed) admitted.push({ atMs: clock.now(), cost: 1 });
                await settle();
              }
              clock.advance(b.advanceMs);
            }
            expectFleetBound(admitted, capacity, ratePerSecond);
          } finally {
            await Promise.all(fleet.map((l) => l.close()));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
