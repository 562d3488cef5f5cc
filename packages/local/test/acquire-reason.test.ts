// Why this file exists: a waiter whose try was at the store when close() or its signal came
// resolved `timeout` once the try came back denied with a wait past its bound, where the README
// promises `closed` (and the TSDoc `aborted`): a caller told `timeout` may try again on a closed
// limiter, or treat a cancelled job as one that ran out of time.
import { defineLimit } from '@tiered-limiter/core';
import { type AcquireResult, MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock, ScriptedStore } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise } from './fake-time.js';

let clock: FakeClock;
let store: ScriptedStore;
const made: TieredLimiter[] = [];

beforeEach(() => {
  // setImmediate stays real: `settle` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
  store = new ScriptedStore(new MemoryStore({ clock }));
});

afterEach(async () => {
  store.mode = 'ok';
  const closing = Promise.all(made.splice(0).map((l) => l.close()));
  await advance(1_000);
  await closing;
  vi.useRealTimers();
});

/** Moves the limiters' clock and the faked timers together, a millisecond at a time. */
const advance = (ms: number): Promise<void> => advanceStepwise(clock, ms);

/** A limiter whose key `k` is spent, over a store that now holds every call: the next try waits 500 ms. */
async function spentOnHangingStore(): Promise<TieredLimiter> {
  const limiter = new TieredLimiter({
    store,
    clock,
    limits: defineLimit({ capacity: 1, refillPerSecond: 10 }),
    failurePolicy: 'closed',
    timeoutMs: 500,
  });
  made.push(limiter);
  expect((await limiter.consume('k')).allowed).toBe(true);
  store.mode = 'hang';
  return limiter;
}

function settled(pending: Promise<AcquireResult>): { result?: AcquireResult } {
  const box: { result?: AcquireResult } = {};
  void pending.then((result) => (box.result = result));
  return box;
}

describe('acquire: a try at the store when the wait ends', () => {
  it('says closed when close() came during the try, whatever its bound', async () => {
    const limiter = await spentOnHangingStore();
    // The try times out at 500 ms into a `closed` denial of 1 s, past the bound of 800 ms.
    const waiting = settled(limiter.acquire('k', 1, { maxWaitMs: 800 }));
    await advance(50);
    void limiter.close();
    await advance(500);
    expect(waiting.result).toMatchObject({ acquired: false, reason: 'closed' });
  });

  it('says aborted when the signal aborted during the try, whatever its bound', async () => {
    const limiter = await spentOnHangingStore();
    const controller = new AbortController();
    const waiting = settled(limiter.acquire('k', 1, { maxWaitMs: 800, signal: controller.signal }));
    await advance(50);
    controller.abort();
    await advance(500);
    expect(waiting.result).toMatchObject({ acquired: false, reason: 'aborted' });
  });

  it('still says acquired when the try admitted it: its tokens were taken', async () => {
    const limiter = await spentOnHangingStore();
    store.mode = 'ok';
    const controller = new AbortController();
    const waiting = settled(limiter.acquire('k', 1, { maxWaitMs: 800, signal: controller.signal }));
    await advance(100);
    // The wait is over (a token came at 100 ms): an abort after it changes nothing.
    controller.abort();
    await advance(1);
    expect(waiting.result).toMatchObject({ acquired: true, reason: 'acquired' });
  });
});
