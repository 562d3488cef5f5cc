/**
 * The lease-accounting properties of `TieredLimiter`, shared by the quick property file and the
 * long run: fleets of limiters on one `MemoryStore` under one fake clock, every window of every
 * trace checked against the pure bound `capacity + rate × window` (docs/ACCURACY.md).
 */
import { defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock, tokenBucketBound, worstWindow } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { expect } from 'vitest';

export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const TTL_MS = 200;

export interface Fleet {
  readonly clock: FakeClock;
  readonly store: MemoryStore;
  readonly fleet: TieredLimiter[];
  /** Closes instance `i` (handing its tokens back) and starts a fresh one in its place. */
  restart(i: number): Promise<void>;
  closeAll(): Promise<void>;
}

/**
 * `size` limiters sharing one in-memory bucket under one fake clock. One assumed instance lets a
 * lease take the whole bucket: the hardest case for the bound.
 */
export function fleetOf(
  size: number,
  capacity: number,
  ratePerSecond: number,
  extra: Partial<TieredLimiterOptions> = {},
  clock = new FakeClock(0),
): Fleet {
  return fleetOfLimits(size, [defineLimit({ capacity, refillPerSecond: ratePerSecond })], extra, clock);
}

/** `fleetOf` on keys of every limit of `limits` at once. */
export function fleetOfLimits(
  size: number,
  limits: readonly LimitSpec[],
  extra: Partial<TieredLimiterOptions> = {},
  clock = new FakeClock(0),
): Fleet {
  const store = new MemoryStore({ clock });
  const make = () =>
    new TieredLimiter({
      store,
      limits,
      failurePolicy: 'closed',
      clock,
      instances: 1,
      sync: false,
      lease: { ttlMs: TTL_MS },
      ...extra,
    });
  const fleet = Array.from({ length: size }, make);
  return {
    clock,
    store,
    fleet,
    async restart(i) {
      await fleet[i]!.close();
      fleet[i] = make();
    },
    async closeAll() {
      await Promise.all(fleet.map((l) => l.close()));
    },
  };
}

/** Admits through `limiter` the way a service does: the hot path, else the promise. */
export async function request(limiter: TieredLimiter, key: string, cost = 1) {
  return limiter.tryConsume(key, cost) ?? (await limiter.consume(key, cost));
}

/**
 * The global bound must hold over every window: what one bucket alone would admit, plus the
 * refill leases may borrow (`aheadMs`: the sync period with the periodic sync, else none).
 */
export function expectBound(
  stamps: { atMs: number; cost: number }[],
  capacity: number,
  ratePerSecond: number,
  aheadMs = 0,
): void {
  const worst = worstWindow(stamps, tokenBucketBound(capacity, ratePerSecond, aheadMs));
  expect(worst.held, `worst window: ${JSON.stringify(worst)}`).toBe(true);
}

/** `requests` one-token requests at fleet member `instance`, then `advanceMs` of quiet. */
export interface Burst {
  readonly instance: number;
  readonly requests: number;
  readonly advanceMs: number;
}

/**
 * Plays `bursts` of one-token requests on key `k` through `fleet`, letting each request's
 * background work finish before the next and calling `advance` after each burst. Returns the
 * admitted requests, as `expectBound` takes them.
 */
export async function playBursts(
  fleet: readonly TieredLimiter[],
  bursts: readonly Burst[],
  clock: FakeClock,
  advance: (ms: number) => void | Promise<void>,
): Promise<{ atMs: number; cost: number }[]> {
  const admitted: { atMs: number; cost: number }[] = [];
  for (const b of bursts) {
    for (let i = 0; i < b.requests; i++) {
      if ((await request(fleet[b.instance]!, 'k')).allowed) admitted.push({ atMs: clock.now(), cost: 1 });
      await settle();
    }
    await advance(b.advanceMs);
  }
  return admitted;
}

/** The sizes a fleet property draws from: fleet members, trace length, bucket capacity and rate. */
interface TraceBounds {
  readonly size: number;
  readonly maxSteps: number;
  readonly capacity: fc.IntegerConstraints;
  readonly rate: fc.IntegerConstraints;
}

/**
 * A property over any trace of 1 to `maxSteps` of `step`, run by a fresh fleet of `size` on a
 * bucket of a drawn capacity and rate (per second); the fleet is closed however `check` ends.
 */
function fleetProperty<S>(
  bounds: TraceBounds,
  step: fc.Arbitrary<S>,
  check: (steps: S[], capacity: number, ratePerSecond: number, fleet: Fleet) => Promise<void>,
) {
  return fc.asyncProperty(
    fc.array(step, { minLength: 1, maxLength: bounds.maxSteps }),
    fc.integer(bounds.capacity),
    fc.integer(bounds.rate),
    async (steps, capacity, ratePerSecond) => {
      const fleet = fleetOf(bounds.size, capacity, ratePerSecond);
      try {
        await check(steps, capacity, ratePerSecond, fleet);
      } finally {
        await fleet.closeAll();
      }
    },
  );
}

/** Any trace over 3 instances and 2 keys: every leased token is spent or handed back once, and the pure bound holds. */
export function conservationProperty() {
  const step = fc.record({
    instance: fc.integer({ min: 0, max: 2 }),
    key: fc.integer({ min: 0, max: 1 }),
    cost: fc.integer({ min: 1, max: 3 }),
    advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 50, max: 400 })),
  });
  const trace = { size: 3, maxSteps: 120, capacity: { min: 1, max: 20 }, rate: { min: 1, max: 50 } };
  return fleetProperty(trace, step, async (steps, capacity, ratePerSecond, { clock, fleet, closeAll }) => {
    const admitted: { atMs: number; key: number; cost: number }[] = [];
    const admittedBy = [0, 0, 0];
    for (const s of steps) {
      if (s.cost > capacity) continue;
      const d = await request(fleet[s.instance]!, `k${s.key}`, s.cost);
      expect(d.allowed).toBe(d.retryAfterMs === 0);
      expect(d.remaining).toBeGreaterThanOrEqual(0);
      expect(d.tier).not.toBe('fallback');
      if (d.allowed) {
        admitted.push({ atMs: clock.now(), key: s.key, cost: s.cost });
        admittedBy[s.instance]! += s.cost;
      }
      await settle();
      clock.advance(s.advanceMs);
    }
    await closeAll();
    fleet.forEach((limiter, i) => {
      const st = limiter.stats();
      // Conservation: every leased token was spent or handed back, once; the rest were takes.
      expect(admittedBy[i]! - st.tokensTaken + st.tokensRefunded + st.tokensUnreported).toBe(st.tokensLeased);
      expect(st.tokensUnreported).toBe(0);
    });
    for (const key of [0, 1])
      expectBound(
        admitted.filter((a) => a.key === key),
        capacity,
        ratePerSecond,
      );
  });
}

/** Bursts on one key with idle gaps: no hand-back, however late, adds a token the bucket could not hold. */
export function burstsProperty() {
  // Bursts on one key with gaps long enough for the bucket to refill behind a held lease: the
  // case where a hand-back landing after the refill used to create tokens (issue 14).
  const burst = fc.record({
    instance: fc.integer({ min: 0, max: 1 }),
    requests: fc.integer({ min: 1, max: 30 }),
    advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 100, max: 400 })),
  });
  const trace = { size: 2, maxSteps: 40, capacity: { min: 2, max: 20 }, rate: { min: 20, max: 200 } };
  return fleetProperty(trace, burst, async (bursts, capacity, ratePerSecond, { clock, fleet }) => {
    const admitted = await playBursts(fleet, bursts, clock, (ms) => {
      clock.advance(ms);
    });
    expectBound(admitted, capacity, ratePerSecond);
  });
}

/** Many keys, bursts, gaps past the TTL, evictions, restarts and instance clocks lagging the store's within the grace. */
export function manyKeysProperty() {
  const event = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        kind: fc.constant('burst' as const),
        instance: fc.integer({ min: 0, max: 2 }),
        key: fc.integer({ min: 0, max: 4 }),
        requests: fc.integer({ min: 1, max: 12 }),
        cost: fc.integer({ min: 1, max: 2 }),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('wait' as const),
        ms: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 150, max: 900 })),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('restart' as const),
        instance: fc.integer({ min: 0, max: 2 }),
      }),
    },
  );
  return fc.asyncProperty(
    fc.array(event, { minLength: 1, maxLength: 60 }),
    fc.integer({ min: 2, max: 20 }),
    fc.integer({ min: 5, max: 200 }),
    fc.integer({ min: 1, max: 3 }),
    fc.integer({ min: 0, max: 200 }),
    async (events, capacity, ratePerSecond, maxKeys, lagMs) => {
      // Each instance's clock runs `lagMs` behind the store's: a process whose readings are
      // stale (a descheduled clock thread, a throttled container), within the store's grace.
      const clock = new FakeClock(0);
      const { fleet, restart, closeAll } = fleetOf(
        3,
        capacity,
        ratePerSecond,
        { maxKeys, clock: { now: () => Math.max(0, clock.now() - lagMs) } },
        clock,
      );
      const admitted = new Map<number, { atMs: number; cost: number }[]>();
      try {
        for (const e of events) {
          if (e.kind === 'wait') {
            clock.advance(e.ms);
            await settle();
          } else if (e.kind === 'restart') {
            await restart(e.instance);
          } else {
            for (let i = 0; i < e.requests; i++) {
              if (e.cost > capacity) break;
              const d = await request(fleet[e.instance]!, `k${e.key}`, e.cost);
              if (d.allowed) {
                const list = admitted.get(e.key) ?? [];
                list.push({ atMs: clock.now(), cost: e.cost });
                admitted.set(e.key, list);
              }
              await settle();
            }
          }
        }
        for (const stamps of admitted.values()) expectBound(stamps, capacity, ratePerSecond);
      } finally {
        await closeAll();
      }
    },
  );
}

/**
 * Keys of two or three limits at once, of capacities 1 to 20 that do not refill during a trace (a
 * token in 1,000 s): once the fleet has closed, every limit's bucket of every key holds its capacity
 * less what was admitted for the key, or less still (a grant handed back after the store released
 * it counts as spent), never more (a hand-back counted twice, or to a limit it was not taken from);
 * no key is admitted past its smallest capacity; every leased token was spent or handed back once.
 */
export function severalLimitsProperty() {
  const step = fc.record({
    instance: fc.integer({ min: 0, max: 2 }),
    key: fc.integer({ min: 0, max: 1 }),
    cost: fc.integer({ min: 1, max: 3 }),
    advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 50, max: 400 })),
  });
  const capacities = fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 2, maxLength: 3 });
  return fc.asyncProperty(
    fc.array(step, { minLength: 1, maxLength: 120 }),
    capacities,
    fc.boolean(),
    async (steps, caps, evict) => {
      const limits = caps.map((capacity, i) =>
        defineLimit({ capacity, refillPerSecond: 0.001, name: `l${i}` }),
      );
      const smallest = Math.min(...caps);
      const { clock, store, fleet, closeAll } = fleetOfLimits(3, limits, evict ? { maxKeys: 1 } : {});
      const admittedFor = [0, 0];
      const admittedBy = [0, 0, 0];
      try {
        for (const s of steps) {
          if (s.cost > smallest) continue;
          const d = await request(fleet[s.instance]!, `k${s.key}`, s.cost);
          expect(d.tier).not.toBe('fallback');
          expect(limits.map((l) => l.name)).toContain(d.name);
          expect(d.limit).toBe(limits.find((l) => l.name === d.name)!.capacity);
          if (d.allowed) {
            admittedFor[s.key]! += s.cost;
            admittedBy[s.instance]! += s.cost;
          }
          await settle();
          clock.advance(s.advanceMs);
        }
      } finally {
        await closeAll();
      }
      fleet.forEach((limiter, i) => {
        const st = limiter.stats();
        expect(admittedBy[i]! - st.tokensTaken + st.tokensRefunded + st.tokensUnreported).toBe(
          st.tokensLeased,
        );
      });
      for (const key of [0, 1]) {
        expect(admittedFor[key]).toBeLessThanOrEqual(smallest);
        for (const spec of limits) {
          const { remaining } = await store.apply({ key: `k${key}`, limits: [spec] });
          expect(remaining, `k${key}, ${spec.name}`).toBeLessThanOrEqual(spec.capacity - admittedFor[key]!);
        }
      }
    },
  );
}
