import type { LimitSpec } from '@tiered-limiter/core';
import { LocalLimiter } from '@tiered-limiter/local';
import {
  FakeClock,
  httpOptions,
  optionMatrix,
  optionTests,
  type Subject,
  TINY,
} from '@tiered-limiter/test-harness';
import { afterAll, describe, expect, it } from 'vitest';
import { ADAPTERS, type Adapter, type ContractOptions, closeApps } from './adapters.js';
import { requestMany } from './helpers.js';

// Issue 9 §3 for the middleware: every option of every adapter (node:http, Express 4 and 5,
// Fastify) × the bad values (test/src/option-tables.ts). A value is refused with a typed error
// naming the option, or the middleware is built and still limits: on a real server, the third of
// three requests under a 2-token limit is refused.

const { count } = optionMatrix('http', { describe, it, expect, afterAll });
afterAll(closeApps);

/** A fresh in-process limiter of `limits` on a still clock: only the requests move its buckets. */
const makeLimiter = (limits: readonly LimitSpec[]) => new LocalLimiter({ limits, clock: new FakeClock(0) });
const table = httpOptions(makeLimiter);

function subjectOf(adapter: Adapter): Subject<ContractOptions> {
  return {
    base: () => ({ limiter: makeLimiter([TINY]) }),
    build: (options) => {
      adapter.make(options as ContractOptions);
      return options as ContractOptions;
    },
    prove: async (options) => {
      const app = await adapter.start(options);
      const statuses = (await requestMany(`${app.url}/`, 3)).map((r) => r.status);
      await closeApps();
      const limits = options.limiter !== undefined || options.limit !== undefined;
      // A Fastify hook with no limit of its own limits only routes whose config names one (as
      // @fastify/rate-limit's `global: false`); the route here names none.
      if (!limits && adapter.name === 'fastify') expect(statuses).toEqual([200, 200, 200]);
      else expect(statuses).toEqual([200, 200, 429]);
    },
  };
}

for (const adapter of ADAPTERS) {
  describe(adapter.name, () => {
    it.each(optionTests(table, subjectOf(adapter), count))('%s', async (_, run) => {
      expect(await run()).toEqual([]);
    });
  });
}
