// Why this file exists: a `reward` lifts the key's remembered denial, and puts it back when the
// reward fails, since nothing changed then. A reward whose call timed out on its way may still
// land: the store then has the token, and the denial put back turned the key away here for its
// whole wait (1,000 s at a token per 1,000 s) though a request would pass.
import { defineLimit, type GlobalStore } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise } from './fake-time.js';
import { answeringLate } from './late-replies.js';

/** How late the store answers: past the limiters' timeout. */
const LATE_MS = 200;
const TIMEOUT_MS = 50;
/** One token, and a wait of 1,000 s for the next. */
const ONE = defineLimit({ name: 'one', capacity: 1, refillPerSecond: 0.001 });

let clock: FakeClock;
const made: (TieredLimiter | RequestLimiter)[] = [];

beforeEach(() => {
  // setImmediate stays real: `advanceStepwise` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
});

afterEach(async () => {
  const closing = Promise.all(made.splice(0).map((l) => l.close()));
  await advanceStepwise(clock, 1_000);
  await closing;
  vi.useRealTimers();
});

const common = {
  limits: ONE,
  failurePolicy: 'closed' as const,
  timeoutMs: TIMEOUT_MS,
  breaker: false as const,
};

describe.each([
  [
    'RequestLimiter with rememberDenials',
    (store: GlobalStore) => new RequestLimiter({ store, ...common, clock, rememberDenials: true }),
  ],
  [
    'TieredLimiter without the sync',
    (store: GlobalStore) => new TieredLimiter({ store, ...common, clock, sync: false }),
  ],
  ['TieredLimiter with the sync', (store: GlobalStore) => new TieredLimiter({ store, ...common, clock })],
])('%s: a reward that timed out and landed', (_, make) => {
  it('leaves no remembered denial behind once it landed', async () => {
    const late = { on: false };
    const inner = new MemoryStore({ clock });
    const limiter = make(answeringLate(inner, late, LATE_MS));
    made.push(limiter);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
    late.on = true;
    const rewarded = limiter.reward('k', 1);
    await advanceStepwise(clock, TIMEOUT_MS + 5);
    expect(await rewarded).toBe(false);
    // It lands: the store has the token.
    await advanceStepwise(clock, LATE_MS);
    expect((await inner.apply({ key: 'k', limits: [ONE] })).remaining).toBe(1);
    late.on = false;
    // Before: turned away here (`local`, `lease`), 1,000 s less the 255 ms since.
    const d = await limiter.consume('k');
    expect(d).toMatchObject({ allowed: true, tier: 'global' });
  });
});
