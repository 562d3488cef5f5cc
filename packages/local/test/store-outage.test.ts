// What the README promises while the store is away ("Choosing a failure policy", "When Redis
// fails", "Graceful shutdown"), for both limiters that call a store: the `local` policy's divided
// rate as time passes, the half-open breaker's single probe, the defaults of the timeout, the
// breaker and close()'s wait, and the cap on hand-backs kept for an answering store. Fake time
// throughout: the limiters read a `FakeClock`, and the guard's timeouts and the lease book's sweep
// are faked timers.
import {
  type BucketOp,
  type BucketReply,
  type Decision,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
  perSecond,
} from '@tiered-limiter/core';
import {
  MemoryStore,
  RequestLimiter,
  type StoreLimiterOptions,
  TieredLimiter,
  type TieredLimiterOptions,
} from '@tiered-limiter/local';
import { FakeClock } from '@tiered-limiter/test-harness';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { settle } from './lease-properties.js';

/**
 * A store that answers, refuses, or holds its answers at a gate until `open()`: a call that stays
 * in flight for as long as a test needs, then lands. Counts every op it is sent.
 */
class GatedStore implements GlobalStore {
  mode: 'answer' | 'refuse' | 'gate' = 'answer';
  readonly ops: BucketOp[] = [];
  readonly #inner: MemoryStore;
  readonly #held: (() => void)[] = [];

  constructor(inner: MemoryStore) {
    this.#inner = inner;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    this.ops.push(op);
    if (this.mode === 'refuse') return Promise.reject(new Error('connection refused'));
    if (this.mode === 'gate') {
      return new Promise((resolve, reject) =>
        this.#held.push(() => this.#inner.apply(op).then(resolve, reject)),
      );
    }
    return this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }

  /** Answers from now on, and lets every held call through. */
  open(): void {
    this.mode = 'answer';
    for (const go of this.#held.splice(0)) go();
  }
}

type Limiter = RequestLimiter | TieredLimiter;
type Options = Omit<StoreLimiterOptions, 'store' | 'clock'> & Partial<TieredLimiterOptions>;

let clock: FakeClock;
let memory: MemoryStore;
let store: GatedStore;
const made: Limiter[] = [];

beforeEach(() => {
  // setImmediate stays real: `settle` lets promise chains run on it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  clock = new FakeClock(0);
  memory = new MemoryStore({ clock });
  store = new GatedStore(memory);
});

afterEach(async () => {
  // Held calls land first, so that close() need not wait out its deadline for them.
  store.open();
  vi.useRealTimers();
  await Promise.all(made.splice(0).map((l) => l.close()));
});

/** Moves the limiters' clock and the faked timers together, then lets what they started finish. */
async function advance(ms: number): Promise<void> {
  clock.advance(ms);
  await vi.advanceTimersByTimeAsync(ms);
  await settle();
}

const LIMITERS = {
  TieredLimiter: (options: Options) => new TieredLimiter({ store, clock, ...options }),
  RequestLimiter: (options: Options) => new RequestLimiter({ store, clock, ...options }),
};

function make(kind: keyof typeof LIMITERS, options: Options): Limiter {
  const limiter = LIMITERS[kind](options);
  made.push(limiter);
  return limiter;
}

/** A limiter of `kind` whose breaker (one failure, 100 ms cooldown) the refusing store has just opened. */
async function openedBreaker(
  kind: keyof typeof LIMITERS,
  failurePolicy: 'open' | 'closed',
): Promise<Limiter> {
  const limiter = make(kind, {
    limits: defineLimit({ capacity: 100, refillPerSecond: 100 }),
    failurePolicy,
    breaker: { failureThreshold: 1, cooldownMs: 100 },
  });
  store.mode = 'refuse';
  await limiter.consume('opens');
  expect(limiter.degraded).toBe(true);
  return limiter;
}

/** `n` requests of `key` one after another: how many were admitted, and the last decision. */
async function consumeMany(limiter: Limiter, key: string, n: number) {
  let admitted = 0;
  let last: Decision | undefined;
  for (let i = 0; i < n; i++) {
    last = await limiter.consume(key);
    expect(last).toMatchObject({ tier: 'fallback', policy: 'local' });
    if (last.allowed) admitted++;
  }
  return { admitted, last: last! };
}

describe.each(Object.keys(LIMITERS) as (keyof typeof LIMITERS)[])('%s while the store is away', (kind) => {
  // The README's local policy divides the capacity and the rate: 100 at 10/s over 4 instances is
  // 25 at once, then 2.5/s, so the fleet's 4 × (25 + 2.5 × W) stays within 100 + 10 × W.
  const LOCAL: Options = {
    limits: defineLimit({ capacity: 100, refillPerSecond: 10 }),
    failurePolicy: 'local',
    ...(kind === 'TieredLimiter' ? { instances: 4 } : { fallback: { instances: 4 } }),
  };

  it('local policy with nothing to divide by is refused at construction, naming fallback.instances', () => {
    const { limits } = LOCAL;
    expect(() => make(kind, { limits, failurePolicy: 'local' })).toThrow(
      expect.objectContaining({ code: 'ERR_TL_CONFIG', option: 'fallback.instances' }),
    );
    expect(() =>
      make(kind, { limits, failurePolicy: 'local', fallback: { limits: perSecond(1) } }),
    ).not.toThrow();
  });

  it('local policy: refills at the global rate divided by instances, not at the global rate', async () => {
    const limiter = make(kind, LOCAL);
    store.mode = 'refuse';
    const burst = await consumeMany(limiter, 'k', 30);
    expect(burst.admitted).toBe(25);
    // One token at 2.5/s is 400 ms away; at the undivided 10/s it would be 100.
    expect(burst.last).toMatchObject({ allowed: false, retryAfterMs: 400 });
    await advance(2000);
    // 2 s at 2.5/s: 5 more, where the undivided rate would give 20.
    expect((await consumeMany(limiter, 'k', 30)).admitted).toBe(5);
    await advance(1000);
    expect((await consumeMany(limiter, 'k', 10)).admitted).toBe(2);
    // The half token left of that second's 2.5 carries over: 200 ms more make a whole one.
    await advance(200);
    expect((await consumeMany(limiter, 'k', 10)).admitted).toBe(1);
  });

  it('local policy: a capacity below the instance count keeps one token per instance, then the divided rate', async () => {
    // 5 a minute over 10 instances: 0.5 each rounds to the one token a bucket needs to admit anything.
    const limiter = make(kind, {
      limits: defineLimit({ capacity: 5, refillPerSecond: 5 / 60, name: 'five-a-minute' }),
      failurePolicy: 'local',
      ...(kind === 'TieredLimiter' ? { instances: 10 } : { fallback: { instances: 10 } }),
    });
    expect(limiter.fallbackLimits?.[0]).toMatchObject({ capacity: 1, refillPerSecond: 5 / 600 });
    store.mode = 'refuse';
    const burst = await consumeMany(limiter, 'k', 3);
    expect(burst.admitted).toBe(1);
    // The next token at 5 a minute ÷ 10: 120 s.
    expect(burst.last).toMatchObject({ allowed: false, retryAfterMs: 120_000 });
  });

  it.each(['open', 'closed'] as const)(
    '%s policy: the decision read no bucket, remaining and resetMs are 0, a denial waits closedRetryAfterMs',
    async (failurePolicy) => {
      const limiter = await openedBreaker(kind, failurePolicy);
      const decision = await limiter.consume('k');
      expect(decision).toMatchObject({
        allowed: failurePolicy === 'open',
        tier: 'fallback',
        policy: failurePolicy,
        remaining: 0,
        resetMs: 0,
        retryAfterMs: failurePolicy === 'open' ? 0 : 1_000,
      });
    },
  );

  it('local policy: setLimits during the outage keeps what each key spent, divided as before', async () => {
    const limiter = make(kind, LOCAL);
    store.mode = 'refuse';
    expect((await consumeMany(limiter, 'k', 30)).admitted).toBe(25);
    // A configuration reloaded mid-outage, the same limit: no fresh local bucket of 25.
    limiter.setLimits(defineLimit({ capacity: 100, refillPerSecond: 10 }));
    expect((await consumeMany(limiter, 'k', 30)).admitted).toBe(0);
    // A lower capacity cuts to it, divided by 4 as well: 60 ÷ 4 = 15 at once for a fresh key.
    limiter.setLimits(defineLimit({ capacity: 60, refillPerSecond: 10, name: '100-10ps' }));
    expect(limiter.fallbackLimits?.[0]?.capacity).toBe(15);
    expect((await consumeMany(limiter, 'k', 30)).admitted).toBe(0);
    expect((await consumeMany(limiter, 'other', 30)).admitted).toBe(15);
  });

  it('local policy: peek takes nothing from the local bucket, as it takes nothing from the store', async () => {
    const limiter = make(kind, LOCAL);
    store.mode = 'refuse';
    // A dashboard polling a key through an outage: each peek said one token fewer, and the
    // 26th turned the key's own requests away (the local bucket of 25 drained by reads).
    for (let i = 0; i < 30; i++) {
      expect(await limiter.peek('polled')).toMatchObject({
        allowed: true,
        remaining: 25,
        tier: 'fallback',
        policy: 'local',
      });
    }
    expect((await consumeMany(limiter, 'polled', 30)).admitted).toBe(25);
    // After those 25, peek says what a request now gets: turned away, still taking nothing.
    expect(await limiter.peek('polled')).toMatchObject({ allowed: false, remaining: 0, tier: 'fallback' });
    await advance(400);
    expect((await consumeMany(limiter, 'polled', 2)).admitted).toBe(1);
  });

  it('half-open breaker: one probe reaches the store, the requests beside it get the policy, and its answer closes the breaker', async () => {
    const limiter = await openedBreaker(kind, 'closed');
    await advance(100);
    store.mode = 'gate';
    const sentBefore = store.ops.length;
    // Distinct keys: a two-tier limiter's requests on one key would share one refill anyway.
    const decisions = ['p0', 'p1', 'p2', 'p3', 'p4'].map((key) => limiter.consume(key));
    await settle();
    expect(store.ops.length - sentBefore).toBe(1);
    const beside = await Promise.all(decisions.slice(1));
    expect(beside.map((d) => [d.allowed, d.tier, d.error?.code])).toEqual(
      Array(4).fill([false, 'fallback', 'ERR_TL_CIRCUIT_OPEN']),
    );
    store.open();
    expect(await decisions[0]).toMatchObject({ allowed: true, tier: 'global' });
    expect(limiter.degraded).toBe(false);
    // Closed by that answer: the next requests reach the store, with no cooldown to wait.
    const sentAfterProbe = store.ops.length;
    const after = await Promise.all(['q0', 'q1', 'q2'].map((key) => limiter.consume(key)));
    expect(after.map((d) => d.tier)).toEqual(['global', 'global', 'global']);
    expect(store.ops.length - sentAfterProbe).toBe(3);
  });

  it('half-open breaker: while the store keeps failing, one probe per cooldown and none between', async () => {
    const limiter = await openedBreaker(kind, 'open');
    let key = 0;
    const burst = () => Promise.all(Array.from({ length: 5 }, () => limiter.consume(`k${key++}`)));
    for (let cooldown = 0; cooldown < 3; cooldown++) {
      const sent = store.ops.length;
      // A failed probe reopens the breaker for a whole cooldown from its failure.
      await advance(99);
      await burst();
      expect(store.ops.length).toBe(sent);
      await advance(1);
      await burst();
      expect(store.ops.length).toBe(sent + 1);
    }
  });

  it('default timeout: a store that never answers gets the policy decision at 20 ms', async () => {
    const limiter = make(kind, {
      limits: defineLimit({ capacity: 10, refillPerSecond: 10 }),
      failurePolicy: 'open',
    });
    store.mode = 'gate';
    let decided: Decision | undefined;
    void limiter.consume('k').then((d) => (decided = d));
    await advance(19);
    expect(decided).toBeUndefined();
    await advance(1);
    expect(decided).toMatchObject({ allowed: true, tier: 'fallback', policy: 'open' });
    expect(decided?.error?.code).toBe('ERR_TL_STORE_TIMEOUT');
  });

  it('default breaker: opens at the third consecutive failure and probes 250 ms later', async () => {
    const limiter = make(kind, {
      limits: defineLimit({ capacity: 10, refillPerSecond: 10 }),
      failurePolicy: 'open',
    });
    store.mode = 'refuse';
    // Errors count one each (timeouts fired together would count once).
    for (let i = 0; i < 2; i++) await limiter.consume(`k${i}`);
    expect(limiter.degraded).toBe(false);
    await limiter.consume('k2');
    expect(limiter.degraded).toBe(true);
    expect(store.ops).toHaveLength(3);
    expect((await limiter.consume('k3')).error?.code).toBe('ERR_TL_CIRCUIT_OPEN');
    await advance(249);
    expect((await limiter.consume('k4')).error?.code).toBe('ERR_TL_CIRCUIT_OPEN');
    expect(store.ops).toHaveLength(3);
    await advance(1);
    expect((await limiter.consume('k5')).error?.code).toBe('ERR_TL_STORE');
    expect(store.ops).toHaveLength(4);
  });
});

describe('TieredLimiter hand-backs kept while the store is away', () => {
  it('keeps at most maxKeys keys owing hand-backs, and sends those once the store answers', async () => {
    const MAX_KEYS = 2;
    const limits = defineLimit({ capacity: 100, refillPerSecond: 1 });
    const limiter = make('TieredLimiter', {
      limits,
      failurePolicy: 'open',
      maxKeys: MAX_KEYS,
      sync: false,
      // Every key leases 5 at its first request; a lease lives 1 s, the store holds it 1.5 s (the
      // grace is half a ttl this long), well past the 600 ms this test runs.
      lease: { minBatch: 5, maxBatch: 5, ttlMs: 1000 },
      timeoutMs: 20,
      breaker: { failureThreshold: 1, cooldownMs: 100 },
    });
    // Six keys ask for leases from a store that holds its answers: the table keeps the last two,
    // so k0–k3 leave it while their calls are out, and the calls time out and open the breaker.
    store.mode = 'gate';
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
    const decisions = keys.map((key) => limiter.consume(key));
    await advance(20);
    for (const d of await Promise.all(decisions)) expect(d.error?.code).toBe('ERR_TL_STORE_TIMEOUT');
    expect(limiter.degraded).toBe(true);
    // The late grants land: each evicted key owes its 5 tokens back, and the open breaker refuses
    // all four hand-backs; at most MAX_KEYS of them are kept.
    store.open();
    await settle();
    const remaining = (key: string) => memory.apply({ key, limits: [limits] }).then((r) => r.remaining);
    expect(await Promise.all(keys.map(remaining))).toEqual(Array(6).fill(95));
    const handBacks = () =>
      store.ops.filter(
        (op) => op.take === undefined && op.reserve === undefined && op.reports?.some((r) => r.returned > 0),
      );
    expect(handBacks()).toEqual([]);
    // The sweeps (every 250 ms) send what was kept: the first after the cooldown sends one key
    // as the probe, whose answer closes the breaker, and the next sends the rest.
    await advance(580);
    expect(limiter.degraded).toBe(false);
    expect(handBacks().map((op) => op.reports!.reduce((sum, r) => sum + r.returned, 0))).toEqual(
      Array(MAX_KEYS).fill(5),
    );
    const sentFor = handBacks().map((op) => op.key);
    expect(new Set(sentFor).size).toBe(MAX_KEYS);
    // Well within the store's hold: a key not kept has its 5 tokens back only at the hold's end.
    const evicted = keys.slice(0, 4);
    const back = await Promise.all(evicted.map(async (key) => [key, await remaining(key)]));
    expect(back).toEqual(evicted.map((key) => [key, sentFor.includes(key) ? 100 : 95]));
  });
});

describe('TieredLimiter close() while the store holds its answers', () => {
  it('default closeTimeoutMs: close() waits for a hand-back that never lands until 1 s, and no longer', async () => {
    const limiter = make('TieredLimiter', {
      limits: perSecond(100),
      failurePolicy: 'open',
      sync: false,
      lease: { minBatch: 5, maxBatch: 5 },
    });
    // A lease of 5, one spent: close() has 4 tokens to hand back.
    await limiter.consume('k');
    store.mode = 'gate';
    let closed = false;
    void limiter.close().then(() => (closed = true));
    await settle();
    // The hand-back went out, so the wait below is close() waiting on the store's answer.
    const handBack = store.ops.at(-1)!;
    expect(handBack.reports?.reduce((sum, r) => sum + r.returned, 0)).toBe(4);
    await advance(999);
    expect(closed).toBe(false);
    await advance(1);
    expect(closed).toBe(true);
  });
});

describe('TieredLimiter acquire() in line while the store is away', () => {
  it('a waiter behind a longer one gives up at its own maxWaitMs, and an abort ends its wait at once', async () => {
    const limiter = make('TieredLimiter', {
      limits: defineLimit({ capacity: 10, refillPerSecond: 10 }),
      failurePolicy: 'closed',
    }) as TieredLimiter;
    store.mode = 'refuse';
    // The first in line retries each closedRetryAfterMs (1 s) for 5 s; the others wait behind it.
    const patient = limiter.acquire('k', 1, { maxWaitMs: 5000 });
    let impatient: Awaited<typeof patient> | undefined;
    void limiter.acquire('k', 1, { maxWaitMs: 100 }).then((r) => (impatient = r));
    const controller = new AbortController();
    let aborted: Awaited<typeof patient> | undefined;
    void limiter.acquire('k', 1, { maxWaitMs: 5000, signal: controller.signal }).then((r) => (aborted = r));
    // In line until the first gave up at 5 s, whatever their own bounds said.
    await advance(100);
    expect(impatient).toMatchObject({ acquired: false, reason: 'timeout' });
    expect(impatient!.waitedMs).toBeLessThanOrEqual(100);
    controller.abort();
    await advance(0);
    expect(aborted).toMatchObject({ acquired: false, reason: 'aborted' });
    expect(aborted!.waitedMs).toBeLessThanOrEqual(100);
    await advance(5000);
    expect(await patient).toMatchObject({ acquired: false, reason: 'timeout' });
  });

  it('many waiters in line listen for close() without a leak warning', async () => {
    const limiter = make('TieredLimiter', {
      limits: defineLimit({ capacity: 10, refillPerSecond: 10 }),
      failurePolicy: 'closed',
    }) as TieredLimiter;
    store.mode = 'refuse';
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const waiting = Array.from({ length: 20 }, () => limiter.acquire('k', 1, { maxWaitMs: 100 }));
      await advance(100);
      expect((await Promise.all(waiting)).map((r) => r.reason)).toEqual(Array(20).fill('timeout'));
      await new Promise((r) => setImmediate(r)); // a warning is emitted on a later tick
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('TieredLimiter: a guarded call that sends nothing is no probe', () => {
  it('block() or setLimits() on keys that owe nothing, while the breaker is due to probe, leave it open', async () => {
    const limiter = (await openedBreaker('TieredLimiter', 'open')) as TieredLimiter;
    const recovered: unknown[] = [];
    limiter.on('recovered', (info) => recovered.push(info));
    await advance(100); // the cooldown is over: the next guarded call is the probe
    // A key with nothing leased: its hand-back op is empty, nothing reaches the store, and the
    // empty call "succeeded": the breaker closed and `recovered` said the store was back.
    limiter.block('idle', 1000);
    limiter.setLimits(defineLimit({ capacity: 100, refillPerSecond: 100 }));
    await settle();
    expect(recovered).toEqual([]);
    expect(limiter.degraded).toBe(true);
    // The next request is the probe, and the store still refuses it.
    expect(await limiter.consume('after')).toMatchObject({
      tier: 'fallback',
      error: { code: 'ERR_TL_STORE' },
    });
  });
});
