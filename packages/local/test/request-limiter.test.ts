import { defineLimit, perHour, perSecond } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, type RequestLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  consumeWhileHanging,
  consumeWhileRejecting,
  OPEN_AND_CLOSED,
  ScriptedStore,
} from './store-doubles.js';

afterEach(() => {
  vi.useRealTimers();
});

function setup(options: Partial<RequestLimiterOptions> = {}) {
  const clock = new FakeClock(0);
  const store = new ScriptedStore(new MemoryStore({ clock }));
  const limiter = new RequestLimiter({
    store,
    limits: perSecond(10),
    failurePolicy: 'closed',
    clock,
    ...options,
  });
  return { clock, store, limiter };
}

describe('RequestLimiter', () => {
  it('by default asks the store again for a key it has just turned away', async () => {
    const { store, limiter } = setup();
    for (let i = 0; i < 11; i++) await limiter.consume('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
    expect(store.count('take')).toBe(12);
  });

  it('rememberDenials: turns a key the store turned away in process until a token could pass, and a reward or reset lifts it', async () => {
    const { clock, store, limiter } = setup({
      limits: [perSecond(10), defineLimit({ capacity: 1000, refillPerSecond: 1000, name: 'wide' })],
      rememberDenials: true,
    });
    for (let i = 0; i < 10; i++) await limiter.consume('k');
    const turnedAway = await limiter.consume('k');
    expect(turnedAway).toMatchObject({ allowed: false, retryAfterMs: 100, tier: 'global' });
    clock.advance(40);
    // Within the wait: the same limit's answer, from process, with no store op.
    expect(await limiter.consume('k')).toMatchObject({
      allowed: false,
      retryAfterMs: 60,
      limit: 10,
      name: turnedAway.name,
      tier: 'local',
    });
    expect(store.count('take')).toBe(11);
    // A cost above 1 is never kept: its wait would turn away a cost of 1 the bucket can pay.
    clock.advance(60);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    expect(await limiter.consume('k', 2)).toMatchObject({ allowed: false, tier: 'global' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
    // A reward here lifts the denial now kept: the store may admit at once.
    await limiter.reward('k', 1);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global' });
    await limiter.reset('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    expect(limiter.stats().decisions.local).toBe(1);
  });

  it('makes one store call per decision and reports it as the global tier', async () => {
    const { clock, store, limiter } = setup();
    const decisions = [];
    for (let i = 0; i < 11; i++) decisions.push(await limiter.consume('k'));
    expect(decisions.slice(0, 10).every((d) => d.allowed && d.tier === 'global')).toBe(true);
    expect(decisions[9]).toMatchObject({ remaining: 0, resetMs: 1000, limit: 10 });
    expect(decisions[10]).toMatchObject({ allowed: false, retryAfterMs: 100, tier: 'global' });
    expect(store.count('take')).toBe(11);
    clock.advance(100);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true });
    expect(limiter.stats()).toMatchObject({ allowed: 11, denied: 1, storeOps: 12, storeFailures: 0 });
  });

  it('checks several limits all-or-nothing', async () => {
    const { limiter } = setup({ limits: [perSecond(10), perHour(15, { burst: 12 })] });
    let admitted = 0;
    for (let i = 0; i < 20; i++) if ((await limiter.consume('k')).allowed) admitted++;
    expect(admitted).toBe(10);
  });

  it.each(OPEN_AND_CLOSED)(
    'fails %s when the store rejects, and reports the failure',
    async (policy, allowed) => {
      const { decision: d, failures } = await consumeWhileRejecting(setup({ failurePolicy: policy }));
      expect(d).toMatchObject({ allowed, tier: 'fallback', policy });
      expect(d.error?.cause).toBeInstanceOf(Error);
      expect(failures).toHaveLength(1);
    },
  );

  it('bounds the wait by timeoutMs when the store hangs', async () => {
    // The guard's verdict waits for the poll phase after its timer: a real immediate, not a fake
    // one run 1 ms on.
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'],
    });
    const pending = consumeWhileHanging(setup({ failurePolicy: 'open', timeoutMs: 15 }));
    await vi.advanceTimersByTimeAsync(15);
    expect((await pending).error?.code).toBe('ERR_TL_STORE_TIMEOUT');
  });

  it('stops calling a failing store once the breaker opens, and probes after the cooldown', async () => {
    const { clock, store, limiter } = setup({
      failurePolicy: 'closed',
      breaker: { failureThreshold: 2, cooldownMs: 100 },
    });
    store.mode = 'reject';
    for (let i = 0; i < 5; i++) await limiter.consume('k');
    expect(store.count('take')).toBe(2);
    expect(limiter.degraded).toBe(true);
    clock.advance(100);
    store.mode = 'ok';
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
    expect(limiter.degraded).toBe(false);
  });

  it('falls back to a local bucket with the limits it is given', async () => {
    const { store, limiter } = setup({
      failurePolicy: 'local',
      fallback: { limits: defineLimit({ capacity: 3, refillPerSecond: 1 }) },
    });
    store.mode = 'reject';
    const allowed = [];
    for (let i = 0; i < 5; i++) allowed.push((await limiter.consume('k')).allowed);
    expect(allowed).toEqual([true, true, true, false, false]);
  });

  it('refuses a cost the local bucket can never hold, in its terms, until the store is back', async () => {
    const { store, limiter } = setup({
      failurePolicy: 'local',
      fallback: { limits: defineLimit({ capacity: 3, refillPerSecond: 1, name: 'fallback' }) },
      closedRetryAfterMs: 7000,
    });
    store.mode = 'reject';
    expect(await limiter.consume('k', 5)).toMatchObject({
      allowed: false,
      tier: 'fallback',
      policy: 'local',
      name: 'fallback',
      limit: 3,
      remaining: 0,
      retryAfterMs: 7000,
    });
    // What it can hold is still admitted.
    expect(await limiter.consume('k', 3)).toMatchObject({ allowed: true, tier: 'fallback', policy: 'local' });
  });

  it('throws at once for programmer errors, never for store failures', async () => {
    const { limiter } = setup();
    expect(() => limiter.consume(undefined as never)).toThrow(/`key`/);
    expect(() => limiter.consume('k', 11)).toThrow(/`cost`.*11/);
    await limiter.close();
    expect(() => limiter.consume('k')).toThrow(/closed/);
    expect(() => new RequestLimiter({ store: new MemoryStore(), limits: [], failurePolicy: 'open' })).toThrow(
      /`limits`/,
    );
    expect(
      () =>
        new RequestLimiter({
          store: new MemoryStore(),
          limits: perSecond(1),
          failurePolicy: 'open',
          breaker: { cooldownMs: 0 },
        }),
    ).toThrow(/`breaker\.cooldownMs`.*got 0/);
  });
});
