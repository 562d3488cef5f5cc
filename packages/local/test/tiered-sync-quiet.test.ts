import { type BucketOp, defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import type { FakeClock } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { Lease } from '../src/tiered/lease.js';
import { grantLifeMs, leaseOp } from '../src/tiered/lease-op.js';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

// Quiet keys (the fleet asks for them at most a quarter of their refill rate): the periodic sync
// leases them for two intervals and sends them nothing at the sync between, on fake time.

const syncsOf = (ops: readonly BucketOp[], key: string) =>
  ops.filter((op) => op.key === key && op.background === true && op.reserve !== undefined);

describe('TieredLimiter periodic sync: quiet keys', () => {
  /**
   * One of a fleet of 50 (declared) on a limit of 10,000 a second: a 278 ms period, grants of
   * 328 ms (the period and 50 ms of overlap). A key is quiet at 50 requests a second here or less.
   */
  const member = (store: CountingStore, clock: FakeClock) =>
    limiter(store, clock, {
      limits: defineLimit({ capacity: 10_000, refillPerSecond: 10_000 }),
      instances: 50,
    });

  it('syncs a quiet key every other period on a grant that lives two intervals, a busy key every period', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = member(store, clock);
    const periodMs = l.stats().syncPeriodMs ?? 0;
    expect(periodMs).toBe(278);
    let waited = 0;
    let denied = 0;
    const decide = async (key: string, count: boolean) => {
      let d = l.tryConsume(key);
      if (d === undefined) {
        if (count) waited++;
        d = await l.consume(key);
      }
      if (!d.allowed) denied++;
    };
    // 'quiet' at 20 a second, 'busy' at 200 (the fleet: 1,000 and 10,000).
    const run = async (ms: number, count: boolean) => {
      for (let t = 0; t < ms; t += 5) {
        await decide('busy', count);
        if (t % 50 === 0) await decide('quiet', count);
        await advance(5);
      }
    };
    await run(2000, false);
    const before = store.ops.length;
    const periods = 20;
    await run(periods * periodMs, true);
    const ops = store.ops.slice(before);
    const quiet = syncsOf(ops, 'quiet');
    const busy = syncsOf(ops, 'busy');
    // An op a period for the busy key, one in two for the quiet one.
    expect(busy.length).toBeGreaterThanOrEqual(periods - 1);
    expect(quiet.length).toBeGreaterThanOrEqual(periods / 2 - 1);
    expect(quiet.length).toBeLessThanOrEqual(periods / 2 + 1);
    // The quiet key's grant is held an interval longer, as it lives an interval longer here.
    expect(quiet.at(-1)!.reserve!.holdMs - busy.at(-1)!.reserve!.holdMs).toBe(periodMs);
    // Nothing waits on the store, and nothing is turned away, for either key.
    expect(waited).toBe(0);
    expect(denied).toBe(0);
    expect(l.stats().decisions.fallback).toBe(0);
  });

  it('reports a quiet key’s spends with its next op, and hands its expired tokens back', async () => {
    const { clock, advance } = fakeTime();
    const store = new CountingStore(new MemoryStore({ clock }));
    const l = member(store, clock);
    let admitted = 0;
    for (let t = 0; t < 3000; t += 50) {
      const d = l.tryConsume('quiet') ?? (await l.consume('quiet'));
      if (d.allowed) admitted++;
      await advance(50);
    }
    // The key stops: its grants expire and go back with a sync, its last spends with them (the
    // sync leases it less and less, as its rate decays, until it stops).
    for (let t = 0; t < 2000; t += 50) await advance(50);
    const ops = store.ops.filter((op) => op.key === 'quiet');
    const taken = ops.reduce((sum, op) => sum + (op.take ?? 0), 0);
    const reports = ops.flatMap((op) => op.reports ?? []);
    expect(admitted).toBe(60);
    expect(reports.reduce((sum, r) => sum + r.spent, 0)).toBe(admitted - taken);
    expect(l.stats().tokensExpired).toBeGreaterThan(0);
    expect(reports.reduce((sum, r) => sum + r.returned, 0)).toBe(l.stats().tokensExpired);
  });

  it('asks the store to hold every grant its life here plus the interval and the grace, however many intervals it spans', () => {
    const limits = [defineLimit({ capacity: 100, refillPerSecond: 100 })];
    const timing = { ttlMs: 5_500, holdMs: 5_500 + 5_000 + 2_750, aheadMs: 5_000, spanMs: 5_000 };
    for (const spans of [undefined, 1, 2, 3]) {
      const ask = spans === undefined ? { want: 4, min: 1 } : { want: 4, min: 1, spans };
      const lifeMs = grantLifeMs(ask, timing);
      expect(lifeMs).toBe(5_500 + ((spans ?? 1) - 1) * 5_000);
      const op = leaseOp(new Lease('k', 0, limits[0]!), ask, true, limits, timing);
      expect(op!.reserve!.holdMs - lifeMs).toBe(timing.holdMs - timing.ttlMs);
    }
  });
});
