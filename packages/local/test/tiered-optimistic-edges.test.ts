// Optimistic cold start around its edges: limits that change while it is on, close() in the turn
// that gave credit, a charge the store refused, a key evicted and back. The rule
// (N·credit ≤ 0.1·capacity, spacing ≥ max(L, N·credit ÷ rate)) was weighed at construction alone.
import { ConfigError, defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock, ScriptedStore } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { settle } from './lease-properties.js';
import { fakeTime } from './sync-kit.js';

/** Capacity 100 at 10/s, one instance, credit 10: the default spacing is N·c ÷ r = 1 s. */
const LIMIT = defineLimit({ name: 'api', capacity: 100, refillPerSecond: 10 });
const SPACING_MS = 1000;

function optimistic(
  store: TieredLimiterOptions['store'],
  clock: FakeClock,
  extra: Partial<TieredLimiterOptions> = {},
): TieredLimiter {
  return new TieredLimiter({
    store,
    clock,
    limits: LIMIT,
    sync: false,
    instances: 1,
    failurePolicy: 'open',
    coldStart: { mode: 'optimistic', credit: 10 },
    ...extra,
  });
}

/** A limiter a spacing old on a `MemoryStore`, that has just admitted `cost` for `key` on credit. */
function creditedOnce(key: string, cost: number) {
  const clock = new FakeClock(0);
  const store = new MemoryStore({ clock });
  const l = optimistic(store, clock);
  clock.advance(SPACING_MS);
  expect(l.tryConsume(key, cost)).toMatchObject({ allowed: true, tier: 'local' });
  return { store, l };
}

/** What `key`'s bucket holds now, read with an op that takes nothing. */
async function level(store: MemoryStore, key: string, limits: readonly LimitSpec[] = [LIMIT]) {
  return (await store.apply({ key, limits })).remaining;
}

describe('optimistic cold start when the limits change', () => {
  it('setLimits to a capacity the credit breaks the rule of throws, naming coldStart.credit, and changes nothing', async () => {
    const clock = new FakeClock(0);
    const l = optimistic(new MemoryStore({ clock }), clock);
    // 1 × 10 > 0.1 × 20: construction refuses this; setLimits kept giving 10 on a capacity of 20.
    const small = defineLimit({ name: 'api', capacity: 20, refillPerSecond: 10 });
    let error: unknown;
    try {
      l.setLimits(small);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ option: 'coldStart.credit', value: 10 });
    expect((error as Error).message).toContain('api: 0.1 × 20 ÷ 1');
    expect(l.limits).toEqual([LIMIT]);
    clock.advance(SPACING_MS);
    expect(l.tryConsume('k', 10)).toMatchObject({ allowed: true, tier: 'local', limit: 100 });
    await l.close();
  });

  it('setLimits to a tenth of the rate, with the default spacing, spaces a key by the new N·credit ÷ rate (10 s)', async () => {
    const clock = new FakeClock(0);
    const l = optimistic(new MemoryStore({ clock }), clock, { maxKeys: 1 });
    l.setLimits(defineLimit({ name: 'api', capacity: 100, refillPerSecond: 1 }));
    // Without the sync, credit starts a spacing after the limiter was made: the new one.
    clock.advance(10 * SPACING_MS - 1);
    expect(l.tryConsume('early')).toBeUndefined();
    clock.advance(1);
    expect(l.tryConsume('k', 10)).toMatchObject({ allowed: true, tier: 'local' });
    await settle();
    // Another key takes the only slot: `k`'s lease leaves, its start remembered.
    expect(l.tryConsume('other')).toMatchObject({ tier: 'local' });
    await settle();
    // Past the old spacing, well within the new one: no second credit (it was given at 1 s before).
    clock.advance(2 * SPACING_MS);
    expect(l.tryConsume('k', 10)).toBeUndefined();
    clock.advance(8 * SPACING_MS - 1);
    expect(l.tryConsume('k', 10)).toBeUndefined();
    clock.advance(1);
    expect(l.tryConsume('k', 10)).toMatchObject({ allowed: true, tier: 'local' });
    await l.close();
  });

  it('setLimits whose rate an explicit spacing is too short for throws, naming coldStart.spacingMs and its value', async () => {
    const clock = new FakeClock(0);
    const l = optimistic(new MemoryStore({ clock }), clock, {
      coldStart: { mode: 'optimistic', credit: 10, spacingMs: 2000 },
    });
    const slow = defineLimit({ name: 'api', capacity: 100, refillPerSecond: 1 });
    expect(() => l.setLimits(slow)).toThrow(
      'Expected `coldStart.spacingMs` to be at least max(lease lifetime, N·credit ÷ rate) = 10000 ms, got 2000',
    );
    expect(l.limits).toEqual([LIMIT]);
    // Within the rule it takes them, the explicit spacing kept.
    l.setLimits(defineLimit({ name: 'api', capacity: 200, refillPerSecond: 5 }));
    expect(l.limits[0]!.capacity).toBe(200);
    await l.close();
  });

  it('a setLimits within the rule, while a credit is not yet charged, charges it to the key once', async () => {
    const { store, l } = creditedOnce('k', 10);
    const bigger = defineLimit({ name: 'api', capacity: 200, refillPerSecond: 10 });
    l.setLimits(bigger);
    await settle();
    // The limit kept its name: the key's bucket starts full at 200, less the credit.
    expect(await level(store, 'k', [bigger])).toBe(190);
    await l.close();
    expect(await level(store, 'k', [bigger])).toBe(190);
    expect(l.stats().tokensUnreported).toBe(0);
  });
});

describe('optimistic cold start through close(), failures and evictions', () => {
  it('close() in the turn that gave credit charges it', async () => {
    const { store, l } = creditedOnce('k', 7);
    await l.close();
    expect(await level(store, 'k')).toBe(93);
    expect(l.stats()).toMatchObject({ tokensOptimistic: 7, tokensUnreported: 0 });
  });

  it('a charge the store failed is counted unreported, never sent again, and the key gets no credit again within its spacing', async () => {
    const clock = new FakeClock(0);
    const memory = new MemoryStore({ clock });
    const store = new ScriptedStore(memory);
    const l = optimistic(store, clock, { maxKeys: 1 });
    clock.advance(SPACING_MS);
    expect(l.tryConsume('k', 10)).toMatchObject({ tier: 'local' });
    store.mode = 'reject';
    await settle();
    expect(l.stats()).toMatchObject({ tokensOptimistic: 10, tokensUnreported: 10 });
    store.mode = 'ok';
    const sent = store.calls.length;
    // Evicted by another key's credit, back within the spacing: the exact way, no debit carried.
    expect(l.tryConsume('other')).toMatchObject({ tier: 'local' });
    await settle();
    clock.advance(SPACING_MS - 1);
    expect(l.tryConsume('k', 10)).toBeUndefined();
    expect((await l.consume('k', 10)).tier).toBe('global');
    const debits = store.calls
      .slice(sent)
      .filter((c) => c.method === 'apply' && c.op.key === 'k' && c.op.debit);
    expect(debits).toEqual([]);
    await l.close();
    expect(await level(memory, 'k')).toBe(90);
  });
});

describe('an optimistic charge the breaker refused', () => {
  it('is sent once the store answers, though the key is never asked for again', async () => {
    const { clock, advance } = fakeTime();
    const store = new ScriptedStore(new MemoryStore({ clock }));
    const l = optimistic(store, clock, { breaker: { failureThreshold: 1, cooldownMs: 100 } });
    await advance(SPACING_MS);
    // A failing call a few promise jobs ahead of the credit opens the breaker between the credit
    // and its charge: the number of jobs is the code's, so each is tried in turn.
    let refused: string | undefined;
    let from = 0;
    for (let jobs = 0; jobs < 12 && refused === undefined; jobs++) {
      store.mode = 'reject';
      const failing = l.consume(`fail-${jobs}`, 20);
      for (let i = 0; i < jobs; i++) await Promise.resolve();
      const key = `k${jobs}`;
      const credited = l.tryConsume(key, 5)?.tier === 'local';
      await settle();
      if (credited && !store.calls.some((c) => c.op.key === key)) {
        refused = key;
        from = store.calls.length;
      }
      store.mode = 'ok';
      await failing;
      // The breaker cools down, and a call closes it.
      await advance(200);
      expect((await l.consume(`probe-${jobs}`, 20)).tier).toBe('global');
    }
    expect(refused).toBeDefined();
    await advance(1000);
    const charges = store.calls.slice(from).filter((c) => c.op.key === refused && c.op.debit !== undefined);
    expect(charges.map((c) => c.op.debit)).toEqual([5]);
    // close() finds it charged: not sent twice.
    await l.close();
    const afterClose = store.calls
      .slice(from)
      .filter((c) => c.op.key === refused && c.op.debit !== undefined);
    expect(afterClose).toHaveLength(1);
  });
});

describe("optimistic cold start's rule, weighed exactly", () => {
  it('takes a spacing of exactly N·credit ÷ rate (3 × 3 ÷ 9/s = 1,000 ms), and makes it the default', async () => {
    const clock = new FakeClock(0);
    const options = {
      store: new MemoryStore({ clock }),
      clock,
      limits: defineLimit({ name: 'nine', capacity: 90, refillPerSecond: 9 }),
      sync: false,
      lease: { ttlMs: 500 },
      instances: 3,
      failurePolicy: 'open',
    } as const;
    const given = new TieredLimiter({
      ...options,
      coldStart: { mode: 'optimistic', credit: 3, spacingMs: 1000 },
    });
    await given.close();
    // Without the sync, credit starts a spacing after the limiter was made.
    const byDefault = new TieredLimiter({ ...options, coldStart: { mode: 'optimistic', credit: 3 } });
    clock.advance(999);
    expect(byDefault.tryConsume('early')).toBeUndefined();
    clock.advance(1);
    expect(byDefault.tryConsume('on-time')).toMatchObject({ allowed: true, tier: 'local' });
    await byDefault.close();
  });
});
