import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { IDLE_BEAT_MS } from '../src/tiered/fleet-registry.js';
import { expectBound, playBursts, request, settle } from './lease-properties.js';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

describe('TieredLimiter periodic sync', () => {
  it('syncs every instances ÷ (0.9 × fleetCallsPerSecond), and the period follows the live fleet', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const fleet = [0, 1, 2].map(() => limiter(store, clock, { sync: { fleetCallsPerSecond: 10 } }));
    // One instance until the first heartbeat: 1 ÷ 9 per second (a tenth of the budget is left to
    // out-of-band calls).
    expect(fleet[0]!.stats().syncPeriodMs).toBe(111);
    await advance(100);
    // Holding no key, each beats once per IDLE_BEAT_MS at most: the first two learn of the third
    // at their next beat, 444 and 555 ms in. Time goes in steps, so that each tick reads its own.
    for (let ms = 100; ms < 700; ms += 10) await advance(10);
    // Three live instances: 3 ÷ 9 per second, and every stats() says so.
    expect(fleet.map((l) => l.stats().instances)).toEqual([3, 3, 3]);
    expect(fleet.map((l) => l.stats().syncPeriodMs)).toEqual([333, 333, 333]);
  });

  it('counts instances by instanceId: two limiters given one id are one instance of the fleet', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const ids = ['checkout-1', 'checkout-1', 'checkout-2'];
    const fleet = ids.map((instanceId) =>
      limiter(store, clock, { instanceId, sync: { fleetCallsPerSecond: 10 } }),
    );
    for (let ms = 0; ms < 700; ms += 10) await advance(10);
    expect(fleet.map((l) => l.stats().instances)).toEqual([2, 2, 2]);
    // Each id is what it registered: one more limiter under a third id makes three.
    fleet.push(limiter(store, clock, { instanceId: 'checkout-3', sync: { fleetCallsPerSecond: 10 } }));
    for (let ms = 0; ms < 700; ms += 10) await advance(10);
    expect(fleet.map((l) => l.stats().instances)).toEqual([3, 3, 3, 3]);
  });

  it('reports a live fleet larger than the declared one', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const declared = limiter(store, clock, { instances: 2, sync: { fleetCallsPerSecond: 20 } });
    limiter(store, clock, { instances: 2, sync: { fleetCallsPerSecond: 20 } });
    limiter(store, clock, { instances: 2, sync: { fleetCallsPerSecond: 20 } });
    const seen: unknown[] = [];
    declared.on('fleet', (info) => seen.push(info));
    // Idle, it beats again once IDLE_BEAT_MS has passed since its first beat (111 ms), at the tick
    // of 444 ms. Time goes in steps, so that each tick reads its own.
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(seen).toContainEqual({ instances: 3, declared: 2 });
  });

  it('beats once per IDLE_BEAT_MS while it holds no key, every period while it does, and stays registered', async () => {
    const { clock, advance } = fakeTime();
    const idleStore = new CountingStore(new MemoryStore({ clock }));
    const idle = limiter(idleStore, clock, { sync: { fleetCallsPerSecond: 20 } });
    // The busy one shares the idle one's buckets and fleet registry, through a store of its own.
    const busyStore = new CountingStore(idleStore.inner);
    const busy = limiter(busyStore, clock, { sync: { fleetCallsPerSecond: 20 } });
    const seenByBusy = new Set<number | undefined>();
    for (let ms = 0; ms < 2000; ms += 5) {
      busy.tryConsume('hot') ?? (await busy.consume('hot'));
      await advance(5);
      if (ms >= 300) seenByBusy.add(busy.stats().instances);
    }
    // Two instances: a 111 ms period, 18 periods in 2 s.
    expect(busy.stats().syncPeriodMs).toBe(111);
    expect(busyStore.heartbeats).toBeGreaterThanOrEqual(16);
    expect(idleStore.heartbeats).toBeLessThanOrEqual(2000 / IDLE_BEAT_MS + 1);
    expect(idleStore.heartbeats).toBeGreaterThanOrEqual(2000 / (IDLE_BEAT_MS + 111) - 1);
    // Its registration never lapsed: the busy one counted it at every step; and it knows the fleet.
    expect([...seenByBusy]).toEqual([2]);
    expect(idle.stats().instances).toBe(2);
  });

  it('wakes once per IDLE_BEAT_MS while it holds no key, and every period from the moment it holds one', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 1 });
    const periodMs = l.stats().syncPeriodMs!;
    expect(periodMs).toBeLessThan(IDLE_BEAT_MS / 4);
    // Idle for 1 s: every timer it sets is its lease book's next tick (no request, no store call
    // waiting on a timeout).
    const timers = vi.spyOn(globalThis, 'setTimeout');
    for (let ms = 0; ms < 1000; ms += 10) await advance(10);
    expect(timers.mock.calls.length).toBeLessThanOrEqual(1000 / IDLE_BEAT_MS + 1);
    // 10 ms past an idle tick (it beat), a key is asked for until the sync holds it: its first
    // hit is a take, the next one makes its lease. The next tick, which syncs it and beats, comes
    // a period later, not at the next idle tick.
    const idleBeats = store.heartbeats;
    while (store.heartbeats === idleBeats) await advance(5);
    await advance(10);
    for (let i = 0; i < 3; i++) l.tryConsume('k') ?? (await l.consume('k'));
    const beatsBefore = store.heartbeats;
    const heldAtMs = clock.now();
    while (clock.now() < heldAtMs + periodMs + 10) await advance(5);
    expect(store.heartbeats).toBeGreaterThan(beatsBefore);
    expect(store.ops.some((op) => op.key === 'k' && op.background === true)).toBe(true);
  });

  it('leases a hot key ahead of demand and makes about one op per period for it', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 1 }); // 50 ms
    let waited = 0;
    let decisions = 0;
    for (let ms = 0; ms < 2000; ms += 5) {
      // 200 requests a second (1 per 5 ms) under a limit of 100/s with a burst of 100.
      let d = l.tryConsume('hot');
      if (d === undefined) {
        waited++;
        d = await l.consume('hot');
      }
      decisions++;
      expect(d.tier).not.toBe('fallback');
      await advance(5);
    }
    const ops = store.ops.filter((op) => op.key === 'hot').length;
    // 2 s of 50 ms periods: about 40 syncs, plus what waiters asked out of band.
    expect(ops).toBeLessThanOrEqual(40 + waited + 2);
    expect(waited).toBeLessThan(decisions / 2);
  });

  it('hands expired tokens back inside the sync, never in a call of their own', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 1 });
    for (let i = 0; i < 40; i++) {
      l.tryConsume('k') ?? (await l.consume('k'));
      await advance(5);
    }
    // A second's quiet, long enough for the key's last grants (it turned quiet, so they live two
    // periods and the sync between sends nothing) to expire and go back with a sync.
    for (let i = 0; i < 20; i++) await advance(50);
    const returned = store.ops.flatMap((op) => op.reports ?? []).reduce((sum, r) => sum + r.returned, 0);
    expect(l.stats().tokensExpired).toBeGreaterThan(0);
    expect(returned).toBe(l.stats().tokensExpired);
    // Every op with a hand-back was made by a sync tick (the store saw a heartbeat in the same tick).
    expect(store.heartbeats).toBeGreaterThan(10);
  });

  it('marks what no caller waits on (syncs, hand-backs) as background, and what one waits on not', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 1 }); // 50 ms
    const kinds = { waited: new Set<boolean>(), background: new Set<boolean>() };
    /** Files the ops `step` made under `kind`: their `background` flags. */
    const made = async (kind: keyof typeof kinds, step: () => Promise<unknown>) => {
      const before = store.ops.length;
      await step();
      for (const op of store.ops.slice(before)) kinds[kind].add(op.background === true);
    };
    for (let i = 0; i < 40; i++) {
      if (l.tryConsume('k') === undefined) await made('waited', () => l.consume('k'));
      await made('background', () => advance(5));
    }
    // `reward` and `penalty` have their caller waiting on them.
    await made('waited', () => l.reward('k', 1));
    await made('waited', () => l.penalty('k', 1));
    await made('background', () => l.close());
    expect(kinds).toEqual({ waited: new Set([false]), background: new Set([true]) });
  });

  it('keeps capacity + rate × (window + sync period) across a fleet syncing on its own schedule', async () => {
    const step = fc.record({
      instance: fc.integer({ min: 0, max: 2 }),
      requests: fc.integer({ min: 0, max: 15 }),
      advanceMs: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 20, max: 400 })),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 2, max: 30 }),
        fc.integer({ min: 5, max: 300 }),
        async (steps, capacity, rate) => {
          const { clock, advance } = fakeTime();
          const store = new MemoryStore({ clock });
          const limits = defineLimit({ capacity, refillPerSecond: rate });
          const fleet = [0, 1, 2].map(() =>
            limiter(store, clock, { limits, failurePolicy: 'closed', sync: { fleetCallsPerSecond: 60 } }),
          );
          try {
            const admitted = await playBursts(fleet, steps, clock, advance);
            // Three live instances at 60 calls a second: a 56 ms period (3 ÷ (0.9 × 60) s), the
            // most a lease borrows.
            expect(Math.max(...fleet.map((l) => l.stats().syncPeriodMs ?? 0))).toBeLessThanOrEqual(56);
            expectBound(admitted, capacity, rate, 56);
          } finally {
            await Promise.all(fleet.map((l) => l.close()));
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('TieredLimiter optimistic cold start', () => {
  const base = { store: new MemoryStore(), limits: defineLimit({ capacity: 100, refillPerSecond: 10 }) };

  it('is refused, naming the rule, where it would let the fleet run far past the limit', () => {
    const optimistic = { mode: 'optimistic' as const };
    expect(
      () => new TieredLimiter({ ...base, failurePolicy: 'closed', instances: 2, coldStart: optimistic }),
    ).toThrow(/coldStart\.mode.*closed/);
    expect(() => new TieredLimiter({ ...base, failurePolicy: 'open', coldStart: optimistic })).toThrow(
      /`instances`/,
    );
    // 200 instances × 1 token = 200 > 0.1 × 100.
    expect(
      () => new TieredLimiter({ ...base, failurePolicy: 'open', instances: 200, coldStart: optimistic }),
    ).toThrow(/coldStart\.credit.*0\.1 × capacity/);
    expect(
      () =>
        new TieredLimiter({
          ...base,
          failurePolicy: 'open',
          instances: 5,
          coldStart: { mode: 'optimistic', credit: 2, spacingMs: 10 },
        }),
    ).toThrow(/coldStart\.spacingMs.*at least/);
  });

  /** Optimistic limiters of a declared fleet of 2 with the periodic sync on (a 111 ms period alone, 167 ms at 3). */
  const fleetOf2 = {
    instances: 2,
    sync: { fleetCallsPerSecond: 20 },
    coldStart: { mode: 'optimistic', credit: 1 },
  } as const;

  it('gives no credit while the live fleet is larger than the declared one, and gives it again once one closes', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const first = limiter(store, clock, fleetOf2);
    await settle();
    // Its first heartbeat, sent as it was made, counted one instance: credit a spacing later
    // (max(lease 173 ms, N·c ÷ r 20 ms)), not before.
    expect(first.tryConsume('early')).toBeUndefined();
    for (let ms = 0; ms < 180; ms += 10) await advance(10);
    expect(first.tryConsume('a')).toMatchObject({ allowed: true, tier: 'local' });
    const second = limiter(store, clock, fleetOf2);
    const third = limiter(store, clock, fleetOf2);
    const seen: unknown[] = [];
    first.on('fleet', (info) => seen.push(info));
    await settle();
    // The third's own first heartbeat counted three: a new key goes the exact way.
    expect(third.stats().instances).toBe(3);
    expect(third.tryConsume('b')).toBeUndefined();
    expect(await third.consume('b')).toMatchObject({ allowed: true, tier: 'global' });
    // The first learns of three at a beat of its own, and stops too.
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(seen).toContainEqual({ instances: 3, declared: 2 });
    expect(first.tryConsume('c')).toBeUndefined();
    expect(second.tryConsume('c')).toBeUndefined();
    expect([first, second, third].map((l) => l.stats().tokensOptimistic)).toEqual([1, 0, 0]);
    // One closes and leaves the registry: the others count two again at their next beats, well
    // before its registration would have lapsed (3 × 167 ms + 1 s).
    await third.close();
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(first.tryConsume('d')).toMatchObject({ allowed: true, tier: 'local' });
    expect(second.tryConsume('e')).toMatchObject({ allowed: true, tier: 'local' });
  });

  it('gives no credit once its last heartbeat is older than its registration (a process stalled past it may have been replaced)', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const l = limiter(store, clock, fleetOf2);
    await settle();
    for (let ms = 0; ms < 180; ms += 10) await advance(10);
    expect(l.tryConsume('a')).toMatchObject({ tier: 'local' });
    // Time passes with no timer run: the registration (3 × 111 ms + 1 s, from its one beat at 0)
    // has lapsed, unrenewed.
    clock.advance(1400);
    expect(l.tryConsume('b')).toBeUndefined();
    // Its timer runs again and it beats (within two periods): the fleet is known again from that
    // answer, and credit comes a spacing (173 ms) after it, as for an instance just made.
    await advance(120);
    expect(l.tryConsume('c')).toBeUndefined();
    for (let ms = 0; ms < 400; ms += 10) await advance(10);
    expect(l.tryConsume('d')).toMatchObject({ tier: 'local' });
  });

  it('admits a key it has no state for at once, and charges it to the store in the same tick', async () => {
    const clock = new FakeClock(0);
    const memory = new MemoryStore({ clock });
    const store = new CountingStore(memory);
    const l = limiter(store, clock, {
      instances: 2,
      failurePolicy: 'open',
      sync: false,
      coldStart: { mode: 'optimistic', credit: 2 },
    });
    // An instance gives credit from a spacing (max(lease 1 s, N·c ÷ r 40 ms)) into its life on.
    clock.advance(1000);
    const first = l.tryConsume('new', 2);
    expect(first).toMatchObject({ allowed: true, tier: 'local' });
    await settle();
    expect(store.ops).toEqual([expect.objectContaining({ key: 'new', debit: 2 })]);
    expect((await memory.apply({ key: 'new', limits: l.limits })).remaining).toBe(98);
    // The key has state now: the next request goes the exact way.
    expect(l.tryConsume('new')).toBeUndefined();
    expect(l.stats().tokensOptimistic).toBe(2);
  });

  /**
   * A limiter with optimistic cold start (credit 1, 2 instances, leases on demand) on a counting
   * store, made a spacing (1 s: the lease's lifetime) ago, so that it gives credit.
   */
  function optimistic(options: Partial<TieredLimiterOptions> = {}) {
    const clock = new FakeClock(0);
    const store = new CountingStore(new MemoryStore({ clock }));
    const coldStart = { mode: 'optimistic' as const, credit: 1 };
    const l = limiter(store, clock, { instances: 2, sync: false, coldStart, ...options });
    clock.advance(1000);
    return { clock, store, l };
  }

  it('admits 100,000 new keys within one spacing on credit while the store keeps up with the charges', async () => {
    const { store, l } = optimistic({ maxKeys: 100_000 });
    let onCredit = 0;
    for (let i = 0; i < 100_000; i++) {
      if (l.tryConsume(`user:${i}`)?.tier === 'local') onCredit++;
      // A server's turn of the event loop: the charges of the turn go out at its end.
      if (i % 50 === 49) await settle();
    }
    // A table of 65,536 slots written on every start refused a slot's second key within the
    // spacing: about half of these.
    expect(onCredit).toBe(100_000);
    await settle();
    expect(store.ops.filter((op) => op.debit === 1)).toHaveLength(100_000);
    expect(l.stats().tokensOptimistic).toBe(100_000);
  });

  it('gives credit while few charges wait: past 128 a new key goes the exact way until they are answered', async () => {
    const { store, l } = optimistic();
    const burst = Array.from({ length: 134 }, (_, i) => l.tryConsume(`k${i}`));
    expect(burst.slice(0, 128).every((d) => d?.tier === 'local')).toBe(true);
    expect(burst.slice(128).every((d) => d === undefined)).toBe(true);
    // The 128 charges leave together at the end of the turn, and once answered make room.
    await settle();
    await settle();
    expect(store.ops.filter((op) => op.debit === 1)).toHaveLength(128);
    expect(l.tryConsume('k134')).toMatchObject({ allowed: true, tier: 'local' });
  });

  it('takes the mark of a key first taken the exact way when the key starts on credit', async () => {
    const { l } = optimistic();
    for (let i = 0; i < 128; i++) l.tryConsume(`k${i}`);
    // 128 charges wait: a new key goes the exact way, a take and a mark.
    expect(l.tryConsume('late')).toBeUndefined();
    expect(await l.consume('late')).toMatchObject({ allowed: true, tier: 'global' });
    expect(l.stats()).toMatchObject({ keysSeenOnce: 1 });
    await settle();
    await settle();
    // Back once the charges are answered: on credit, and no longer a key seen once.
    expect(l.tryConsume('late')).toMatchObject({ allowed: true, tier: 'local' });
    expect(l.stats()).toMatchObject({ keys: 129, keysSeenOnce: 0 });
  });

  it('starts a key optimistically again only a spacing later, even when its lease left the table', async () => {
    // One key at a time in the table: each new key evicts the other.
    const { clock, l } = optimistic({
      maxKeys: 1,
      coldStart: { mode: 'optimistic', credit: 1, spacingMs: 1000 },
    });
    expect(l.tryConsume('a')).toMatchObject({ tier: 'local' });
    expect(l.tryConsume('b')).toMatchObject({ tier: 'local' }); // evicts a, started now
    await settle();
    clock.advance(998);
    expect(l.tryConsume('a')).toBeUndefined(); // no lease, but started 998 ms ago: the exact way
    expect(await l.consume('a')).toMatchObject({ allowed: true, tier: 'global' }); // evicts b
    clock.advance(1);
    expect(l.tryConsume('b')).toBeUndefined(); // b started at 0 too, and its lease is gone
    await l.consume('b'); // evicts a, whose lease the exact way began
    clock.advance(1);
    expect(l.tryConsume('a')).toMatchObject({ tier: 'local' }); // a spacing since its start
  });

  it('keeps C + r·W + N·c·(1 + ⌊W/S⌋) with cold keys arriving across the fleet', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            instance: fc.integer({ min: 0, max: 1 }),
            key: fc.integer({ min: 0, max: 3 }),
            advanceMs: fc.oneof(
              fc.constant(0),
              fc.integer({ min: 1, max: 50 }),
              fc.integer({ min: 300, max: 3000 }),
            ),
          }),
          { minLength: 1, maxLength: 80 },
        ),
        async (steps) => {
          const clock = new FakeClock(0);
          const store = new MemoryStore({ clock });
          const capacity = 20;
          const rate = 5;
          const coldStart = { mode: 'optimistic' as const, credit: 1 };
          const options = {
            limits: defineLimit({ capacity, refillPerSecond: rate }),
            instances: 2,
            sync: false as const,
            coldStart,
          };
          const fleet = [limiter(store, clock, options), limiter(store, clock, options)];
          const spacingMs = 1000; // max(lease 1 s, N·c ÷ r = 400 ms)
          const admitted = new Map<number, { atMs: number; cost: number }[]>();
          for (const s of steps) {
            const d = await request(fleet[s.instance]!, `k${s.key}`);
            if (d.allowed)
              admitted.set(s.key, [...(admitted.get(s.key) ?? []), { atMs: clock.now(), cost: 1 }]);
            await settle();
            clock.advance(s.advanceMs);
          }
          for (const stamps of admitted.values()) {
            // The pure bound plus N·c per spacing the window touches.
            const sorted = stamps.map((a) => a.atMs).sort((a, b) => a - b);
            for (let i = 0; i < sorted.length; i++) {
              for (let j = i; j < sorted.length; j++) {
                const w = sorted[j]! - sorted[i]!;
                const bound = capacity + (rate * w) / 1000 + 2 * 1 * (1 + Math.floor(w / spacingMs));
                expect(j - i + 1).toBeLessThanOrEqual(bound + 1e-9);
              }
            }
          }
          await Promise.all(fleet.map((l) => l.close()));
        },
      ),
      { numRuns: 100 },
    );
  });
});
