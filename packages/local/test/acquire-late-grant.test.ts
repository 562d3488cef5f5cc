// Why this file exists: a waiter whose try timed out went to the failure policy, and under `closed`
// slept out its `closedRetryAfterMs` (1 s) even when the refill it had sent landed a moment later
// and left its grant on the key's lease: the tokens sat there while the waiter slept beside them.
import { defineLimit } from '@tiered-limiter/core';
import { type AcquireResult, MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise } from './fake-time.js';
import { answeringLate } from './late-replies.js';

/** How late the store answers: past the limiter's timeout, well within the policy's retry. */
const LATE_MS = 200;
const TIMEOUT_MS = 50;

let clock: FakeClock;
const made: TieredLimiter[] = [];

beforeEach(() => {
  // setImmediate stays real: `settle` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
});

afterEach(async () => {
  const closing = Promise.all(made.splice(0).map((l) => l.close()));
  await advance(1_000);
  await closing;
  vi.useRealTimers();
});

/** Moves the limiters' clock and the faked timers together, a millisecond at a time. */
const advance = (ms: number): Promise<void> => advanceStepwise(clock, ms);

describe.each([
  // A period of 556 ms: the grant, good from its send for about a period, still lives when it lands.
  ['with the periodic sync', { sync: { fleetCallsPerSecond: 2 } }],
  ['without it', { sync: false as const }],
])('a waiting acquire() %s, its try timed out under `closed`', (_, sync) => {
  it('takes the grant its refill landed on the lease once it lands, not a closedRetryAfterMs later', async () => {
    const late = { on: true };
    const limiter = new TieredLimiter({
      store: answeringLate(new MemoryStore({ clock }), late, LATE_MS),
      clock,
      limits: defineLimit({ capacity: 10, refillPerSecond: 10 }),
      failurePolicy: 'closed',
      timeoutMs: TIMEOUT_MS,
      // A lease from the first request: its refill is a grant, not a take for that request alone.
      lease: { minBatch: 5 },
      ...sync,
    });
    made.push(limiter);
    const box: { result?: AcquireResult; atMs?: number } = {};
    void limiter.acquire('k', 1, { maxWaitMs: 5_000 }).then((result) => {
      box.result = result;
      box.atMs = clock.now();
    });
    // The try times out and the policy denies it, for 1 s.
    await advance(TIMEOUT_MS + 10);
    expect(box.result).toBeUndefined();
    expect(limiter.stats().decisions.fallback).toBe(1);
    late.on = false;
    await advance(LATE_MS);
    // Before: acquired at 1,050 ms, by a new call (the grant had expired beside it).
    expect(box.result).toMatchObject({ acquired: true, reason: 'acquired' });
    expect(box.atMs).toBeLessThanOrEqual(LATE_MS + 10);
    expect(box.result!.decision?.tier).toBe('lease');
  });
});
