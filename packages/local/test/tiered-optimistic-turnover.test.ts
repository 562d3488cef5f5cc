// Optimistic cold start across instances that replace one another (a restart, a crash loop, a
// rolling deploy): the bound's N·c·(1 + ⌊W/S⌋) counts a key's credit once a spacing per declared
// instance, so an instance gives credit only a spacing into an unbroken stretch within the
// declared fleet, and a chain of replacements credits a key no more often than one instance.
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, type TieredLimiter } from '@tiered-limiter/local';
import { optimisticBound, worstWindow } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { request, settle } from './lease-properties.js';
import { fakeTime, limiter } from './sync-kit.js';

const CAPACITY = 100;
const RATE = 10;
/** One declared instance, credit 10: the spacing is N·c ÷ r = 1 s. */
const ONE = {
  limits: defineLimit({ capacity: CAPACITY, refillPerSecond: RATE }),
  instances: 1,
  coldStart: { mode: 'optimistic', credit: 10 },
} as const;
const SPACING_MS = 1000;

describe('optimistic cold start through instances that replace one another', () => {
  it('a chain of ten replacements 5 ms apart gives a key no more credit than one instance would', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const stamps: { atMs: number; cost: number }[] = [];
    const admit = (l: TieredLimiter, cost: number) => {
      const d = l.tryConsume('k', cost);
      if (d?.allowed) stamps.push({ atMs: clock.now(), cost });
    };
    let l = limiter(store, clock, ONE);
    await settle();
    // A spacing in, the first instance gives the key its credit; then drains the bucket.
    for (let ms = 0; ms < SPACING_MS; ms += 10) await advance(10);
    admit(l, 10);
    expect(stamps).toHaveLength(1);
    for (let i = 0; i < 150; i++) {
      const d = await request(l, 'k');
      if (d.allowed) stamps.push({ atMs: clock.now(), cost: 1 });
    }
    const periodMs = l.stats().syncPeriodMs!;
    for (let r = 0; r < 10; r++) {
      await l.close();
      l = limiter(store, clock, ONE);
      await settle();
      admit(l, 10);
      await advance(5);
    }
    // Each replacement counted one live instance at once, and none gave credit within its first spacing.
    expect(l.stats().instances).toBe(1);
    expect(l.stats().tokensOptimistic).toBe(0);
    const bound = optimisticBound(
      CAPACITY,
      RATE,
      { instances: 1, credit: 10, spacingMs: SPACING_MS },
      periodMs,
    );
    expect(worstWindow(stamps, bound, { pieceMs: SPACING_MS }).held).toBe(true);
  });

  it('an instance that waited beside a live one gives credit only a spacing after the count came back within the declared fleet', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const old = limiter(store, clock, ONE);
    await settle();
    for (let ms = 0; ms < SPACING_MS; ms += 10) await advance(10);
    // The new one starts while the old one lives (two live, one declared): neither gives credit
    // once each has counted two.
    const next = limiter(store, clock, ONE);
    for (let ms = 0; ms < 2 * SPACING_MS; ms += 10) await advance(10);
    expect(next.stats().instances).toBe(2);
    expect(next.tryConsume('a')).toBeUndefined();
    // The old one closes: the new one, alive for 2 s already, is a new stretch within the fleet
    // (whatever the old one credited just before it, the new one must not credit again within a spacing).
    expect(old.stats().instances).toBe(2);
    await old.close();
    let credited = -1;
    for (let ms = 0; ms < 2 * SPACING_MS && credited < 0; ms += 10) {
      await advance(10);
      if (next.tryConsume(`probe-${ms}`)?.tier === 'local') credited = ms;
    }
    // The new one learns of one live instance at its next beat (within IDLE_BEAT_MS), then waits a spacing.
    expect(credited).toBeGreaterThanOrEqual(SPACING_MS);
    expect(credited).toBeLessThan(SPACING_MS + 300);
  });

  it('without a registry (sync: false) an instance gives credit only a spacing after it was made', async () => {
    const { clock, advance } = fakeTime();
    const store = new MemoryStore({ clock });
    const l = limiter(store, clock, { ...ONE, sync: false });
    expect(l.tryConsume('a')).toBeUndefined();
    for (let ms = 0; ms < SPACING_MS - 10; ms += 10) await advance(10);
    expect(l.tryConsume('b')).toBeUndefined();
    await advance(10);
    expect(l.tryConsume('c')).toMatchObject({ allowed: true, tier: 'local' });
  });
});
