import fc from 'fast-check';
import { describe, it } from 'vitest';
import { accuracyFuzzProperty } from './accuracy-fuzz.js';

// The long run of the accuracy fuzz, with fresh seeds each run: schedules twice as long, many
// more of them. In its own file so that vitest runs it beside the rest of the suite on the second core.
const LONG_MS = 600_000;

describe('TieredLimiter accuracy fuzz, long run', () => {
  it('400 schedules of up to 80 steps keep every window of every key within its bound', {
    timeout: LONG_MS,
  }, async () => {
    await fc.assert(accuracyFuzzProperty(80), { numRuns: 400 });
  });
});
