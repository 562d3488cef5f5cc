import { defineLimit, internal, type LimitSpec, perHour, perMinute, perSecond } from '@tiered-limiter/core';
import { limitOptions, optionMatrix, rateOptions } from '@tiered-limiter/test-harness';
import { afterAll, describe, expect, it } from 'vitest';

const { assertLimits, fullBucket, tryTake } = internal;

// Issue 9 §3 for the limit builders: every option × the bad values. A limit that is built must be
// one a limiter accepts and one that limits: a full bucket admits its capacity, then denies.

async function proveLimits(spec: LimitSpec): Promise<void> {
  expect(assertLimits('limits', spec)).toEqual([spec]);
  const bucket = fullBucket(spec, 0);
  expect(tryTake(bucket, spec, spec.capacity, 0)).toBe(true);
  expect(tryTake(bucket, spec, 1, 0)).toBe(false);
}

const { describeOptions } = optionMatrix('core', { describe, it, expect, afterAll });

describeOptions(
  'defineLimit',
  limitOptions,
  {
    // The options object is the fields; the `options` case replaces it whole.
    base: () => ({ capacity: 2, refillPerSecond: 1 }),
    build: (o) => defineLimit(('options' in o ? o.options : o) as never),
    prove: proveLimits,
    // The options object is a case of the table here (`options`), for it is named `limit` if refused.
  },
  false,
);

for (const [name, make] of Object.entries({ perSecond, perMinute, perHour })) {
  describeOptions(
    name,
    rateOptions,
    {
      base: () => ({ count: 2 }),
      build: ({ count: n, ...rest }) => make(n as number, ('options' in rest ? rest.options : rest) as never),
      prove: proveLimits,
    },
    false,
  );
}
