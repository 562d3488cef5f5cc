// The `local` failure policy of a fleet that outgrew its declared `instances`: the limit is divided
// by the live count the registry last reported (never by less than the declared one), so an
// autoscaled fleet still admits about the global limit during an outage.
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { LosableStore } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { fakeTime, limiter } from './sync-kit.js';

const LIMIT = defineLimit({ name: 'api', capacity: 120, refillPerSecond: 60 });
const LOCAL = {
  failurePolicy: 'local',
  instances: 2,
  limits: LIMIT,
  sync: { fleetCallsPerSecond: 20 },
} as const;

function fleetOf(count: number, shared: MemoryStore, clock: Parameters<typeof limiter>[1]) {
  return Array.from({ length: count }, () => {
    const store = new LosableStore(shared);
    return { store, limiter: limiter(store, clock, LOCAL) };
  });
}

/** The fallback's capacity and rate, as the limiter announces them (and the HTTP headers do). */
function fallbackOf(l: ReturnType<typeof limiter>) {
  const [spec] = l.fallbackLimits!;
  return { capacity: spec!.capacity, refillPerSecond: spec!.refillPerSecond };
}

describe('the local failure policy follows the live fleet when it outgrows the declared one', () => {
  it('three instances declaring two: each falls back to a third of the limit, and to half once one leaves', async () => {
    const { clock, advance } = fakeTime();
    const shared = new MemoryStore({ clock });
    const fleet = fleetOf(3, shared, clock);
    expect(fallbackOf(fleet[0]!.limiter)).toEqual({ capacity: 60, refillPerSecond: 30 });
    // Every instance beats within IDLE_BEAT_MS and a period, and learns of three.
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    for (const { limiter: l } of fleet) {
      expect(l.stats().instances).toBe(3);
      expect(fallbackOf(l)).toEqual({ capacity: 40, refillPerSecond: 20 });
    }
    // Redis goes away for the first: a fresh key is decided by the local policy, at a third.
    const { store, limiter: first } = fleet[0]!;
    store.lost = true;
    const decisions = [];
    for (let i = 0; i < 60; i++) decisions.push(await first.consume('outage'));
    expect(decisions.every((d) => d.tier === 'fallback' && d.policy === 'local')).toBe(true);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(40);
    // While it is away, its count cannot change (its beats fail): still a third.
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(fallbackOf(first)).toEqual({ capacity: 40, refillPerSecond: 20 });
    store.lost = false;
    // One closes and leaves the registry: the others count two, the declared floor.
    await fleet[2]!.limiter.close();
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(fallbackOf(fleet[1]!.limiter)).toEqual({ capacity: 60, refillPerSecond: 30 });
  });

  it('never divides by fewer than declared, and keeps the live count through setLimits', async () => {
    const { clock, advance } = fakeTime();
    const shared = new MemoryStore({ clock });
    const alone = fleetOf(1, shared, clock)[0]!.limiter;
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(alone.stats().instances).toBe(2);
    expect(fallbackOf(alone)).toEqual({ capacity: 60, refillPerSecond: 30 });
    fleetOf(3, shared, clock);
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(fallbackOf(alone)).toEqual({ capacity: 30, refillPerSecond: 15 });
    alone.setLimits(defineLimit({ name: 'api', capacity: 240, refillPerSecond: 120 }));
    expect(fallbackOf(alone)).toEqual({ capacity: 60, refillPerSecond: 30 });
  });

  it('a key keeps what it spent when the count changes: its tokens are cut to the new capacity, not refilled to it', async () => {
    const { clock, advance } = fakeTime();
    const shared = new MemoryStore({ clock });
    const [first, second] = fleetOf(2, shared, clock);
    for (let ms = 0; ms < 500; ms += 10) await advance(10);
    expect(fallbackOf(first!.limiter)).toEqual({ capacity: 60, refillPerSecond: 30 });
    const spend = async (count: number) => {
      let admitted = 0;
      for (let i = 0; i < count; i++) if ((await first!.limiter.consume('k')).allowed) admitted++;
      return admitted;
    };
    // An outage of its own: 59 of the key's 60 local tokens spent.
    first!.store.lost = true;
    expect(await spend(59)).toBe(59);
    first!.store.lost = false;
    // Two more instances join; within 600 ms every instance has beaten twice: the fallback shrinks to 30.
    fleetOf(2, shared, clock);
    for (let ms = 0; ms < 600; ms += 10) await advance(10);
    expect(second!.limiter.stats().instances).toBe(4);
    expect(fallbackOf(first!.limiter)).toEqual({ capacity: 30, refillPerSecond: 15 });
    // Down again: the key has its 1 and at most 600 ms of refill at 30/s (18), not a new 30.
    first!.store.lost = true;
    const admitted = await spend(40);
    expect(admitted).toBeGreaterThanOrEqual(1);
    expect(admitted).toBeLessThanOrEqual(19);
  });
});
