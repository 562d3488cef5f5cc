/**
 * User callbacks of the middleware that throw or answer garbage, on every adapter: `onExceeded`
 * only watches a denial, so its failure is reported (one `TL_HTTP_ON_EXCEEDED_FAILED` warning)
 * and the denial is still sent; a `message` or `problem` function that answers what no body can
 * be is a `ConfigError` naming the option, on the framework's error path (a 500).
 */
import { defineLimit } from '@tiered-limiter/core';
import type { ProblemDocument } from '@tiered-limiter/http';
import { MemoryStore, RequestLimiter } from '@tiered-limiter/local';
import { FakeClock, ProcessReports } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ADAPTERS, type ContractOptions, closeApps } from './adapters.js';
import { exactTieredLimiter, requestMany } from './helpers.js';

const api = defineLimit({ capacity: 1, refillPerSecond: 1, name: 'api' });
const closers: (() => Promise<void>)[] = [];
const reports = new ProcessReports();
const unhandled = reports.unhandled;
const warningCodes = () => reports.warningCodes();

beforeEach(() => reports.start());
afterEach(async () => {
  reports.stop();
  await closeApps();
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A limiter that answers by a promise (RequestLimiter) or synchronously (the two-tier one's lease). */
const LIMITERS = {
  'a promise': () => new RequestLimiter({ store: new MemoryStore(), limits: api, failurePolicy: 'open' }),
  tryConsume: () => exactTieredLimiter(api, new FakeClock(0)),
};

describe.each(ADAPTERS)('$name: callbacks that throw or answer garbage', (adapter) => {
  describe.each(Object.entries(LIMITERS))('decided by %s', (_how, make) => {
    it('an onExceeded that throws, or rejects, is reported once; the denial is still sent', async () => {
      for (const onExceeded of [
        () => {
          throw new Error('metrics are down');
        },
        async () => {
          throw new Error('metrics are down');
        },
      ]) {
        reports.clearWarnings();
        const limiter = make();
        closers.push(() => limiter.close());
        const { url } = await adapter.start({ limiter, onExceeded });
        const replies = await requestMany(url, 3);
        expect(replies.map((r) => r.status)).toEqual([200, 429, 429]);
        expect(replies[2]!.headers['retry-after']).toBe('1');
        // An async listener's rejection lands a turn later.
        await new Promise((resolve) => setImmediate(resolve));
        expect(warningCodes()).toEqual(['TL_HTTP_ON_EXCEEDED_FAILED']);
      }
      expect(unhandled).toEqual([]);
    });

    it('a message or problem function that answers no body goes to the error path, naming the option', async () => {
      // What the types refuse, as JavaScript (or an `any`) passes it.
      const cases: [string, ContractOptions][] = [
        ['message', { message: () => undefined as unknown as string }],
        ['message', { message: (async () => 'later') as unknown as () => string }],
        ['problem', { problem: (async () => ({ title: 'later' })) as unknown as () => ProblemDocument }],
        ['problem', { problem: () => null as unknown as ProblemDocument }],
      ];
      for (const [option, options] of cases) {
        const limiter = make();
        closers.push(() => limiter.close());
        const { url } = await adapter.start({ limiter, ...options });
        const [, refused] = await requestMany(url, 2);
        expect(refused!.status).toBe(500);
        expect(refused!.body).toContain(`\`${option}\``);
      }
      expect(unhandled).toEqual([]);
    });
  });
});

describe.each(ADAPTERS)('$name: an async handler that rejects', (adapter) => {
  it.each(Object.entries(LIMITERS))(
    'goes to the error path, not an unhandled rejection (decided by %s)',
    async (_how, make) => {
      const limiter = make();
      closers.push(() => limiter.close());
      const handler = async () => {
        throw new Error('audit log is down');
      };
      const { url } = await adapter.start({ limiter, handler } as Parameters<typeof adapter.start>[0]);
      // Bounded: before the fix the denied request was never answered.
      // The third denial is a remembered one, answered by `tryConsume` at once, on the two-tier limiter.
      const replies = await requestMany(url, 3, { signal: AbortSignal.timeout(10_000) });
      expect(replies.map((r) => r.status)).toEqual([200, 500, 500]);
      expect(replies[2]!.body).toContain('audit log is down');
      expect(unhandled).toEqual([]);
    },
  );
});
