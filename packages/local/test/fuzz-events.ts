/** The schedule of the accuracy fuzz (`accuracy-fuzz.ts`): what happens next, at which instance and key. */
import fc from 'fast-check';

/**
 * One step of a fuzz run. `instance` and `key` are taken modulo the fleet and the keys, `cost`
 * down to what every limit allows; `n` is a count (requests, tokens, or which limits), `ms` a
 * duration (a wait, a stall, a hammering, an `acquire`'s patience, a block).
 */
export interface FuzzEvent {
  readonly kind:
    | 'burst'
    | 'hammer'
    | 'churn'
    | 'wait'
    | 'stall'
    | 'acquire'
    | 'reward'
    | 'penalty'
    | 'reset'
    | 'block'
    | 'setLimits'
    | 'restart';
  readonly instance: number;
  readonly key: number;
  readonly cost: number;
  readonly n: number;
  readonly ms: number;
  readonly all: boolean;
}

const ms = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 15 }) },
  { weight: 3, arbitrary: fc.integer({ min: 16, max: 400 }) },
  { weight: 1, arbitrary: fc.integer({ min: 401, max: 3000 }) },
);

const kind = fc.oneof(
  { weight: 6, arbitrary: fc.constant('burst' as const) },
  { weight: 6, arbitrary: fc.constant('hammer' as const) },
  { weight: 3, arbitrary: fc.constant('churn' as const) },
  { weight: 6, arbitrary: fc.constant('wait' as const) },
  { weight: 2, arbitrary: fc.constant('stall' as const) },
  { weight: 2, arbitrary: fc.constant('acquire' as const) },
  { weight: 1, arbitrary: fc.constant('reward' as const) },
  { weight: 1, arbitrary: fc.constant('penalty' as const) },
  { weight: 1, arbitrary: fc.constant('reset' as const) },
  { weight: 1, arbitrary: fc.constant('block' as const) },
  { weight: 1, arbitrary: fc.constant('setLimits' as const) },
  { weight: 1, arbitrary: fc.constant('restart' as const) },
);

/** Any step with its cost drawn by `cost`; bursts and waits most often. */
function fuzzEventOf(cost: fc.Arbitrary<number>): fc.Arbitrary<FuzzEvent> {
  return fc.record({
    kind,
    instance: fc.integer({ min: 0, max: 3 }),
    key: fc.integer({ min: 0, max: 2 }),
    cost,
    n: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 6, max: 60 })),
    ms,
    all: fc.boolean(),
  });
}

/** Any step; costs of 1 most often, else 2 or 3. */
export const fuzzEvent: fc.Arbitrary<FuzzEvent> = fuzzEventOf(
  fc.oneof(
    { weight: 3, arbitrary: fc.constant(1) },
    { weight: 1, arbitrary: fc.integer({ min: 2, max: 3 }) },
  ),
);

/**
 * Any step of weighted traffic: costs of 1, a few tokens, or large ones that the run cuts down to
 * the smallest capacity (a cost equal to the capacity is then common), mixed on the same keys.
 */
export const weightedFuzzEvent: fc.Arbitrary<FuzzEvent> = fuzzEventOf(
  fc.oneof(
    { weight: 2, arbitrary: fc.constant(1) },
    { weight: 2, arbitrary: fc.integer({ min: 2, max: 12 }) },
    { weight: 1, arbitrary: fc.integer({ min: 13, max: 80 }) },
  ),
);
