import { defineLimit, type GlobalStore, type LimitSpec, perSecond } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  consumeWhileHanging,
  consumeWhileRejecting,
  OPEN_AND_CLOSED,
  ScriptedStore,
} from './store-doubles.js';

/** Lets background refills and refunds (promise chains through p-limit) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Whole tokens in the global bucket now, taking nothing. */
const globalTokens = async (store: GlobalStore, key: string, limits: readonly LimitSpec[]) =>
  (await store.apply({ key, limits })).remaining;

const open: TieredLimiter[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((l) => l.close()));
});

function setup(options: Partial<TieredLimiterOptions> = {}) {
  const clock = new FakeClock(1_000);
  const memory = new MemoryStore({ clock });
  const store = new ScriptedStore(memory);
  const limiter = new TieredLimiter({
    store,
    limits: perSecond(100),
    failurePolicy: 'closed',
    clock,
    sync: false,
    ...options,
  });
  open.push(limiter);
  return { clock, memory, store, limiter };
}

describe('TieredLimiter leases', () => {
  it('spends one round trip on a key seen once, like the per-request tier', async () => {
    const { store, limiter } = setup();
    expect(limiter.tryConsume('a')).toBeUndefined();
    const decision = await limiter.consume('a');
    expect(decision).toMatchObject({
      allowed: true,
      tier: 'global',
      remaining: 99,
      limit: 100,
      retryAfterMs: 0,
    });
    // A key seen once keeps no lease: one take, as the per-request tier would send.
    expect(store.calls).toHaveLength(1);
    expect(store.calls[0]!.op).toMatchObject({ key: 'a', take: 1 });
    expect(store.calls[0]!.op.reserve).toBeUndefined();
    expect(limiter.stats()).toMatchObject({ tokensLeased: 0, tokensHeld: 0 });
  });

  it("keeps no lease for keys seen once, and makes one at a key's second hit within the window", async () => {
    const { clock, store, limiter } = setup();
    for (let i = 0; i < 1000; i++) await limiter.consume(`once:${i}`);
    // A take each, no lease, no table slot: a mark per key.
    expect(store.count('take')).toBe(1000);
    expect(store.calls).toHaveLength(1000);
    expect(limiter.stats()).toMatchObject({ keys: 0, keysSeenOnce: 1000, tokensLeased: 0 });
    clock.advance(4_000);
    expect((await limiter.consume('once:7')).allowed).toBe(true);
    expect(limiter.stats()).toMatchObject({ keys: 1, keysSeenOnce: 999 });
    // The lease's demand counts from the first hit: two requests over 4 s at a 1 s horizon ask
    // for no batch, so the second hit is a take too.
    expect(store.calls.at(-1)!.op).toMatchObject({ key: 'once:7', take: 1 });
    // Two windows later (5 s each, the sync's longest period), a key's first hit is forgotten.
    clock.advance(10_000);
    await limiter.consume('fresh');
    await limiter.consume('once:8');
    expect(limiter.stats()).toMatchObject({ keys: 1, keysSeenOnce: 2 });
  });

  it('marks at most maxKeys keys seen once per generation, two generations', async () => {
    const { limiter } = setup({ maxKeys: 10 });
    for (let i = 0; i < 25; i++) await limiter.consume(`once:${i}`);
    // Generations of 10: keys 0-9 were dropped as key 20 began the third.
    expect(limiter.stats()).toMatchObject({ keys: 0, keysSeenOnce: 15 });
    await limiter.consume('once:3');
    await limiter.consume('once:12');
    expect(limiter.stats()).toMatchObject({ keys: 1, keysSeenOnce: 15 });
  });

  it('makes the lease at a denied first hit, and remembers the denial with no round trip', async () => {
    const { store, memory, limiter } = setup({ limits: defineLimit({ capacity: 5, refillPerSecond: 1 }) });
    await memory.apply({ key: 'k', limits: limiter.limits, take: 5 });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, tier: 'global', retryAfterMs: 1000 });
    expect(limiter.stats()).toMatchObject({ keys: 1, keysSeenOnce: 0 });
    const calls = store.calls.length;
    expect(limiter.tryConsume('k')).toMatchObject({ allowed: false, tier: 'lease', retryAfterMs: 1000 });
    expect(store.calls.length).toBe(calls);
  });

  it('admits steady traffic from leases with few round trips', async () => {
    const { clock, store, limiter } = setup({ limits: perSecond(10_000) });
    let allowed = 0;
    for (let i = 0; i < 1000; i++) {
      const d = limiter.tryConsume('hot') ?? (await limiter.consume('hot'));
      if (d.allowed) allowed++;
      clock.advance(1);
      await settle();
    }
    expect(allowed).toBe(1000);
    expect(store.count('reserve')).toBeLessThanOrEqual(50);
    expect(limiter.stats().decisions.lease).toBeGreaterThanOrEqual(950);
  });

  it('refills in the background before the lease runs dry', async () => {
    const { clock, store, limiter } = setup({ limits: perSecond(10_000) });
    for (let i = 0; i < 200; i++) {
      if (!limiter.tryConsume('k')) await limiter.consume('k');
      clock.advance(1);
      await settle();
    }
    const slow = limiter.stats().decisions.global;
    // Only the first two requests (a key seen once, then the first batch) wait for the store.
    expect(slow).toBeLessThanOrEqual(2);
    expect(store.count('reserve')).toBeGreaterThan(2);
  });

  it('returns unused tokens when the lease expires', async () => {
    const { clock, memory, store, limiter } = setup({ lease: { ttlMs: 1000 } });
    for (let i = 0; i < 20; i++) {
      if (!limiter.tryConsume('k')) await limiter.consume('k');
      await settle();
    }
    const leased = limiter.stats().tokensLeased;
    // The first request, on a key not seen before, was a take; the other 19 came from leases.
    expect(store.count('take')).toBe(1);
    expect(leased).toBeGreaterThan(19);
    clock.advance(1000);
    expect(limiter.tryConsume('k')).toBeUndefined();
    await limiter.consume('k');
    await settle();
    // The expired tokens ride back on the next refill, as the 20 spends rode on refills: no call
    // of their own.
    const reports = store.calls.flatMap((c) => c.op.reports ?? []);
    expect(reports.reduce((sum, r) => sum + r.spent, 0)).toBe(19);
    expect(reports.reduce((sum, r) => sum + r.returned, 0)).toBe(leased - 19);
    expect(store.calls.at(-1)!.op.reports?.some((r) => r.returned > 0)).toBe(true);
    expect(store.count('settle')).toBe(0);
    expect(limiter.stats().tokensExpired).toBe(leased - 19);
    expect(limiter.stats().tokensRefunded).toBe(leased - 19);
    // 1000 ms refilled the bucket, except the room of spends it had not heard of yet (they are
    // in the last op's reports): nothing handed back is lost, nothing is counted twice.
    const last = store.calls.at(-1)!.op;
    const newLease = limiter.stats().tokensLeased - leased;
    const unheard = last.reports!.reduce((sum, r) => sum + r.spent, 0);
    // The last request, a second after the key's last use, was sparse again: a take of 1.
    expect(last.take).toBe(1);
    expect(await globalTokens(memory, 'k', limiter.limits)).toBe(100 - unheard - newLease - 1);
  });

  it('remembers a denial until the global bucket can have tokens, with no round trip', async () => {
    const { clock, store, limiter } = setup({ limits: defineLimit({ capacity: 5, refillPerSecond: 1 }) });
    for (let i = 0; i < 5; i++) expect((await limiter.consume('k')).allowed).toBe(true);
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, tier: 'global', retryAfterMs: 1000 });
    const calls = store.calls.length;
    for (let i = 0; i < 100; i++) {
      expect(limiter.tryConsume('k')).toMatchObject({ allowed: false, tier: 'lease', retryAfterMs: 1000 });
    }
    clock.advance(400);
    expect(limiter.tryConsume('k')).toMatchObject({ allowed: false, retryAfterMs: 600 });
    expect(store.calls.length).toBe(calls);
    clock.advance(600);
    expect(limiter.tryConsume('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, tier: 'global' });
  });

  it('hands a remembered denial out again while its values hold, and counts every one', async () => {
    const { clock, limiter } = setup({ limits: defineLimit({ capacity: 5, refillPerSecond: 1 }) });
    for (let i = 0; i < 5; i++) expect((await limiter.consume('k')).allowed).toBe(true);
    expect((await limiter.consume('k')).allowed).toBe(false);
    const deniedBefore = limiter.stats().denied;
    const first = limiter.tryConsume('k');
    expect(first).toMatchObject({ allowed: false, tier: 'lease', retryAfterMs: 1000, remaining: 0 });
    for (let i = 0; i < 99; i++) expect(limiter.tryConsume('k')).toBe(first);
    expect(limiter.stats().denied).toBe(deniedBefore + 100);
    // Its wait is now shorter: a new decision, handed out again in turn.
    clock.advance(400.5);
    const later = limiter.tryConsume('k');
    expect(later).not.toBe(first);
    expect(later).toMatchObject({ allowed: false, tier: 'lease', retryAfterMs: 600 });
    expect(limiter.tryConsume('k')).toBe(later);
    expect(first).toMatchObject({ retryAfterMs: 1000 });
    // A block answers in its own terms, with its own decision.
    limiter.block('k', 5_000);
    const blocked = limiter.tryConsume('k');
    expect(blocked).toMatchObject({ allowed: false, tier: 'local', retryAfterMs: 5000 });
    expect(limiter.tryConsume('k')).toBe(blocked);
    expect(later).toMatchObject({ tier: 'lease', retryAfterMs: 600 });
  });

  it('reset forgets a key everywhere: its lease is dropped, nothing of it handed back or spent later', async () => {
    const { store, memory, limiter } = setup({
      limits: defineLimit({ capacity: 100, refillPerSecond: 1 }),
      lease: { minBatch: 20 },
    });
    // A second hit makes the lease; its batch of 20 stays here, partly unspent.
    for (let i = 0; i < 3; i++) {
      if (!limiter.tryConsume('k')) await limiter.consume('k');
      await settle();
    }
    expect(limiter.stats().tokensHeld).toBeGreaterThan(0);
    const before = store.calls.length;
    expect(await limiter.reset('k')).toBe(true);
    await settle();
    expect(limiter.stats().tokensHeld).toBe(0);
    // One op went out, the reset; no hand-back of the dropped lease's tokens.
    expect(store.calls.slice(before).map((c) => c.method)).toEqual(['reset']);
    expect(await globalTokens(memory, 'k', limiter.limits)).toBe(100);
    let admitted = 0;
    for (let i = 0; i < 150; i++) {
      const d = limiter.tryConsume('k') ?? (await limiter.consume('k'));
      if (d.allowed) admitted++;
      await settle();
    }
    // A full bucket again, and nothing the old lease held admitted on top of it.
    expect(admitted).toBe(100);
  });

  it('never admits more than the global bucket across instances sharing it', async () => {
    const clock = new FakeClock(0);
    const store = new MemoryStore({ clock });
    const limit = defineLimit({ capacity: 50, refillPerSecond: 10 });
    const fleet = [1, 2, 3].map(() => {
      const l = new TieredLimiter({ store, limits: limit, failurePolicy: 'closed', clock, sync: false });
      open.push(l);
      return l;
    });
    let admitted = 0;
    for (let i = 0; i < 3000; i++) {
      const limiter = fleet[i % 3]!;
      const d = limiter.tryConsume('shared') ?? (await limiter.consume('shared'));
      if (d.allowed) admitted++;
      if (i % 3 === 2) clock.advance(1);
      await settle();
    }
    // 1000 ms elapsed: capacity 50 + 10/s × 1 s, the one bucket's own bound, and nearly all of it.
    expect(admitted).toBeLessThanOrEqual(50 + 10 * 1);
    expect(admitted).toBeGreaterThanOrEqual(50 + 10 * 1 - 3);
  });

  it("returns an evicted key's lease", async () => {
    const { store, limiter } = setup({ maxKeys: 1, limits: perSecond(10_000) });
    for (let i = 0; i < 5; i++) {
      if (!limiter.tryConsume('a')) await limiter.consume('a');
      await settle();
    }
    const held = limiter.stats().tokensHeld;
    expect(held).toBeGreaterThan(0);
    const settles = () =>
      store.calls.filter((c) => c.op.key === 'a' && c.op.reserve === undefined && c.op.take === undefined);
    // A key's first hit is a take and a mark: it takes no slot, and evicts nothing.
    await limiter.consume('b');
    await settle();
    expect(settles()).toEqual([]);
    expect(limiter.stats()).toMatchObject({ keys: 1, keysSeenOnce: 1, tokensHeld: held });
    await limiter.consume('b');
    await settle();
    expect(settles().map((c) => c.op.reports?.reduce((sum, r) => sum + r.returned, 0))).toEqual([held]);
  });

  // README: the store releases a leased token later than it expires at its holder, "by a grace of
  // at least 250 ms". The grace is max(250, ttlMs / 2): the floor covers a holder's stale clock
  // whatever the ttl, and a long lease gets half its life again, so the two cases pin each branch.
  it.each([
    [100, 350],
    [1000, 1500],
  ])(
    'asks the store to hold a lease of ttlMs %i for %i ms, its ttl plus the grace',
    async (ttlMs, holdMs) => {
      const { store, limiter } = setup({ lease: { ttlMs, minBatch: 5 } });
      // minBatch above 1: the key's first request leases, so the first op is the reserve.
      await limiter.consume('k');
      expect(store.calls.map((c) => c.op.reserve?.holdMs)).toEqual([holdMs]);
    },
  );
});

describe('TieredLimiter when the store fails', () => {
  it('uses leftover lease tokens first, then the declared policy', async () => {
    const { store, limiter } = setup({ limits: perSecond(10_000), failurePolicy: 'closed' });
    for (let i = 0; i < 5; i++) {
      if (!limiter.tryConsume('k')) await limiter.consume('k');
      await settle();
    }
    store.mode = 'reject';
    const held = limiter.stats().tokensLeased - 5;
    const tiers: string[] = [];
    for (let i = 0; i < held + 1; i++) tiers.push((await limiter.consume('k')).tier);
    expect(tiers.slice(0, held).every((t) => t === 'lease')).toBe(true);
    const last = await limiter.consume('k');
    expect(last).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed', retryAfterMs: 1000 });
  });

  it.each(OPEN_AND_CLOSED)(
    'fails %s: decides by the policy, carries the error, never throws',
    async (policy, allowed) => {
      const { decision: d, failures } = await consumeWhileRejecting(setup({ failurePolicy: policy }));
      expect(d).toMatchObject({ allowed, tier: 'fallback', policy });
      expect(d.error?.code).toBe('ERR_TL_STORE');
      expect(failures.map((e) => e.code)).toEqual(['ERR_TL_STORE']);
    },
  );

  it('falls back to the local bucket divided among the declared instances', async () => {
    const { store, limiter } = setup({ failurePolicy: 'local', instances: 4 });
    store.mode = 'reject';
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      const d = await limiter.consume('k');
      expect(d).toMatchObject({ tier: 'fallback', policy: 'local' });
      if (d.allowed) admitted++;
    }
    expect(admitted).toBe(25);
  });

  it('opens the breaker, stops calling the store, and recovers by itself', async () => {
    const { clock, store, limiter } = setup({
      failurePolicy: 'open',
      breaker: { failureThreshold: 3, cooldownMs: 250 },
    });
    const events: string[] = [];
    limiter.on('degraded', () => events.push('degraded'));
    limiter.on('recovered', () => events.push('recovered'));
    store.mode = 'reject';
    for (let i = 0; i < 3; i++) await limiter.consume(`k${i}`);
    expect(events).toEqual(['degraded']);
    const calls = store.calls.length;
    const skipped = await limiter.consume('k9');
    expect(skipped.error?.code).toBe('ERR_TL_CIRCUIT_OPEN');
    expect(store.calls.length).toBe(calls);
    store.mode = 'ok';
    clock.advance(250);
    expect(await limiter.consume('k9')).toMatchObject({ allowed: true, tier: 'global' });
    expect(events).toEqual(['degraded', 'recovered']);
    expect(limiter.stats().fallbackMs).toBe(250);
  });

  it('shares one error among the calls an open breaker refuses, until the next failure', async () => {
    const { clock, store, limiter } = setup({
      failurePolicy: 'open',
      breaker: { failureThreshold: 1, cooldownMs: 250 },
    });
    store.mode = 'reject';
    await limiter.consume('k0');
    // An error per refused call, each capturing its stack, took half a busy process's CPU.
    const first = await limiter.consume('k1');
    const second = await limiter.consume('k2');
    expect(first.error?.code).toBe('ERR_TL_CIRCUIT_OPEN');
    expect(second.error).toBe(first.error);
    clock.advance(250);
    const probe = await limiter.consume('k3');
    expect(probe.error?.code).toBe('ERR_TL_STORE');
    const after = await limiter.consume('k4');
    expect(after.error?.code).toBe('ERR_TL_CIRCUIT_OPEN');
    expect(after.error).not.toBe(first.error);
    expect(after.error?.cause).toBe(probe.error);
  });

  it('answers within the timeout when the store hangs', async () => {
    // The guard's verdict waits for the poll phase after its timer: a real immediate, not a fake
    // one run 1 ms on.
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'],
    });
    const pending = consumeWhileHanging(setup({ failurePolicy: 'open', timeoutMs: 20 }));
    await vi.advanceTimersByTimeAsync(19);
    let done = false;
    void pending.then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const d = await pending;
    expect(d).toMatchObject({ allowed: true, tier: 'fallback', policy: 'open' });
    expect(d.error?.code).toBe('ERR_TL_STORE_TIMEOUT');
  });
});

describe('TieredLimiter acquire, shadow mode and lifecycle', () => {
  it('waits in line until tokens are there, and gives up at maxWaitMs or on abort', async () => {
    vi.useFakeTimers();
    const clock = { now: () => Date.now() };
    const store = new MemoryStore({ clock });
    const limiter = new TieredLimiter({
      store,
      limits: defineLimit({ capacity: 1, refillPerSecond: 10 }),
      failurePolicy: 'closed',
      clock,
    });
    open.push(limiter);
    const order: number[] = [];
    const waits = [0, 1, 2].map((i) =>
      limiter.acquire('k', 1, { maxWaitMs: 1000 }).then((r) => {
        order.push(i);
        return r;
      }),
    );
    await vi.advanceTimersByTimeAsync(250);
    const results = await Promise.all(waits);
    expect(order).toEqual([0, 1, 2]);
    expect(results.map((r) => r.reason)).toEqual(['acquired', 'acquired', 'acquired']);
    // A token every 100 ms, less what a lease may borrow: one sync period (a lone instance's
    // 20 ms), 0.2 of a token at 10 a second.
    expect(limiter.stats().syncPeriodMs).toBe(20);
    expect(results.map((r) => r.waitedMs)).toEqual([0, 80, 180]);

    const impatient = await limiter.acquire('k', 1, { maxWaitMs: 10 });
    expect(impatient).toMatchObject({ acquired: false, reason: 'timeout' });

    const controller = new AbortController();
    const aborted = limiter.acquire('k', 1, { signal: controller.signal });
    await vi.advanceTimersByTimeAsync(5);
    controller.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(await aborted).toMatchObject({ acquired: false, reason: 'aborted' });
  });

  it('shadow mode admits what it would deny, and says so', async () => {
    const { limiter } = setup({ shadow: true, limits: defineLimit({ capacity: 1, refillPerSecond: 1 }) });
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, shadowDenied: false });
    const d = await limiter.consume('k');
    expect(d).toMatchObject({ allowed: true, shadowDenied: true, retryAfterMs: 0 });
    expect(limiter.stats().denied).toBe(1);
  });

  it('close() returns leases, and a closed limiter refuses to be used', async () => {
    const { memory, limiter } = setup({ limits: perSecond(10_000) });
    for (let i = 0; i < 5; i++) {
      if (!limiter.tryConsume('k')) await limiter.consume('k');
      await settle();
    }
    expect(await globalTokens(memory, 'k', limiter.limits)).toBeLessThan(10_000 - 5);
    await limiter.close();
    expect(await globalTokens(memory, 'k', limiter.limits)).toBe(10_000 - 5);
    expect(() => limiter.tryConsume('k')).toThrow(/closed/);
    expect(() => limiter.consume('k')).toThrow(expect.objectContaining({ code: 'ERR_TL_CLOSED' }));
  });

  it('refuses bad options and arguments, naming them', () => {
    const store = new MemoryStore();
    const base = { store, limits: perSecond(10), failurePolicy: 'open' as const };
    expect(() => new TieredLimiter({ ...base, lease: { ttlMs: 0 } })).toThrow(/`lease\.ttlMs`.*got 0/);
    expect(() => new TieredLimiter({ ...base, instances: 1.5 })).toThrow(/`instances`.*1\.5/);
    expect(() => new TieredLimiter({ ...base, failurePolicy: 'maybe' as never })).toThrow(/`failurePolicy`/);
    expect(() => new TieredLimiter({ ...base, failurePolicy: 'local' })).toThrow(/fallback\.instances/);
    expect(() => new TieredLimiter({ ...base, timeoutMs: -1 })).toThrow(/`timeoutMs`.*-1/);
    expect(() => new TieredLimiter({ ...base, store: {} as never })).toThrow(/`store`/);
    const limiter = new TieredLimiter(base);
    open.push(limiter);
    expect(() => limiter.tryConsume(42 as never)).toThrow(/`key`.*42/);
    expect(() => limiter.tryConsume('k', 11)).toThrow(
      expect.objectContaining({ code: 'ERR_TL_COST_EXCEEDS_CAPACITY' }),
    );
    expect(() => limiter.tryConsume('k', 0.5)).toThrow(/`cost`/);
  });
});
