import { type Decision, defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';
import { settle } from './lease-properties.js';

// Weighted requests and the two-tier limiter's denials (docs/DECISIONS.md, "Weighted decisions"):
// the wait told is the wait for the whole cost.

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
])('TieredLimiter %s, a weighted request that joined a call asking for less', (_how, extra) => {
  it('is told the wait for its whole cost, as RequestLimiter tells it', async () => {
    const clock = new FakeClock(1000);
    const six = defineLimit({ name: 'six', capacity: 6, refillPerSecond: 1 });
    const common = { limits: six, failurePolicy: 'closed' as const, clock, timeoutMs: 10_000 };
    const tiered = new TieredLimiter({
      ...common,
      store: new MemoryStore({ clock }),
      instances: 1,
      ...extra,
    });
    const exact = new RequestLimiter({ ...common, store: new MemoryStore({ clock }) });
    open.push(tiered, exact);
    const waits: number[][] = [];
    for (const l of [tiered, exact]) {
      expect((await l.consume('k', 6)).allowed).toBe(true);
      await settle();
    }
    // Half a token back: a cost of 1 and a cost of 3 at once; the second joins the first's call.
    clock.advance(500);
    for (const l of [tiered, exact]) {
      const both = await Promise.all([l.consume('k', 1), l.consume('k', 3)]);
      expect(both.map((d) => d.allowed)).toEqual([false, false]);
      waits.push(both.map((d) => d.retryAfterMs));
    }
    expect(waits[1]).toEqual([500, 2500]);
    // Before: [500, 500] ([480, 480] with the sync): the reply to the call asking for one token.
    expect(waits[0]![1]).toBeGreaterThanOrEqual(2400);
    expect(waits[0]![1]).toBeLessThanOrEqual(2500);
    clock.advance(waits[0]![1]!);
    expect(await decide(tiered, 3)).toMatchObject({ allowed: true });
  });
});

describe.each([
  ['with the sync', {}],
  ['with sync: false', { sync: false as const }],
])('TieredLimiter %s, a weighted request told its wait from memory', (_how, extra) => {
  it('waits from when the store said one token could pass, not from the whole tokens left', async () => {
    const clock = new FakeClock(1000);
    const six = defineLimit({ name: 'six', capacity: 6, refillPerSecond: 1 });
    const tiered = new TieredLimiter({
      limits: six,
      failurePolicy: 'closed',
      clock,
      store: new MemoryStore({ clock }),
      instances: 1,
      ...extra,
    });
    open.push(tiered);
    expect((await decide(tiered, 6)).allowed).toBe(true);
    clock.advance(500);
    // Half a token: a cost of 1 is turned away for 500 ms (480 borrowing the sync's period), and remembered.
    const one = await decide(tiered, 1);
    expect(one).toMatchObject({ allowed: false });
    // A cost of 3 from memory: two more tokens after that one. Before: 3,000 (2,980), as if the
    // bucket held 0 tokens rather than 0.5.
    const three = tiered.tryConsume('k', 3);
    expect(three).toMatchObject({ allowed: false, tier: 'lease', retryAfterMs: one.retryAfterMs + 2000 });
    clock.advance(three!.retryAfterMs);
    expect(await decide(tiered, 3)).toMatchObject({ allowed: true });
  });
});

describe('TieredLimiter, a weighted request turned away while the lease holds tokens', () => {
  it('counts what the lease holds in `remaining`, as RequestLimiter counts the bucket', async () => {
    const clock = new FakeClock(1000);
    const six = defineLimit({ name: 'six', capacity: 6, refillPerSecond: 1 });
    const common = { limits: six, failurePolicy: 'closed' as const, clock, timeoutMs: 10_000 };
    // Every lease at least 3: the first request leases 3 and spends 1, 2 held, 3 in the bucket.
    const tiered = new TieredLimiter({
      ...common,
      store: new MemoryStore({ clock }),
      instances: 1,
      lease: { minBatch: 3 },
    });
    const exact = new RequestLimiter({ ...common, store: new MemoryStore({ clock }) });
    open.push(tiered, exact);
    for (const l of [tiered, exact]) expect((await decide(l, 1)).allowed).toBe(true);
    const [mine, theirs] = [await decide(tiered, 6), await decide(exact, 6)];
    expect(theirs).toMatchObject({ allowed: false, remaining: 5, retryAfterMs: 1000 });
    // Before: remaining 3, the bucket's alone.
    expect(mine).toMatchObject({ allowed: false, remaining: 5 });
  });
});
