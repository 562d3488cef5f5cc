import { type Decision, defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { settle } from './lease-properties.js';

// A remembered denial and a weighted request under several limits (docs/DECISIONS.md, "Weighted
// decisions"). The lease knows the one limit its last reply spoke of; a request needing more
// than one token more may be held back by another limit for longer.

/** 3 at 10 a second, and 8 at one token per 2 s: a burst limit and a slow one. */
const FAST = defineLimit({ name: 'fast', capacity: 3, refillPerSecond: 10 });
const SLOW = defineLimit({ name: 'slow', capacity: 8, refillPerSecond: 0.5 });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

type Made = TieredLimiter | RequestLimiter;

async function decide(l: Made, cost: number): Promise<Decision> {
  const fast = l instanceof TieredLimiter ? l.tryConsume('k', cost) : undefined;
  const d = fast ?? (await l.consume('k', cost));
  await settle();
  return d;
}

describe.each([
  ['with the sync', {}],
  ['with sync: false', { sync: false as const }],
])('TieredLimiter %s, a weighted request after a remembered denial of one token', (_how, extra) => {
  it('waits as long as the limit that holds it back says, and passes at that wait', async () => {
    const clock = new FakeClock(1000);
    const common = { limits: [FAST, SLOW], failurePolicy: 'closed' as const, clock, timeoutMs: 10_000 };
    const tieredStore = new MemoryStore({ clock });
    const exactStore = new MemoryStore({ clock });
    const tiered = new TieredLimiter({ ...common, store: tieredStore, instances: 1, ...extra });
    const exact = new RequestLimiter({ ...common, store: exactStore });
    open.push(tiered, exact);
    // `slow` down to 4 (another route of the key, say), then `fast` emptied: `slow` is left at 1.
    for (const store of [tieredStore, exactStore]) await store.apply({ key: 'k', limits: [SLOW], take: 4 });
    const both = async (cost: number) => [await decide(tiered, cost), await decide(exact, cost)] as const;
    for (let i = 0; i < 3; i++) expect((await both(1)).map((d) => d.allowed)).toEqual([true, true]);
    // A cost of 1 is turned away by `fast` for 100 ms: the two-tier limiter remembers it.
    const [one] = await both(1);
    expect(one).toMatchObject({ allowed: false, name: 'fast' });
    // A cost of 3 needs `fast` full again (300 ms) and 2 more tokens of `slow` (4,000 ms).
    const [three, store] = await both(3);
    expect(store).toMatchObject({ allowed: false, name: 'slow', retryAfterMs: 4000 });
    // Before: 300 (280 with the sync), `fast`'s, from the lease's memory.
    expect(three).toMatchObject({ allowed: false, name: 'slow' });
    expect(three.retryAfterMs).toBeGreaterThanOrEqual(3900);
    expect(three.retryAfterMs).toBeLessThanOrEqual(4000);
    // Retried at exactly its wait, it passes.
    clock.advance(three.retryAfterMs);
    expect(await decide(tiered, 3)).toMatchObject({ allowed: true });
  });

  it('a blocked key is still turned away in process for its block, whatever the cost', async () => {
    const clock = new FakeClock(1000);
    const store = new MemoryStore({ clock });
    const tiered = new TieredLimiter({
      limits: [FAST, SLOW],
      failurePolicy: 'closed',
      clock,
      store,
      instances: 1,
      ...extra,
    });
    open.push(tiered);
    await decide(tiered, 1);
    tiered.block('k', 5000);
    expect(tiered.tryConsume('k', 3)).toMatchObject({ allowed: false, retryAfterMs: 5000, tier: 'local' });
  });
});
