// Defaults the README's options table states, held by what the limiters do with them rather than
// by the constants (test/readme-defaults.test.ts holds the constants to the table): a `closed`
// denial's wait when `closedRetryAfterMs` is left out, `maxKeys` bounding the keys a
// `RequestLimiter` blocks, the 4 instances a two-tier limiter without the sync sizes its leases
// for, and its 1024 refills at once. Fake clock; the store a MemoryStore that can be made to
// refuse or hang.
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock, ScriptedStore } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it } from 'vitest';

const FIVE = defineLimit({ capacity: 5, refillPerSecond: 1, name: 'five' });
const HUNDRED = defineLimit({ capacity: 100, refillPerSecond: 0.001, name: 'hundred' });

/** Lets the promise chains started so far run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

function setup(kind: 'RequestLimiter' | 'TieredLimiter', options: { maxKeys?: number } = {}) {
  const clock = new FakeClock(1_000);
  const store = new ScriptedStore(new MemoryStore({ clock }));
  const common = { store, limits: FIVE, failurePolicy: 'closed' as const, clock, ...options };
  const limiter =
    kind === 'RequestLimiter' ? new RequestLimiter(common) : new TieredLimiter({ ...common, sync: false });
  open.push(limiter);
  return { clock, store, limiter };
}

describe.each(['RequestLimiter', 'TieredLimiter'] as const)('%s, closedRetryAfterMs left out', (kind) => {
  it('a closed denial tells the client to come back in 1000 ms (the README default), from consume and peek', async () => {
    const { store, limiter } = setup(kind);
    store.mode = 'reject';
    const denied = { allowed: false, tier: 'fallback', policy: 'closed', retryAfterMs: 1000 };
    expect(await limiter.consume('k')).toMatchObject(denied);
    expect(await limiter.peek('k')).toMatchObject(denied);
    // And while the breaker the failures opened refuses the calls itself.
    expect(await limiter.consume('k')).toMatchObject(denied);
    expect(limiter.degraded).toBe(true);
    expect(await limiter.consume('k')).toMatchObject({ ...denied, error: { code: 'ERR_TL_CIRCUIT_OPEN' } });
  });
});

describe('RequestLimiter maxKeys (README: "Request: keys it blocks")', () => {
  it('keeps at most maxKeys blocks: past it the least recently used is forgotten, and that key goes to the store again', async () => {
    const { store, limiter } = setup('RequestLimiter', { maxKeys: 2 });
    limiter.block('a', 60_000);
    limiter.block('b', 60_000);
    // A request for a uses its block: b is now the least recently used.
    expect(await limiter.consume('a')).toMatchObject({ allowed: false, tier: 'local' });
    limiter.block('c', 60_000);
    const calls = store.calls.length;
    expect(await limiter.consume('a')).toMatchObject({ allowed: false, tier: 'local' });
    expect(await limiter.consume('c')).toMatchObject({ allowed: false, tier: 'local' });
    expect(store.calls.length).toBe(calls);
    // b's block was dropped for c: its request is the store's to decide, and admitted.
    expect(await limiter.consume('b')).toMatchObject({ allowed: true, tier: 'global' });
    expect(store.calls.length).toBe(calls + 1);
  });
});

/** A two-tier limiter of HUNDRED with `sync: false` and `options`, on a store that can hang. */
function unsynced(options: Partial<TieredLimiterOptions>) {
  const clock = new FakeClock(1_000);
  const store = new ScriptedStore(new MemoryStore({ clock }));
  const limiter = new TieredLimiter({
    store,
    limits: HUNDRED,
    failurePolicy: 'open',
    clock,
    sync: false,
    ...options,
  });
  open.push(limiter);
  return { store, limiter };
}

describe('TieredLimiter with sync: false, instances left out (README: "else 4 for sizing")', () => {
  it.each([
    [undefined, 25],
    [1, 100],
    [10, 10],
  ])(
    'instances %s: a lease that would take the whole bucket asks for %i of its 100',
    async (instances, want) => {
      const { store, limiter } = unsynced({
        // A first request that leases at once, as much as the fair share lets it.
        lease: { minBatch: 1_000 },
        ...(instances === undefined ? {} : { instances }),
      });
      expect((await limiter.consume('k')).allowed).toBe(true);
      expect(store.calls.map((call) => call.op.reserve?.want)).toEqual([want]);
      expect(limiter.stats().tokensHeld).toBe(want - 1);
    },
  );
});

describe('TieredLimiter maxConcurrentRefills left out', () => {
  it('sends at most 1024 store calls at once; the rest wait their turn, unsent', async () => {
    const { store, limiter } = unsynced({
      // No timeout or breaker to end the calls: only the cap holds them back.
      timeoutMs: 60_000,
      breaker: false,
      // close() in afterEach need not wait out the default second for calls that never answer.
      closeTimeoutMs: 10,
    });
    store.mode = 'hang';
    const decisions = Array.from({ length: 1_100 }, (_, i) => limiter.consume(`k${i}`));
    for (let i = 0; i < 5; i++) await settle();
    expect(store.calls).toHaveLength(1_024);
    void decisions;
  });
});
