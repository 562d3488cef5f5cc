import { describe, expect, it } from 'vitest';
import { IN_PROCESS_ONLY, keysTasks } from '../bench/src/keys.js';
import type { Subject } from '../bench/src/limiters.js';
import { ADMITTED } from '../bench/src/loop.js';
import { benchSettings } from '../bench/src/section.js';
import { measureOn, type RowServer } from '../bench/src/throughput.js';

// The many-keys rows check their hottest keys against the bound of the limiter's mode. With the
// periodic sync that is README's `C + r·(W + T)`, `T` the sync period the limiter had: 22 ms to
// 5 s as the keys a round weighs grow. A fixed 20 ms was no bound the README states.

/** No Redis: the row's counters read nothing, and no probe watches. */
const server: RowServer = {
  client: {} as RowServer['client'],
  commandStats: async () => new Map(),
  serverCpuSeconds: async () => 0,
  probe: undefined,
};

/** A limiter that admits every request at once, reporting `periods` in turn (the last from then on). */
function admitsAll(periods?: readonly number[]): Subject {
  let read = 0;
  return {
    decider: { sync: () => ADMITTED, async: async () => ADMITTED },
    showsPolicy: true,
    ...(periods === undefined ? {} : { syncPeriodMs: () => periods[Math.min(read++, periods.length - 1)] }),
    close: async () => {},
  };
}

/** A many-keys task of `limiter` on the checked key `user:1` alone, with a fake limiter. */
function taskOf(limiter: string, subject: Subject) {
  const task = keysTasks().find((t) => t.limiter === limiter && t.keys === 'zipf');
  if (task?.checked === undefined) throw new Error(`no checked ${limiter} task`);
  return { ...task, keys: 'hot' as const, inFlight: 1, make: () => subject };
}

const settings = { ...benchSettings(true, 4), maxDecisions: 256 };
// 10/s: a 5 s period lets a lease borrow 50 tokens beside the capacity of 100.
const { capacity, refillPerSecond } = { capacity: 100, refillPerSecond: 10 };

describe('the many-keys rows’ window check', () => {
  it('gives the two-tier limiter the longest sync period it reported in the row, warm-up included', async () => {
    const row = await measureOn(taskOf('TieredLimiter', admitsAll([5000, 22])), server, 'p', settings);
    expect(row.syncPeriodMs).toBe(5000);
    const window = row.window!;
    expect(window.bound).toBeGreaterThanOrEqual(
      capacity + (refillPerSecond * (window.windowMs + 5000)) / 1000,
    );
  });

  it('runs the in-process ceiling on a real LocalLimiter, at its limit, within one bucket’s bound', async () => {
    // The ceiling row needs no Redis: its own task, on the Zipf keys, with quick settings.
    const task = keysTasks().find(
      (t) => t.limiter === IN_PROCESS_ONLY && t.keys === 'zipf' && t.inFlight === 64,
    );
    if (task?.checked === undefined) throw new Error('no checked in-process task');
    // Timed by the quick run's 120 ms, not a count of decisions: the hottest keys spend their burst
    // in the warm-up and then get a token each 100 ms. 50,000 decisions took 25 ms here, and a run
    // in three saw none of the ten admitted in it (a window of nothing is within any bound).
    const row = await measureOn(task, server, 'p', benchSettings(true, 4));
    expect(row.peer).toContain('RateLimiterRedis');
    expect(row.policy).toBeNull();
    // Zipf's hottest keys meet their limit within the quick run's decisions: the row bites.
    expect(row.denied).toBeGreaterThan(0);
    expect(row.syncPeriodMs).toBeNull();
    expect(row.window!.admitted).toBeGreaterThan(0);
    expect(row.window!.excess).toBeLessThanOrEqual(0);
  });

  it('gives a limiter without the sync no period: one bucket’s C + r·W, and the stamps’ slack', async () => {
    const row = await measureOn(taskOf('RequestLimiter', admitsAll()), server, 'p', settings);
    expect(row.syncPeriodMs).toBeNull();
    const window = row.window!;
    // The slack is the row's longest wait, well under a second here.
    expect(window.bound).toBeLessThan(capacity + (refillPerSecond * (window.windowMs + 1000)) / 1000);
  });
});
