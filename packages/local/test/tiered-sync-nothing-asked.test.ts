import { type BucketReply, defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { expectBound } from './lease-properties.js';
import { fakeTime, limiter } from './sync-kit.js';

// A counterexample of the accuracy fuzz (docs/DECISIONS.md, 2026-12-05), fixed. A key gone quiet
// gets a sync that asks for nothing: it only hands back what its last grant kept. Requests that
// found the lease empty while that op was out joined it as they join a refill, and its reply
// (`ok`: a token would pass now, nothing taken) admitted every one of them.
describe('TieredLimiter: a request that joined a sync asking nothing', () => {
  it('is not admitted by its reply: it asks the store for its own token', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    const held: (() => void)[] = [];
    // A store slow to answer only the ops that ask nothing, so that requests can join one.
    const store: GlobalStore = {
      apply(op) {
        const reply = inner.apply(op);
        const asks = op.take !== undefined || op.reserve !== undefined || op.credit !== undefined;
        if (asks || op.debit !== undefined) return reply;
        return new Promise<BucketReply>((resolve) => held.push(() => resolve(reply)));
      },
      reset: (key, limits) => inner.reset(key, limits),
    };
    const capacity = 100;
    const rate = 100;
    const l = limiter(store, clock, {
      limits: defineLimit({ capacity, refillPerSecond: rate }),
      instances: 1,
      timeoutMs: 1000,
    });
    const admitted: { atMs: number; cost: number }[] = [];
    const request = (): Promise<void> =>
      l.consume('k').then((d) => {
        if (d.allowed) admitted.push({ atMs: clock.now(), cost: 1 });
      });
    // A key asked 200 times a second for 100 ms, then not at all: its syncs hand back what it
    // holds, the last with nothing asked.
    for (let t = 0; t < 100; t += 5) {
      await request();
      await advance(5);
    }
    for (let waited = 0; held.length === 0 || l.stats().tokensHeld > 0; waited++) {
      expect(waited).toBeLessThan(5000);
      for (const answer of held.splice(0)) answer();
      await advance(1);
    }
    const before = admitted.length;
    const burst = Array.from({ length: 3 * capacity }, request);
    for (const answer of held.splice(0)) answer();
    await advance(1);
    for (const answer of held.splice(0)) answer();
    await Promise.all(burst);
    // Before: all 300 admitted at once, from a bucket of 100.
    expect(admitted.length - before).toBeLessThanOrEqual(capacity + 2);
    expectBound(admitted, capacity, rate, l.stats().syncPeriodMs!);
  });
});
