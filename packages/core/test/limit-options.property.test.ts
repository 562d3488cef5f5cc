import {
  assertLimits,
  defineLimit,
  fullBucket,
  type LimitSpec,
  perHour,
  perMinute,
  perSecond,
  tryTake,
} from '@tiered-limiter/core';
import {
  CaseCount,
  limitOptions,
  type OptionCase,
  rateOptions,
  type Subject,
  tryEveryValue,
} from '@tiered-limiter/test-harness';
import { afterAll, describe, expect, it } from 'vitest';

// Issue 9 §3 for the limit builders: every option × the bad values. A limit that is built must be
// one a limiter accepts and one that limits: a full bucket admits its capacity, then denies.

const count = new CaseCount();
afterAll(() => {
  console.log(`option matrix (core): ${count.total} cases, ${count.built} built, ${count.refused} refused`);
});

async function proveLimits(spec: LimitSpec): Promise<void> {
  expect(assertLimits('limits', spec)).toEqual([spec]);
  const bucket = fullBucket(spec, 0);
  expect(tryTake(bucket, spec, spec.capacity, 0)).toBe(true);
  expect(tryTake(bucket, spec, 1, 0)).toBe(false);
}

function describeOptions(
  name: string,
  table: Readonly<Record<string, OptionCase>>,
  subject: Subject<LimitSpec>,
) {
  describe(name, () => {
    it.each(Object.keys(table))('%s', async (path) => {
      expect(await tryEveryValue(subject, path, table[path]!, count)).toEqual([]);
    });
  });
}

describeOptions('defineLimit', limitOptions, {
  // The options object is the fields; the `options` case replaces it whole.
  base: () => ({ capacity: 2, refillPerSecond: 1 }),
  build: (o) => defineLimit(('options' in o ? o.options : o) as never),
  prove: proveLimits,
});

for (const [name, make] of Object.entries({ perSecond, perMinute, perHour })) {
  describeOptions(name, rateOptions, {
    base: () => ({ count: 2 }),
    build: ({ count: n, ...rest }) => make(n as number, ('options' in rest ? rest.options : rest) as never),
    prove: proveLimits,
  });
}
