// Why this file exists: every waiting acquire() added a listener of its own to the caller's
// signal, so one signal shared by a batch of 11 waiters (a job's or a shutdown's, the usual way to
// cancel them together) made Node warn of a memory leak on it, as 11 waiters once did on the
// limiter's own close signal. Each waiter's listener was removed as it ended: there was no leak.
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise, settle } from './fake-time.js';

let clock: FakeClock;
let limiter: TieredLimiter;
const warnings: string[] = [];
const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);

beforeEach(() => {
  // setImmediate stays real: `settle` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
  limiter = new TieredLimiter({
    store: new MemoryStore({ clock }),
    clock,
    limits: defineLimit({ capacity: 1, refillPerSecond: 10 }),
    failurePolicy: 'closed',
  });
  warnings.length = 0;
  process.on('warning', onWarning);
});

afterEach(async () => {
  process.off('warning', onWarning);
  vi.useRealTimers();
  await limiter.close();
});

/** Moves the limiters' clock and the faked timers together, a millisecond at a time. */
const advance = (ms: number): Promise<void> => advanceStepwise(clock, ms);

describe('acquire() waiters sharing one signal', () => {
  it('20 of them raise no leak warning, and one abort ends them all', async () => {
    const controller = new AbortController();
    const waiting = Array.from({ length: 20 }, () =>
      limiter.acquire('k', 1, { maxWaitMs: 5_000, signal: controller.signal }),
    );
    await advance(150);
    controller.abort();
    await advance(1);
    const reasons = (await Promise.all(waiting)).map((r) => r.reason);
    // A token each 100 ms, less what a lease borrows: the first two got theirs.
    expect(reasons).toEqual([...Array(2).fill('acquired'), ...Array(18).fill('aborted')]);
    await settle(); // a warning is emitted on a later tick
    expect(warnings).toEqual([]);
  });

  it('a waiter that ends stops listening: a later abort reaches no one', async () => {
    const controller = new AbortController();
    const results = await Promise.all(
      Array.from({ length: 3 }, (_, i) =>
        limiter.acquire(`k${i}`, 1, { maxWaitMs: 1_000, signal: controller.signal }),
      ),
    );
    expect(results.map((r) => r.reason)).toEqual(['acquired', 'acquired', 'acquired']);
    // Listeners still on it would run here (and keep the waiters' closures alive until then).
    const seen: string[] = [];
    controller.signal.addEventListener('abort', () => seen.push('own'));
    controller.abort();
    expect(seen).toEqual(['own']);
  });
});
