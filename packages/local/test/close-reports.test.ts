// A failure of a store call made before `close()` is still reported: close() used to drop the
// listeners, so a request in flight at a shutdown got its policy with no `failure` event, and a
// service's metrics missed the failure (found by the outage fuzz).

import { defineLimit, type StoreError } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { ScriptedStore } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';

const LIMIT = defineLimit({ name: 'L', capacity: 3, refillPerSecond: 5 });

afterEach(() => {
  vi.useRealTimers();
});

describe('close() with a request in flight on a store that does not answer', () => {
  it.each(['RequestLimiter', 'TieredLimiter'] as const)(
    '%s: the request gets its policy, and its failure is reported',
    async (kind) => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance'] });
      const store = new ScriptedStore(new MemoryStore());
      store.mode = 'hang';
      const common = {
        store,
        limits: LIMIT,
        failurePolicy: 'open' as const,
        timeoutMs: 20,
        breaker: false as const,
      };
      const limiter =
        kind === 'RequestLimiter'
          ? new RequestLimiter(common)
          : new TieredLimiter({ ...common, sync: false, closeTimeoutMs: 50 });
      const failures: StoreError[] = [];
      limiter.on('failure', (error) => failures.push(error));
      const decision = limiter.consume('k');
      const closed = limiter.close();
      await vi.advanceTimersByTimeAsync(100);
      await closed;
      const d = await decision;
      expect(d.tier).toBe('fallback');
      expect(d.error?.code).toBe('ERR_TL_STORE_TIMEOUT');
      expect(failures.map((e) => e.code)).toContain('ERR_TL_STORE_TIMEOUT');
    },
  );
});
