import fc from 'fast-check';
import { describe, it } from 'vitest';
import { accuracyFuzzProperty, fuzzCoverage, severalLimitsFuzzProperty } from './accuracy-fuzz.js';

// The accuracy fuzz's quick run; tiered-accuracy-fuzz.long.property.test.ts runs it longer.
describe('TieredLimiter accuracy under travelling store calls, the sync, management calls and stalls', () => {
  it('keeps every window of every key within the bound of its mode', { timeout: 180_000 }, async () => {
    await fc.assert(accuracyFuzzProperty(), {
      numRuns: Number(process.env.FUZZ_RUNS ?? 20),
      timeout: 15_000,
    });
    if (process.env.FUZZ_STATS) console.log(fuzzCoverage());
  });

  it('keeps each of two or three limits on a key within its own bound', { timeout: 180_000 }, async () => {
    await fc.assert(severalLimitsFuzzProperty(), {
      numRuns: Number(process.env.FUZZ_RUNS ?? 20),
      timeout: 15_000,
    });
  });
});
