/** The settings of one accuracy fuzz run (`accuracy-fuzz.ts`): the fleet, its options, its limits and its store's travel. */
import fc from 'fast-check';
import { syncPeriodMs } from '../src/tiered/fleet-options.js';

/** One run's settings, drawn. */
export interface FuzzSetup {
  readonly size: number;
  /**
   * The `instances` declared: the fleet's size, or one fewer (a fleet grown past its declaration,
   * whose optimistic cold start the sync's registry must hold to the declared count).
   */
  readonly declared: number;
  readonly sync: number | false;
  readonly optimistic: boolean;
  /** Optimistic cold start's credit per instance and key. */
  readonly credit: number;
  /**
   * Several limits at once on every key (all-or-nothing), `several` of them, each checked on its own;
   * else one, switched by `setLimits`.
   */
  readonly pair: boolean;
  /** Limits a key has at once when `pair`: 2 or 3. */
  readonly several: number;
  /**
   * Every limit a run may put in force: with `pair`, `several` limits, then the same names again
   * with other numbers (`setLimits` switches between the two sets); else the one limit's two specs.
   */
  readonly limits: readonly { capacity: number; rate: number }[];
  readonly lagMs: readonly number[];
  readonly maxTravelMs: number;
  readonly ttlMs: number;
  /** Keys an instance keeps a lease for (`maxKeys`): 1 or 2 evict, and an evicted key starts cold again. */
  readonly maxKeys: number;
  readonly seed: number;
}

/** Any run's settings. */
export const fuzzSetup: fc.Arbitrary<FuzzSetup> = fc
  .record({
    size: fc.integer({ min: 2, max: 4 }),
    sync: fc.oneof(fc.constant(false as const), fc.integer({ min: 10, max: 400 })),
    optimistic: fc.boolean(),
    credit: fc.integer({ min: 1, max: 2 }),
    pair: fc.boolean(),
    several: fc.integer({ min: 2, max: 3 }),
    grown: fc.boolean(),
    // A limit's rate from 1 a second (an hourly quota in miniature) to 300: several limits on a key
    // bind in turn, the fast one in a burst and the slow one over the run.
    capacity: fc.array(fc.integer({ min: 3, max: 30 }), { minLength: 6, maxLength: 6 }),
    rate: fc.array(fc.oneof(fc.integer({ min: 5, max: 300 }), fc.integer({ min: 1, max: 5 })), {
      minLength: 6,
      maxLength: 6,
    }),
    lagMs: fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 4, maxLength: 4 }),
    maxTravelMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 80 })),
    ttlMs: fc.integer({ min: 50, max: 1000 }),
    maxKeys: fc.oneof(fc.constant(100), fc.integer({ min: 1, max: 2 })),
    seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  })
  .map(({ capacity, rate, grown, ...s }) => {
    // Without the sync the declared count is trusted (docs/ACCURACY.md): only the sync's runs outgrow it.
    const declared = grown && s.sync !== false && s.size > 2 ? s.size - 1 : s.size;
    // Optimistic cold start is refused unless N·credit ≤ capacity ÷ 10: its runs get room for it.
    const floor = s.optimistic ? 10 * declared * s.credit : 0;
    const count = s.pair ? 2 * s.several : 2;
    const limits = capacity.slice(0, count).map((c, i) => ({ capacity: floor + c, rate: rate[i]! }));
    return { ...s, declared, limits };
  });

/** The smallest spacing optimistic cold start accepts for `s` (fleet-options' rule), for every limit it may switch to. */
export function spacingFor(s: FuzzSetup): number {
  const n = s.declared;
  const leaseMs = s.sync === false ? s.ttlMs : Math.ceil(syncPeriodMs(n, s.sync) * 1.1) + 50;
  return Math.max(leaseMs, ...s.limits.map((l) => Math.ceil((n * s.credit * 1000) / l.rate)));
}
