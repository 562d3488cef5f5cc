import fc from 'fast-check';
import { describe, it } from 'vitest';
import { burstsProperty, conservationProperty, manyKeysProperty } from './lease-properties.js';

// The long run of the lease-accounting properties (issue 14): the pure bound over at least 10,000
// traces, with fresh seeds each run. It sits in its own file so that vitest runs it beside the
// rest of the suite on the second core.
const LONG_MS = 600_000;

describe('TieredLimiter lease accounting, long run', () => {
  it('bursts after idle gaps: 10,000 traces keep the pure bound', { timeout: LONG_MS }, async () => {
    await fc.assert(burstsProperty(), { numRuns: 10_000 });
  });

  it('many keys, evictions, restarts and stale clocks: 2,000 traces keep the bound per key', {
    timeout: LONG_MS,
  }, async () => {
    await fc.assert(manyKeysProperty(), { numRuns: 2_000 });
  });

  it('conservation and the bound over 2,000 traces of 3 instances and 2 keys', {
    timeout: LONG_MS,
  }, async () => {
    await fc.assert(conservationProperty(), { numRuns: 2_000 });
  });
});
