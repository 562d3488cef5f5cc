import fc from 'fast-check';
import { describe, it } from 'vitest';
import { outageCoverage, outageFuzzProperty } from './outage-fuzz.js';

describe('limiters of every kind and policy through outages of every kind', () => {
  it('keep every promise of an outage: decisions in time, by the policy, within the bounds, reported, recovered', {
    timeout: 180_000,
  }, async () => {
    await fc.assert(outageFuzzProperty(), {
      numRuns: Number(process.env.FUZZ_RUNS ?? 60),
      timeout: 15_000,
    });
    if (process.env.FUZZ_STATS) console.log(outageCoverage());
  });
});
