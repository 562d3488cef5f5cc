import { type BucketOp, type Decision, defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { MemoryStore, type TieredLimiter } from '@tiered-limiter/local';
import { type FakeClock, seededRandom } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { ROUND_SLICE } from '../src/tiered/round-pacer.js';
import { expectBound, settle } from './lease-properties.js';
import { atRandom, CountingStore, fakeTime, limiter } from './sync-kit.js';

// The periodic sync at fleet scale (issue 11), on fake time: what the hot path answers alone,
// what a lease borrows, a key held at its limit, and 200 instances sharing 10 keys.

describe('TieredLimiter periodic sync at fleet scale', () => {
  it('answers from a newer grant when the head grant has expired, with no promise', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, {
      limits: defineLimit({ capacity: 1000, refillPerSecond: 1000 }),
      sync: { fleetCallsPerSecond: 20 },
      instances: 1,
    });
    const promised: number[] = [];
    for (let ms = 0; ms < 2000; ms += 5) {
      // 200 a second under a limit of 1,000: each sync's grant overlaps the one before it, which
      // expires 50 ms into the new one's life.
      let d = l.tryConsume('k');
      if (d === undefined) {
        promised.push(ms);
        d = await l.consume('k');
      }
      expect(d.allowed).toBe(true);
      await advance(5);
    }
    // 1 ÷ (0.9 × 20) s.
    expect(l.stats().syncPeriodMs).toBe(56);
    // The key's first request (a take: a key seen once keeps no lease) and its second (its first
    // lease); after that, the lease answers every one.
    expect(promised).toEqual([0, 5]);
  });

  it('costs a key seen once one op, and nothing at the syncs; a key seen twice within a period is leased', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    // One instance: the sync runs every 20 ms, its shortest period.
    const l = limiter(store, clock, {
      limits: defineLimit({ capacity: 100, refillPerSecond: 10 }),
      instances: 1,
    });
    for (let i = 0; i < 1000; i++) {
      expect((l.tryConsume(`once-${i}`) ?? (await l.consume(`once-${i}`))).allowed).toBe(true);
      if (i % 10 === 9) await advance(2);
    }
    await advance(1000);
    const onceOps = store.ops.filter((op) => op.key.startsWith('once-'));
    expect(onceOps.length).toBe(1000);
    expect(onceOps.every((op) => op.take === 1 && op.reserve === undefined)).toBe(true);
    // Twice within 10 ms: fifty a second is a rate, and the next sync leases for it.
    for (let i = 0; i < 2; i++) {
      l.tryConsume('twice') ?? (await l.consume('twice'));
      await advance(10);
    }
    await advance(20);
    expect(store.ops.some((op) => op.key === 'twice' && (op.reserve?.want ?? 0) > 0)).toBe(true);
  });

  it('borrows one sync period of refill in every take and lease; without the sync, none', async () => {
    const { clock, advance } = fakeTime();
    const synced = new CountingStore(new MemoryStore({ clock }));
    const unsynced = new CountingStore(new MemoryStore({ clock }));
    const a = limiter(synced, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 2 });
    const b = limiter(unsynced, clock, { sync: false, instances: 2 });
    for (let ms = 0; ms < 500; ms += 5) {
      for (const l of [a, b]) l.tryConsume('k') ?? (await l.consume('k'));
      await advance(5);
    }
    const asking = (store: CountingStore) =>
      store.ops.filter((op) => op.take !== undefined || op.reserve !== undefined);
    expect(asking(synced).length).toBeGreaterThan(5);
    expect(asking(unsynced).length).toBeGreaterThan(5);
    expect(new Set(asking(synced).map((op) => op.aheadMs))).toEqual(new Set([a.stats().syncPeriodMs]));
    expect(asking(unsynced).every((op) => op.aheadMs === undefined)).toBe(true);
  });

  it('holds a key at its limit to its share until the next sync: an op a period, near the ideal, within the bound', async () => {
    const { clock, advance } = fakeTime();
    const memory = new MemoryStore({ clock });
    const stores = [0, 1].map(() => new CountingStore(memory));
    const capacity = 20;
    const rate = 200;
    const fleet = stores.map((store) =>
      limiter(store, clock, {
        limits: defineLimit({ capacity, refillPerSecond: rate }),
        sync: { fleetCallsPerSecond: 40 },
      }),
    );
    const admitted: { atMs: number; cost: number }[] = [];
    const durationMs = 2000;
    for (let ms = 0; ms < durationMs; ms++) {
      // Each instance asks 1,000 a second: ten times the limit between them.
      for (const l of fleet) {
        const d = l.tryConsume('hot') ?? (await l.consume('hot'));
        if (d.allowed) admitted.push({ atMs: clock.now(), cost: 1 });
      }
      await advance(1);
    }
    const periodMs = fleet[0]!.stats().syncPeriodMs!;
    // 2 ÷ (0.9 × 40) s.
    expect(periodMs).toBe(56);
    for (const store of stores) {
      // About one op a period (36 in 2 s), and a few while the demand estimate forms.
      expect(store.ops.filter((op) => op.key === 'hot').length).toBeLessThanOrEqual(
        durationMs / periodMs + 8,
      );
    }
    expectBound(admitted, capacity, rate, periodMs);
    const ideal = capacity + (rate * durationMs) / 1000;
    expect(admitted.length).toBeGreaterThanOrEqual(0.95 * ideal);
  });

  it('an instance holding many keys syncs less often: a call per 32 of them, within its share of the budget', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = limiter(store, clock, { limits: defineLimit({ capacity: 1000, refillPerSecond: 1000 }) });
    const keys = Array.from({ length: 640 }, (_, i) => `k${i}`);
    const run = async (ms: number) => {
      // Each key 50 times a second, well under its limit: every key holds a lease.
      for (let end = clock.now() + ms; clock.now() < end; ) {
        for (const key of keys) l.tryConsume(key) ?? (await l.consume(key));
        await advance(20);
      }
    };
    await run(2000);
    const opsBefore = store.ops.length;
    await run(2000);
    // 640 held keys: 20 calls a sync, every 1 × 20 ÷ (0.9 × 200) s. At the lone instance's 20 ms,
    // its syncs alone were 1,000 calls a second.
    expect(l.stats().syncPeriodMs).toBe(111);
    const callsPerSecond = (store.ops.length - opsBefore) / 2 / 32;
    expect(callsPerSecond).toBeLessThanOrEqual(200);
  });

  it('sends a round’s next slice of keys only once the store has answered the one before', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    const ops: BucketOp[] = [];
    const held: (() => void)[] = [];
    let holding = false;
    // A store slower than the slices come: it answers only when the test lets it.
    const store: GlobalStore = {
      apply(op) {
        ops.push(op);
        const reply = inner.apply(op);
        return holding ? new Promise((resolve) => held.push(() => resolve(reply))) : reply;
      },
      reset: (key, limits) => inner.reset(key, limits),
    };
    const l = await threeSlices(store, clock);
    holding = true;
    const before = ops.length;
    // The first round starts at the first period (278 ms) and weighs the keys: three slices, due a
    // third of half its new 5 s period apart.
    await advance(300);
    expect(ops.length - before).toBe(ROUND_SLICE);
    await advance(4000);
    expect(ops.length - before).toBe(ROUND_SLICE);
    for (const answer of held.splice(0)) answer();
    await advance(1000);
    expect(ops.length - before).toBe(2 * ROUND_SLICE);
    holding = false;
    for (const answer of held.splice(0)) answer();
    await advance(1000);
    // Every key once: the round's last slice. The round outlasted its 5 s period, so the next one
    // starts as it ends (tested below), and its ops follow.
    expect(ops.length - before).toBeGreaterThanOrEqual(KEYS);
    expect(new Set(ops.slice(before, before + KEYS).map((op) => op.key)).size).toBe(KEYS);
    expect(l.stats().decisions.fallback).toBe(0);
  });

  it('starts the next round as one that outlasted its period ends, and its grants live as long as a round', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    const sent: { atMs: number; op: BucketOp }[] = [];
    let slow = false;
    // A store that answers 3 s late once the round begins: a round's three slices take 6 s.
    const store: GlobalStore = {
      apply(op) {
        if (!slow) return inner.apply(op);
        sent.push({ atMs: clock.now(), op });
        const reply = inner.apply(op);
        return new Promise((resolve) => setTimeout(() => resolve(reply), 3_000));
      },
      reset: (key, limits) => inner.reset(key, limits),
    };
    const l = await threeSlices(store, clock);
    slow = true;
    for (let ms = 0; ms < 9_000; ms += 10) await advance(10);
    const first = sent[0]!.atMs;
    const slices = [...new Set(sent.map((s) => s.atMs - first))];
    // Slices at 0, 3 and 6 s; the tick at 5 s found the round under way. The next round starts
    // as it ends (6 s); skipped, it waited for the tick at 10 s, and the keys' grants (5.5 s)
    // expired before their next sync.
    expect(slices.slice(0, 3)).toEqual([0, 3_000, 6_000]);
    const secondRound = sent.filter((s) => s.atMs === first + 6_000).length;
    expect(secondRound).toBeGreaterThan(KEYS - 2 * ROUND_SLICE);
    // The first round's leases are held a period and a tenth, plus a period; the next round's
    // a round (6 s) and a tenth of a period, plus a round: 2 s longer; and, its keys quiet (seen
    // twice long ago), a round more again, as their grants live two intervals.
    const holdOf = (s: { op: BucketOp }) => s.op.reserve?.holdMs;
    const firstHold = holdOf(sent.find((s) => s.op.reserve !== undefined)!)!;
    const lastHold = holdOf(sent.filter((s) => s.op.reserve !== undefined).at(-1)!)!;
    expect(lastHold - firstHold).toBe(2_000 + 6_000);
    expect(l.stats().decisions.fallback).toBe(0);
    slow = false;
    await advance(4_000);
  });

  it('spaces a round’s slices from when each was sent, so that slow answers do not stretch the round past its period', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    const sentAt: number[] = [];
    let slow = false;
    // A store that answers a second late once the round begins.
    const store: GlobalStore = {
      apply(op) {
        if (!slow) return inner.apply(op);
        sentAt.push(clock.now());
        const reply = inner.apply(op);
        return new Promise((resolve) => setTimeout(() => resolve(reply), 1_000));
      },
      reset: (key, limits) => inner.reset(key, limits),
    };
    await threeSlices(store, clock);
    slow = true;
    for (let ms = 0; ms < 7_000; ms += 10) await advance(10);
    // Three slices, 833 ms apart (half of a 5 s period over three), each answered after 1 s: the
    // next leaves as the answer lands. Spaced from the answers, the third left at 3,666 ms.
    expect(sentAt.length).toBeGreaterThanOrEqual(KEYS);
    const slices = [...new Set(sentAt.slice(0, KEYS))].map((ms) => ms - sentAt[0]!);
    expect(slices).toEqual([0, 1_000, 2_000]);
    slow = false;
    await advance(2_000);
  });

  it('sends a round in the store’s call-group order, asking each key’s group once', async () => {
    const { clock, advance } = fakeTime();
    const inner = new MemoryStore({ clock });
    const ops: BucketOp[] = [];
    // Seven groups, keys arriving round-robin across them: in arrival order no two neighbours share one.
    const group = (key: string) => Number(key.slice(1)) % 7;
    let asked = 0;
    const store: GlobalStore = {
      apply(op) {
        ops.push(op);
        return inner.apply(op);
      },
      reset: (key, limits) => inner.reset(key, limits),
      groupOf(key) {
        asked++;
        return group(key);
      },
    };
    const l = limiter(store, clock, { sync: { fleetCallsPerSecond: 20 }, instances: 1, maxKeys: 10_000 });
    const keys = Array.from({ length: 700 }, (_, i) => `k${i}`);
    // Every key twice within a period, so that each is leased and weighed at every round.
    for (let pass = 0; pass < 2; pass++) for (const key of keys) await l.consume(key);
    for (let round = 0; round < 2; round++) {
      const before = ops.length;
      await advance((l.stats().syncPeriodMs ?? 0) + 1);
      // The round's slices follow one another over half a period.
      for (let ms = 0; ops.length - before < 700 && ms < 1_000; ms += 10) await advance(10);
      const sent = ops.slice(before);
      expect(sent.length).toBe(700);
      const groups = sent.map((op) => group(op.key));
      expect(groups).toEqual([...groups].sort((a, b) => a - b));
      // Within a group, keys keep the order they came in.
      expect(sent.filter((op) => group(op.key) === 3).map((op) => op.key)).toEqual(
        Array.from({ length: 100 }, (_, i) => `k${7 * i + 3}`),
      );
      for (const key of keys) l.tryConsume(key) ?? (await l.consume(key));
    }
    expect(asked).toBe(700);
  });

  it('200 instances at half the limit of 10 keys: ≤ 1 % of decisions wait, none denied, an op per instance and key per period', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const limit = defineLimit({ capacity: 2000, refillPerSecond: 2000 });
    const fleet: TieredLimiter[] = [];
    for (let i = 0; i < 200; i++) fleet.push(limiter(store, clock, { limits: limit }));
    const random = seededRandom(11);
    const counts = { decisions: 0, waited: 0, denied: 0 };
    const pending: Promise<Decision>[] = [];
    const run = async (ms: number, count: boolean) => {
      for (let end = clock.now() + ms; clock.now() < end; ) {
        // 10,000 a second across the fleet: 20 requests every 2 ms, at random instances and keys.
        for (const [l, key] of atRandom(fleet, random, 20)) {
          const d = l.tryConsume(key);
          if (count) counts.decisions++;
          if (!count) {
            if (d === undefined) void l.consume(key);
          } else if (d === undefined) {
            counts.waited++;
            pending.push(l.consume(key));
          } else if (!d.allowed) counts.denied++;
        }
        await advance(2);
      }
    };
    await run(3000, false);
    const opsBefore = store.ops.length;
    await run(3000, true);
    const decided = await Promise.all(pending.splice(0));
    await settle();
    // 200 live instances at 200 calls a second, 90 % of them for syncs: a 1.11 s period.
    expect(fleet[0]!.stats().syncPeriodMs).toBe(1111);
    expect(counts.waited).toBeLessThanOrEqual(0.01 * counts.decisions);
    expect(counts.denied + decided.filter((d) => !d.allowed).length).toBe(0);
    // 200 instances × 10 keys, an op each per period: 1,800 a second (a call per instance with
    // RedisStore, which carries a sync's 10 ops in one), and a fifth more at the most.
    expect((store.ops.length - opsBefore) / 3).toBeLessThanOrEqual(((200 * 10) / 1.111) * 1.2);
  }, 60_000);
});

/** Keys `threeSlices` holds: two whole slices of a round and most of a third. */
const KEYS = 3 * ROUND_SLICE - 72;

/**
 * A limiter that has seen `KEYS` keys twice each, syncing at 4 calls a second: its rounds go in
 * three slices, half a 5 s period apart (the period's cap). A long timeout, so that a slow store
 * costs no policy decision.
 */
async function threeSlices(store: GlobalStore, clock: FakeClock): Promise<TieredLimiter> {
  const l = limiter(store, clock, {
    sync: { fleetCallsPerSecond: 4 },
    instances: 1,
    maxKeys: 10_000,
    timeoutMs: 60_000,
  });
  // Twice each: a key's first hit is a take and a mark, its second makes the lease the sync weighs.
  for (let i = 0; i < KEYS; i++) {
    await l.consume(`k${i}`);
    await l.consume(`k${i}`);
  }
  return l;
}
