import fc from 'fast-check';
import { describe, it } from 'vitest';
import { accuracyFuzzProperty, fuzzCoverage } from './accuracy-fuzz.js';

// The accuracy fuzz over weighted traffic (docs/DECISIONS.md, "Weighted decisions"): costs of 1,
// a few tokens, and up to the smallest capacity, mixed on the same keys, through every mode and
// event the fuzz drives. Each window of each key stays within the bound, and the tokens admitted
// are no more than the store gave out net plus optimistic credit: nothing is counted twice.
describe('TieredLimiter accuracy under weighted traffic', () => {
  it('keeps every window of every key within the bound, with costs up to the capacity', {
    timeout: 180_000,
  }, async () => {
    await fc.assert(accuracyFuzzProperty(40, true), {
      numRuns: Number(process.env.FUZZ_RUNS ?? 20),
      timeout: 15_000,
    });
    if (process.env.FUZZ_STATS) console.log(fuzzCoverage());
  });
});
