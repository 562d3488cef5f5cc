// Why this file exists: a waiting acquire() slept out the wait its last denial gave, whatever
// happened to the key meanwhile. After reset(), a landed reward() or setLimits() (each lifts a
// remembered denial, so a consume() was admitted at once) it still waited up to a full refill for
// tokens that were there; after a block() past its bound it slept in vain before giving up.
import { defineLimit } from '@tiered-limiter/core';
import { type AcquireResult, MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise } from './fake-time.js';

let clock: FakeClock;
let store: MemoryStore;
const made: TieredLimiter[] = [];

beforeEach(() => {
  // setImmediate stays real: `settle` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
  store = new MemoryStore({ clock });
});

afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(made.splice(0).map((l) => l.close()));
});

/** Moves the limiters' clock and the faked timers together, a millisecond at a time. */
const advance = (ms: number): Promise<void> => advanceStepwise(clock, ms);

function settled(pending: Promise<AcquireResult>): { result?: AcquireResult; atMs?: number } {
  const box: { result?: AcquireResult; atMs?: number } = {};
  void pending.then((result) => {
    box.result = result;
    box.atMs = clock.now();
  });
  return box;
}

describe.each([
  ['with the periodic sync', {}],
  ['without it', { sync: false as const }],
])('a waiting acquire() %s', (_, sync) => {
  /** Key `k` spent on a limit of one token each 5 s, and a waiter for the next one (up to 8 s). */
  async function waiterOnSpentKey(): Promise<{
    limiter: TieredLimiter;
    waiting: ReturnType<typeof settled>;
  }> {
    const limiter = new TieredLimiter({
      store,
      clock,
      limits: defineLimit({ capacity: 1, refillPerSecond: 0.2, name: 'slow' }),
      failurePolicy: 'closed',
      ...sync,
    });
    made.push(limiter);
    expect((await limiter.consume('k')).allowed).toBe(true);
    const waiting = settled(limiter.acquire('k', 1, { maxWaitMs: 8_000 }));
    await advance(10);
    expect(waiting.result).toBeUndefined();
    return { limiter, waiting };
  }

  it('takes the token reset() made at once', async () => {
    const { limiter, waiting } = await waiterOnSpentKey();
    expect(await limiter.reset('k')).toBe(true);
    await advance(10);
    expect(waiting.result).toMatchObject({ acquired: true });
    expect(waiting.atMs).toBeLessThanOrEqual(20);
  });

  it('takes the token a landed reward() gave at once', async () => {
    const { limiter, waiting } = await waiterOnSpentKey();
    expect(await limiter.reward('k', 1)).toBe(true);
    await advance(10);
    expect(waiting.result).toMatchObject({ acquired: true });
    expect(waiting.atMs).toBeLessThanOrEqual(20);
  });

  it('meets new limits at once rather than the old ones wait', async () => {
    const { limiter, waiting } = await waiterOnSpentKey();
    limiter.setLimits(defineLimit({ capacity: 1, refillPerSecond: 100, name: 'slow' }));
    await advance(20);
    expect(waiting.result).toMatchObject({ acquired: true });
    expect(waiting.atMs).toBeLessThanOrEqual(30);
  });

  it('gives up at once on a block() that outlasts its bound', async () => {
    const { limiter, waiting } = await waiterOnSpentKey();
    limiter.block('k', 60_000);
    await advance(10);
    expect(waiting.result).toMatchObject({ acquired: false, reason: 'timeout' });
    expect(waiting.atMs).toBeLessThanOrEqual(20);
  });

  it('still waits out a penalty(), which gives no token', async () => {
    const { limiter, waiting } = await waiterOnSpentKey();
    expect(await limiter.penalty('k', 1)).toBe(true);
    await advance(100);
    expect(waiting.result).toBeUndefined();
  });
});
