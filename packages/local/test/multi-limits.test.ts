/**
 * Keys with several limits at once (all or nothing): a lease takes no more than the tightest limit
 * has left, hand-backs reach every limit once, a decision's numbers are the limit it names, and
 * `setLimits` between one limit and two keeps all of that, on every limiter over a `MemoryStore`.
 */
import { type Decision, defineLimit, type GlobalStore, type LimitSpec } from '@tiered-limiter/core';
import {
  type AcquireResult,
  LocalLimiter,
  MemoryStore,
  RequestLimiter,
  TieredLimiter,
} from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advanceStepwise, settle } from './fake-time.js';
import { LateReplies } from './late-replies.js';

/** Nothing refills during a test: 1 token in 1,000 s. */
const SLOW = 0.001;
const A = defineLimit({ capacity: 100, refillPerSecond: SLOW, name: 'a' });
const B = defineLimit({ capacity: 10, refillPerSecond: SLOW, name: 'b' });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** Whole tokens `spec`'s bucket of `key` holds in `store`, taking nothing. */
async function left(store: MemoryStore, key: string, spec: LimitSpec): Promise<number> {
  return (await store.apply({ key, limits: [spec] })).remaining;
}

async function request(limiter: TieredLimiter | RequestLimiter, key: string, cost = 1): Promise<Decision> {
  const fast = limiter instanceof TieredLimiter ? limiter.tryConsume(key, cost) : undefined;
  const decision = fast ?? (await limiter.consume(key, cost));
  await settle();
  return decision;
}

/** A decision of any limiter, its hot path first. */
async function decide(
  limiter: LocalLimiter | RequestLimiter | TieredLimiter,
  key: string,
): Promise<Decision> {
  if (limiter instanceof RequestLimiter) return limiter.consume(key);
  return limiter.tryConsume(key) ?? (await limiter.consume(key));
}

/** Every number of `d` is the named limit's: its capacity, never more tokens than it holds. */
function expectCoherent(d: Decision, limits: readonly LimitSpec[]): void {
  const spec = limits.find((s) => s.name === d.name);
  expect(spec, `${d.name} is a limit in force`).toBeDefined();
  expect(d.limit).toBe(spec!.capacity);
  expect(d.remaining).toBeLessThanOrEqual(spec!.capacity);
  // Until full with nothing on lease: a lease's hold may come after the bucket's own refill.
  expect(d.resetMs).toBeLessThanOrEqual(Math.ceil(spec!.fillMs) + 60_000);
}

const MODES = [
  { name: 'sync: false', options: { sync: false as const, lease: { minBatch: 50 } } },
  { name: 'the periodic sync', options: {} },
];

describe.each(MODES)('TieredLimiter with two limits ($name)', ({ options }) => {
  // The sync's timers run only when a test moves them: a round in real time on a loaded machine
  // leased under the test's feet.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
    vi.useRealTimers();
  });

  function tiered(store: MemoryStore, clock: FakeClock, limits: readonly LimitSpec[], extra = {}) {
    const limiter = new TieredLimiter({
      store,
      limits,
      failurePolicy: 'closed',
      clock,
      instances: 1,
      timeoutMs: 1_000,
      ...options,
      ...extra,
    });
    open.push(limiter);
    return limiter;
  }

  it('a lease takes no more than the tightest limit has left: 3 of an hour, not 50', async () => {
    const clock = new FakeClock(1_000);
    const store = new MemoryStore({ clock });
    const burst = defineLimit({ capacity: 100, refillPerSecond: SLOW, name: 'burst' });
    const hourly = defineLimit({ capacity: 1_000, refillPerSecond: SLOW, name: 'hourly' });
    await store.apply({ key: 'k', limits: [hourly], take: 997 });
    const limiter = tiered(store, clock, [burst, hourly]);
    const decisions = [];
    for (let i = 0; i < 8; i++) decisions.push(await request(limiter, 'k'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false, false, false, false]);
    for (const d of decisions) expectCoherent(d, [burst, hourly]);
    expect(decisions.at(-1)).toMatchObject({ name: 'hourly', remaining: 0 });
    const stats = limiter.stats();
    expect(stats.tokensLeased + stats.tokensTaken).toBe(3);
    await limiter.close();
    expect([await left(store, 'k', burst), await left(store, 'k', hourly)]).toEqual([97, 0]);
  });

  it('hand-backs return to every limit once: on eviction, block and close', async () => {
    const clock = new FakeClock(1_000);
    const store = new MemoryStore({ clock });
    const limiter = tiered(store, clock, [A, B], { maxKeys: 1 });
    for (let i = 0; i < 3; i++) await request(limiter, 'k');
    // Another key pushes `k` out (maxKeys 1): its lease goes back.
    await request(limiter, 'other');
    for (let i = 0; i < 2; i++) await request(limiter, 'k');
    limiter.block('k', 1_000);
    // The hand-back leaves before time moves: one that lands after the store's hold is counted spent.
    await settle();
    clock.advance(1_000);
    await request(limiter, 'other');
    await request(limiter, 'other');
    await limiter.close();
    // Each bucket short by what was admitted from it: none lost, none handed back twice.
    expect([await left(store, 'k', A), await left(store, 'k', B)]).toEqual([95, 5]);
    expect([await left(store, 'other', A), await left(store, 'other', B)]).toEqual([97, 7]);
    expect(limiter.stats().tokensUnreported).toBe(0);
  });

  it('setLimits 1 → 2 → 1 with leases out: each lease goes back to the limits it was taken from', async () => {
    const clock = new FakeClock(1_000);
    const store = new MemoryStore({ clock });
    const limiter = tiered(store, clock, [A]);
    for (let i = 0; i < 5; i++) expect((await request(limiter, 'k')).allowed).toBe(true);
    limiter.setLimits([A, B]);
    await settle();
    // The lease under `a` alone went back to `a`; `b` is new, and full. A sync's timer (real time)
    // may have leased again under both since: what it holds unspent is off both buckets.
    let held = limiter.stats().tokensHeld;
    expect([(await left(store, 'k', A)) + held, (await left(store, 'k', B)) + held]).toEqual([95, 10]);
    const two = [];
    for (let i = 0; i < 12; i++) two.push(await request(limiter, 'k'));
    expect(two.filter((d) => d.allowed)).toHaveLength(10);
    for (const d of two) expectCoherent(d, [A, B]);
    expect(two.at(-1)).toMatchObject({ allowed: false, name: 'b', remaining: 0 });
    limiter.setLimits([A]);
    await settle();
    held = limiter.stats().tokensHeld;
    expect([(await left(store, 'k', A)) + held, await left(store, 'k', B)]).toEqual([85, 0]);
    const one = await request(limiter, 'k');
    expect(one).toMatchObject({ allowed: true, name: 'a' });
    await limiter.close();
    expect([await left(store, 'k', A), await left(store, 'k', B)]).toEqual([84, 0]);
  });

  it('a block after setLimits names a limit in force, not the one replaced', async () => {
    const clock = new FakeClock(1_000);
    const store = new MemoryStore({ clock });
    const old = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'old' });
    const limiter = tiered(store, clock, [old]);
    await request(limiter, 'k');
    limiter.block('k', 5_000);
    limiter.setLimits([A, B]);
    await settle();
    const denied = limiter.tryConsume('k') ?? (await limiter.consume('k'));
    expect(denied).toMatchObject({ allowed: false, tier: 'local', retryAfterMs: 5_000 });
    expectCoherent(denied, [A, B]);
    expectCoherent(await limiter.peek('k'), [A, B]);
  });
});

describe('TieredLimiter: a reply to replaced limits', () => {
  it('leaves the lease speaking of the limits in force', async () => {
    const clock = new FakeClock(1_000);
    const store = new LateReplies(clock);
    const old = defineLimit({ capacity: 100, refillPerSecond: 1, name: 'old' });
    const limiter = new TieredLimiter({
      store,
      limits: [old],
      failurePolicy: 'closed',
      clock,
      sync: false,
      timeoutMs: 1_000,
      lease: { minBatch: 5 },
    });
    open.push(limiter);
    expect((await limiter.consume('k')).allowed).toBe(true);
    // Spend the lease from the hot path until it sends a refill of its own, held in the store.
    store.hold = true;
    for (let i = 0; i < 3; i++) expect(limiter.tryConsume('k')?.allowed).toBe(true);
    await settle();
    expect(limiter.stats().refills).toBe(2);
    limiter.setLimits([A, B]);
    store.release();
    await settle();
    limiter.block('k', 5_000);
    const denied = limiter.tryConsume('k') ?? (await limiter.consume('k'));
    expect(denied).toMatchObject({ allowed: false, tier: 'local' });
    expectCoherent(denied, [A, B]);
  });
});

describe('a decision over two limits names the one that binds, with its numbers, on every limiter', () => {
  // 3 at 1/s and 5 at 0.1/s: three requests empty `fast`, whose next token is 1 s away; `slow`
  // has 2 and needs 10 s for a third.
  const fast = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'fast' });
  const slow = defineLimit({ capacity: 5, refillPerSecond: 0.1, name: 'slow' });

  function limiters(clock: FakeClock) {
    const store = new MemoryStore({ clock });
    const common = { limits: [fast, slow], clock, failurePolicy: 'closed' as const, timeoutMs: 1_000 };
    const all = {
      LocalLimiter: new LocalLimiter({ limits: [fast, slow], clock }),
      RequestLimiter: new RequestLimiter({ ...common, store: new MemoryStore({ clock }) }),
      'RequestLimiter, rememberDenials': new RequestLimiter({
        ...common,
        store: new MemoryStore({ clock }),
        rememberDenials: true,
      }),
      'TieredLimiter, sync: false': new TieredLimiter({ ...common, store, sync: false }),
      'TieredLimiter, the sync': new TieredLimiter({ ...common, store: new MemoryStore({ clock }) }),
    };
    open.push(...Object.values(all));
    return all;
  }

  it('cost 1: the denial names `fast`, its 1 s and its 0 tokens, though `slow` has 2', async () => {
    const clock = new FakeClock(1_000);
    for (const [kind, limiter] of Object.entries(limiters(clock))) {
      const ds: Decision[] = [];
      for (let i = 0; i < 4; i++) ds.push(await decide(limiter, 'k'));
      await settle();
      for (const d of ds) expectCoherent(d, [fast, slow]);
      expect(
        ds.map((d) => d.allowed),
        kind,
      ).toEqual([true, true, true, false]);
      expect(ds[3], kind).toMatchObject({ name: 'fast', remaining: 0 });
      // A whole token's time, less what the sync lets a lease borrow.
      expect(ds[3]!.retryAfterMs, kind).toBeGreaterThan(900);
      expect(ds[3]!.retryAfterMs, kind).toBeLessThanOrEqual(1_000);
      // A peek (cost 1, taking nothing) speaks of the same limit.
      const look = await limiter.peek('k');
      expectCoherent(look, [fast, slow]);
      expect(look, kind).toMatchObject({ name: 'fast', remaining: 0 });
    }
  });
});

describe("TieredLimiter's remembered denial and a heavier cost (README, Decision: said, not changed)", () => {
  it('tells a cost of 3 the wait of the limit that turned one token away; the retry is told the rest', async () => {
    const clock = new FakeClock(1_000);
    const fast = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'fast' });
    const slow = defineLimit({ capacity: 5, refillPerSecond: 0.1, name: 'slow' });
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: [fast, slow],
      failurePolicy: 'closed',
      clock,
      sync: false,
    });
    open.push(limiter);
    for (let i = 0; i < 3; i++) expect((await request(limiter, 'k')).allowed).toBe(true);
    expect(await request(limiter, 'k')).toMatchObject({ allowed: false, name: 'fast', retryAfterMs: 1_000 });
    // From memory: `fast`'s 3 s for 3 tokens, where `slow` (2 left at 0.1/s) needs 10 s.
    expect(await request(limiter, 'k', 3)).toMatchObject({
      allowed: false,
      name: 'fast',
      retryAfterMs: 3_000,
    });
    clock.advance(3_000);
    expect(await request(limiter, 'k', 3)).toMatchObject({
      allowed: false,
      name: 'slow',
      retryAfterMs: 7_000,
    });
  });
});

describe('acquire() over two limits waits for the one that needs longest for its cost', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([
    ['sync: false', { sync: false as const }],
    ['the periodic sync', {}],
  ])('%s: a cost of 3 is acquired once `slow` has 3, 10 s on, not when `fast` has', async (_, sync) => {
    const clock = new FakeClock(0);
    const fast = defineLimit({ capacity: 3, refillPerSecond: 1, name: 'fast' });
    const slow = defineLimit({ capacity: 5, refillPerSecond: 0.1, name: 'slow' });
    const limiter = new TieredLimiter({
      store: new MemoryStore({ clock }),
      limits: [fast, slow],
      failurePolicy: 'closed',
      clock,
      ...sync,
    });
    open.push(limiter);
    for (let i = 0; i < 3; i++) expect((await limiter.consume('k')).allowed).toBe(true);
    const box: { result?: AcquireResult; atMs?: number } = {};
    void limiter.acquire('k', 3, { maxWaitMs: 15_000 }).then((result) => {
      box.result = result;
      box.atMs = clock.now();
    });
    await advanceStepwise(clock, 9_900);
    expect(box.result).toBeUndefined();
    await advanceStepwise(clock, 200);
    expect(box.result).toMatchObject({ acquired: true });
    expectCoherent(box.result!.decision!, [fast, slow]);
    expect(box.atMs).toBeGreaterThanOrEqual(9_900);
  });
});

describe('a limit looser than another in both capacity and rate is allowed: a penalty can make it bind', () => {
  // `wide` holds more and refills no slower than `narrow`, so a take never finds it short first. A
  // debit sinks each bucket at most its own capacity deep: 100 puts `narrow` at −10 (1.1 s to a
  // token) and `wide` at −50 (5.1 s), and the wider limit keeps the key waiting.
  const narrow = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'narrow' });
  const wide = defineLimit({ capacity: 50, refillPerSecond: 10, name: 'wide' });

  it.each(['LocalLimiter', 'RequestLimiter', 'TieredLimiter'] as const)('%s', async (kind) => {
    const clock = new FakeClock(1_000);
    const limits = [narrow, wide];
    const common = { limits, clock, failurePolicy: 'closed' as const, store: new MemoryStore({ clock }) };
    const limiter =
      kind === 'LocalLimiter'
        ? new LocalLimiter({ limits, clock })
        : kind === 'RequestLimiter'
          ? new RequestLimiter(common)
          : new TieredLimiter({ ...common, sync: false });
    open.push(limiter);
    expect(await limiter.penalty('k', 100)).toBe(true);
    await settle();
    const denied = await decide(limiter, 'k');
    expect(denied).toMatchObject({ allowed: false, name: 'wide', retryAfterMs: 5_100, remaining: 0 });
  });
});

describe("the `local` failure policy's fallback keeps every limit, each divided among the instances", () => {
  class Down implements GlobalStore {
    apply(): Promise<never> {
      return Promise.reject(new Error('connect ECONNREFUSED'));
    }
    reset(): Promise<never> {
      return Promise.reject(new Error('connect ECONNREFUSED'));
    }
  }
  // Per instance of 2: `c` 5 at 0.5/s, `d` 20 at 0.005/s (a token in 200 s).
  const c = defineLimit({ capacity: 10, refillPerSecond: 1, name: 'c' });
  const d = defineLimit({ capacity: 40, refillPerSecond: 0.01, name: 'd' });

  it.each(['RequestLimiter', 'TieredLimiter'] as const)('%s', async (kind) => {
    const clock = new FakeClock(1_000);
    const options = {
      store: new Down(),
      limits: [c, d],
      clock,
      failurePolicy: 'local' as const,
      fallback: { instances: 2 },
      breaker: false as const,
    };
    const limiter =
      kind === 'RequestLimiter'
        ? new RequestLimiter(options)
        : new TieredLimiter({ ...options, sync: false, instances: 2 });
    open.push(limiter);
    const local = limiter.fallbackLimits!;
    expect(local.map((l) => [l.name, l.capacity, l.refillPerSecond])).toEqual([
      ['c', 5, 0.5],
      ['d', 20, 0.005],
    ]);
    let admitted = 0;
    let last: Decision | undefined;
    // 2 s a step: one token of `c` each, until `d`'s 20 are gone.
    for (let i = 0; i < 30; i++) {
      for (let j = 0; j < 6; j++) {
        last = await limiter.consume('k');
        expect(last).toMatchObject({ tier: 'fallback', policy: 'local' });
        expectCoherent(last, local);
        if (last.allowed) admitted++;
      }
      clock.advance(2_000);
    }
    expect(admitted).toBe(20);
    expect(last).toMatchObject({ allowed: false, name: 'd', remaining: 0 });
    expect(last!.retryAfterMs).toBeGreaterThan(100_000);
  });
});
