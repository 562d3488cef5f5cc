import {
  ClosedError,
  CostExceedsCapacityError,
  type Decision,
  defineLimit,
  type GlobalStore,
  type Limiter,
  type LimiterEvents,
  type LimitSpec,
  type SyncLimiter,
} from '@tiered-limiter/core';
import type { AcquireResult } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';
import { decide } from './limits-still.js';
import { sleepAtLeast } from './real-time.js';
import { ScriptedStore } from './store-doubles.js';

/** 8 tokens, one per 1,000 s: no token comes back during a test, on any clock. */
const EIGHT = defineLimit({ capacity: 8, refillPerSecond: 0.001, name: 'eight' });
/**
 * How far behind the two-tier hot path's shared clock thread may read: it lags 4–12 ms on 2 busy
 * cores, and stands still from its start until its worker's first write (53–158 ms measured). The
 * store's lease grace (`MIN_LEASE_GRACE_MS`, 250 ms) is what covers it.
 */
const CLOCK_LAG_MS = 250;
/** Milliseconds per token of `EIGHT`. */
const TOKEN_MS = 1_000_000;

/** A limiter under contract: `SyncLimiter`'s calls; store-backed ones also emit `LimiterEvents`. */
export type ContractLimiter = (Limiter | SyncLimiter) & { on?: ContractEvents };

/** A limiter that can wait in line for its tokens (`TieredLimiter`). */
interface Acquiring {
  acquire(key: string, cost?: number, options?: { maxWaitMs?: number }): Promise<AcquireResult>;
}

/** Whether `limiter` has `acquire` (the README's methods table: Tiered only). */
function canAcquire(limiter: ContractLimiter): limiter is ContractLimiter & Acquiring {
  return typeof (limiter as Partial<Acquiring>).acquire === 'function';
}

/** The events every limiter over a store emits (a limiter may emit more). */
interface ContractEvents {
  (event: 'failure', listener: (...args: LimiterEvents['failure']) => void): unknown;
  (event: 'degraded', listener: (...args: LimiterEvents['degraded']) => void): unknown;
  (event: 'recovered', listener: (...args: LimiterEvents['recovered']) => void): unknown;
}

/**
 * How the contract makes the limiter it checks. `store` is given for a limiter over a shared
 * store (`RequestLimiter`, `TieredLimiter`): the suite wraps the fixture's store to count its calls
 * and to make it fail. `options` go to the constructor beside `store` and `limits` (`breaker`,
 * `failurePolicy`). A `LocalLimiter` has no store: the parts about store calls and store failures
 * do not apply to it.
 */
export interface LimiterFixture {
  /** A fresh shared store whose keys no other test touches, or `undefined` for an in-process limiter. */
  readonly store: (() => GlobalStore | Promise<GlobalStore>) | undefined;
  /** The limiter of `limits`. */
  limiter(
    limits: readonly LimitSpec[],
    store: GlobalStore | undefined,
    options: Record<string, unknown>,
  ): ContractLimiter;
}

/**
 * The contract every limiter of tiered-limiter fulfils (core's `Limiter` and `SyncLimiter`): take
 * and look (`consume`, `tryConsume`, `peek`), manage a key (`reset`, `reward`, `penalty`,
 * `block`), change limits live (`setLimits`), count (`stats`), stop (`close`), and, over a store,
 * report its failures (`failure`, `degraded`, `recovered`) while the failure policy decides. Run it
 * on every limiter and store (Bucket4j's `AbstractDistributedBucketTest`, as `describeStoreContract`
 * does for stores): `RequestLimiter` and `TieredLimiter` on a `MemoryStore`, a Redis server and a
 * Redis Cluster, and `LocalLimiter`.
 *
 * @example
 * describeLimiterContract('RequestLimiter on MemoryStore', {
 *   store: () => new MemoryStore(),
 *   limiter: (limits, store, options) => new RequestLimiter({ store: store!, limits, failurePolicy: 'closed', ...options }),
 * });
 */
export function describeLimiterContract(name: string, fixture: LimiterFixture): void {
  describe(`Limiter contract: ${name}`, () => {
    const open: ContractLimiter[] = [];
    let keys = 0;
    /** A key no other test of this suite uses. */
    const fresh = (label: string) => `${label}#${++keys}`;

    /** A limiter of `limits` and the counting store under it (none for an in-process limiter). */
    async function make(limits: readonly LimitSpec[] = [EIGHT], options: Record<string, unknown> = {}) {
      const store = fixture.store === undefined ? undefined : new ScriptedStore(await fixture.store());
      const limiter = fixture.limiter(limits, store, options);
      open.push(limiter);
      return { limiter, store };
    }
    /** Decisions for `key`, one after another. */
    const run = async (limiter: ContractLimiter, key: string, n: number, cost = 1) => {
      const out: Decision[] = [];
      for (let i = 0; i < n; i++) {
        out.push(cost === 1 ? await decide(limiter, key) : await limiter.consume(key, cost));
      }
      return out;
    };
    const allowed = (decisions: readonly Decision[]) => decisions.map((d) => d.allowed);
    /**
     * What `reset`, `reward` and `penalty` of `key` resolve, one after another. A rejection fails
     * the test with the store's error: the README promises none.
     */
    const manage = async (limiter: ContractLimiter, key: string) => ({
      reset: await limiter.reset(key),
      reward: await limiter.reward(key, 1),
      penalty: await limiter.penalty(key, 1),
    });
    const NONE_DONE = { reset: false, reward: false, penalty: false };
    /**
     * Lets what a two-tier limiter hands back as a `block` or `setLimits` starts reach the store: a
     * few turns for it to leave, then every call out answered, however long a loaded machine takes
     * to carry the round trip (a fixed sleep that assumed one failed a run).
     */
    const handedBack = async (store: ScriptedStore | undefined) => {
      await sleepAtLeast(30);
      await store?.settled();
    };

    afterEach(async () => {
      await Promise.all(open.splice(0).map((limiter) => limiter.close()));
    });

    it('admits the capacity, then denies with a wait, naming the limit', async () => {
      const { limiter } = await make();
      const key = fresh('consume');
      const decisions = await run(limiter, key, 9);
      expect(allowed(decisions)).toEqual([...Array(8).fill(true), false]);
      expect(decisions.map((d) => d.remaining)).toEqual([7, 6, 5, 4, 3, 2, 1, 0, 0]);
      const denied = decisions[8]!;
      expect(denied).toMatchObject({
        allowed: false,
        remaining: 0,
        limit: 8,
        name: 'eight',
        shadowDenied: false,
      });
      expect(denied.retryAfterMs).toBeGreaterThan(0);
      expect(denied.retryAfterMs).toBeLessThanOrEqual(TOKEN_MS);
      for (const d of decisions) expect(d.tier).not.toBe('fallback');
    });

    it('takes a cost from what is left, all or nothing; a cost above the capacity throws at once', async () => {
      const { limiter } = await make();
      const key = fresh('cost');
      expect(allowed(await run(limiter, key, 2, 3))).toEqual([true, true]);
      expect((await limiter.consume(key, 3)).allowed).toBe(false);
      expect((await limiter.consume(key, 2)).allowed).toBe(true);
      expect((await limiter.consume(key, 1)).allowed).toBe(false);
      expect(() => limiter.consume(key, 9)).toThrow(CostExceedsCapacityError);
    });

    it('tryConsume decides in process or returns undefined; either way the limit holds', async () => {
      const { limiter } = await make();
      if (!('tryConsume' in limiter)) return;
      const key = fresh('try');
      let admitted = 0;
      for (let i = 0; i < 12; i++) {
        const d = limiter.tryConsume(key) ?? (await limiter.consume(key));
        if (d.allowed) admitted++;
      }
      expect(admitted).toBe(8);
    });

    it('peek says what a request would get and takes nothing', async () => {
      const { limiter } = await make();
      const key = fresh('peek');
      expect(await limiter.peek(key)).toMatchObject({ allowed: true, remaining: 8, limit: 8, name: 'eight' });
      await run(limiter, key, 3);
      for (let i = 0; i < 5; i++)
        expect(await limiter.peek(key)).toMatchObject({ allowed: true, remaining: 5 });
      expect(allowed(await run(limiter, key, 6))).toEqual([true, true, true, true, true, false]);
      const empty = await limiter.peek(key);
      expect(empty).toMatchObject({ allowed: false, remaining: 0 });
      expect(empty.retryAfterMs).toBeGreaterThan(0);
    });

    it('reset forgets a key: full again, its block lifted, other keys untouched', async () => {
      const { limiter } = await make();
      const [key, other] = [fresh('reset'), fresh('reset-other')];
      await run(limiter, key, 9);
      await run(limiter, other, 2);
      limiter.block(key, 60_000);
      expect(await limiter.reset(key)).toBe(true);
      expect(await limiter.peek(key)).toMatchObject({ allowed: true, remaining: 8 });
      expect(allowed(await run(limiter, key, 9))).toEqual([...Array(8).fill(true), false]);
      expect(await limiter.peek(other)).toMatchObject({ remaining: 6 });
    });

    it('reward gives tokens back, never past the capacity', async () => {
      const { limiter } = await make();
      const [key, full] = [fresh('reward'), fresh('reward-full')];
      await run(limiter, key, 8);
      expect(await limiter.reward(key, 3)).toBe(true);
      expect(allowed(await run(limiter, key, 4))).toEqual([true, true, true, false]);
      expect(await limiter.reward(full, 5)).toBe(true);
      expect(await limiter.peek(full)).toMatchObject({ remaining: 8 });
      expect(allowed(await run(limiter, full, 9))).toEqual([...Array(8).fill(true), false]);
    });

    it('penalty takes tokens regardless, into debt at most a capacity deep', async () => {
      const { limiter } = await make();
      const [key, deep] = [fresh('penalty'), fresh('penalty-deep')];
      expect(await limiter.penalty(key, 3)).toBe(true);
      expect(allowed(await run(limiter, key, 6))).toEqual([true, true, true, true, true, false]);
      expect(await limiter.penalty(deep, 1_000_000_000)).toBe(true);
      const denied = await limiter.peek(deep);
      expect(denied).toMatchObject({ allowed: false, remaining: 0 });
      // −8 tokens: the next one is 9 tokens' time away, not a billion.
      expect(denied.retryAfterMs).toBeGreaterThan(8.9 * TOKEN_MS);
      expect(denied.retryAfterMs).toBeLessThanOrEqual(9 * TOKEN_MS);
      expect(await limiter.reward(deep, 8)).toBe(true);
      expect((await limiter.peek(deep)).allowed).toBe(false);
    });

    it('block denies a key in process, for its time, with no store call; peek says so too', async () => {
      const { limiter, store } = await make();
      const [key, other] = [fresh('block'), fresh('block-other')];
      await run(limiter, key, 2);
      limiter.block(key, 60_000);
      // A two-tier limiter hands its leased tokens back as the block starts: let that go first.
      await handedBack(store);
      const calls = store?.calls.length;
      const blocked = await run(limiter, key, 5);
      for (const d of blocked) {
        // Decided in process, by the block: tier `local` in every limiter (the README's Decision table).
        expect(d).toMatchObject({ allowed: false, tier: 'local' });
        expect(d.retryAfterMs).toBeGreaterThan(59_000);
        // The two-tier hot path reads the shared clock thread, which may lag by a few ms.
        expect(d.retryAfterMs).toBeLessThanOrEqual(60_000 + CLOCK_LAG_MS);
      }
      expect(await limiter.peek(key)).toMatchObject({ allowed: false, remaining: 0, tier: 'local' });
      expect(store?.calls.length).toBe(calls);
      expect((await decide(limiter, other)).allowed).toBe(true);
      // A block ends by itself, and a shorter one never cuts a longer one short.
      const brief = fresh('block-brief');
      const blockedAt = performance.now();
      limiter.block(brief, 40);
      limiter.block(key, 40);
      expect((await decide(limiter, brief)).allowed).toBe(false);
      // A two-tier limiter's hot path reads the shared clock thread, which keeps a denial past its
      // end while it lags, and reads a clock frozen at its start until its worker first writes
      // (53–158 ms measured): the block must end, not before its time, within a generous bound.
      let endedAfterMs = Number.POSITIVE_INFINITY;
      while (performance.now() - blockedAt < 2000) {
        await sleepAtLeast(10);
        if ((await decide(limiter, brief)).allowed) {
          endedAfterMs = performance.now() - blockedAt;
          break;
        }
      }
      expect(endedAfterMs).toBeGreaterThanOrEqual(40);
      expect(endedAfterMs).toBeLessThan(2000);
      expect((await decide(limiter, key)).allowed).toBe(false);
    });

    it('setLimits keeps each key, cuts its tokens to a lower capacity, and applies the new limits', async () => {
      const { limiter, store } = await make();
      const [key, renamed] = [fresh('set'), fresh('set-renamed')];
      await run(limiter, key, 3);
      await run(limiter, renamed, 3);
      const wider = defineLimit({ capacity: 20, refillPerSecond: 0.001, name: 'eight' });
      limiter.setLimits(wider);
      // A two-tier limiter hands back what it leased under the old limits: let that land.
      await handedBack(store);
      expect(limiter.limits).toEqual([wider]);
      expect(await limiter.peek(key)).toMatchObject({ remaining: 5, limit: 20 });
      const narrower = defineLimit({ capacity: 2, refillPerSecond: 0.001, name: 'eight' });
      limiter.setLimits([narrower]);
      await handedBack(store);
      expect(await limiter.peek(key)).toMatchObject({ remaining: 2, limit: 2 });
      const after = await run(limiter, key, 3);
      expect(allowed(after)).toEqual([true, true, false]);
      expect(after[2]).toMatchObject({ limit: 2, name: 'eight' });
      expect(() => limiter.consume(key, 3)).toThrow(CostExceedsCapacityError);
      // A limit of another name is another bucket: it starts full.
      limiter.setLimits(defineLimit({ capacity: 4, refillPerSecond: 0.001, name: 'four' }));
      await handedBack(store);
      expect(await limiter.peek(renamed)).toMatchObject({ remaining: 4, name: 'four' });
    });

    it('stats counts the decisions allowed and denied', async () => {
      const { limiter } = await make();
      await run(limiter, fresh('stats'), 11);
      await run(limiter, fresh('stats'), 2);
      expect(limiter.stats()).toMatchObject({ allowed: 10, denied: 3 });
    });

    it('close resolves (twice too), and every later call throws ClosedError at once', async () => {
      const { limiter } = await make();
      const key = fresh('close');
      await run(limiter, key, 2);
      await limiter.close();
      await limiter.close();
      const calls: (() => unknown)[] = [
        () => limiter.consume(key),
        () => limiter.peek(key),
        () => limiter.reset(key),
        () => limiter.reward(key, 1),
        () => limiter.penalty(key, 1),
        () => limiter.block(key, 1000),
      ];
      if ('tryConsume' in limiter) calls.push(() => limiter.tryConsume(key));
      for (const call of calls) expect(call).toThrow(ClosedError);
    });

    if (fixture.store === undefined) return;

    it('a failing store: every call reports failure, the breaker reports degraded, then recovered', async () => {
      const { limiter, store } = await make([EIGHT], { breaker: { failureThreshold: 3, cooldownMs: 40 } });
      const seen: string[] = [];
      let downMs = -1;
      limiter.on?.('failure', (error) => seen.push(`failure ${error.code}`));
      limiter.on?.('degraded', (error) => seen.push(`degraded ${error.code}`));
      limiter.on?.('recovered', (info) => {
        seen.push('recovered');
        downMs = info.downMs;
      });
      store!.mode = 'reject';
      const during = await run(limiter, fresh('down'), 4);
      for (const d of during) expect(d).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed' });
      expect(during.map((d) => d.error?.code)).toEqual([
        'ERR_TL_STORE',
        'ERR_TL_STORE',
        'ERR_TL_STORE',
        'ERR_TL_CIRCUIT_OPEN',
      ]);
      // Management calls the open breaker refuses resolve false rather than reject.
      expect(await manage(limiter, fresh('down'))).toEqual(NONE_DONE);
      store!.mode = 'ok';
      await sleepAtLeast(45);
      expect((await decide(limiter, fresh('up'))).allowed).toBe(true);
      expect(seen).toEqual([
        'failure ERR_TL_STORE',
        'failure ERR_TL_STORE',
        'failure ERR_TL_STORE',
        'degraded ERR_TL_STORE',
        'recovered',
      ]);
      expect(downMs).toBeGreaterThanOrEqual(40);
      expect(limiter.stats()).toMatchObject({ allowed: 1, denied: 4 });
    });

    it('a store that never answers: the timeout decides, and the policy, never a rejection', async () => {
      const { limiter, store } = await make([EIGHT], {
        timeoutMs: 30,
        failurePolicy: 'open',
        breaker: false,
      });
      store!.mode = 'hang';
      const started = performance.now();
      const decision = await decide(limiter, fresh('hang'));
      expect(decision).toMatchObject({ allowed: true, tier: 'fallback', policy: 'open' });
      expect(decision.error?.code).toBe('ERR_TL_STORE_TIMEOUT');
      expect(performance.now() - started).toBeGreaterThanOrEqual(29);
      expect(await limiter.peek(fresh('hang'))).toMatchObject({ tier: 'fallback', policy: 'open' });
      expect(await manage(limiter, fresh('hang'))).toEqual(NONE_DONE);
    });

    it('a store that rejects: reset, reward, penalty resolve false, peek the policy, close resolves', async () => {
      // No breaker, so that each call meets the store's own error, not the breaker's refusal.
      const { limiter, store } = await make([EIGHT], { breaker: false });
      const [key, held] = [fresh('manage-down'), fresh('manage-held')];
      await run(limiter, key, 2);
      // A two-tier limiter now holds leased tokens of `held`, which close() must try to hand back.
      await run(limiter, held, 2);
      store!.mode = 'reject';
      const sent = store!.calls.length;
      expect(await manage(limiter, key)).toEqual(NONE_DONE);
      const peeked = await limiter.peek(key);
      expect(peeked).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed' });
      expect(peeked.error?.code).toBe('ERR_TL_STORE');
      // Each call reached the failing store, rather than being answered in process.
      const reached = store!.calls.slice(sent).filter((c) => c.op.key === key);
      expect(reached.some((c) => c.method === 'reset')).toBe(true);
      expect(reached.some((c) => c.op.credit === 1)).toBe(true);
      expect(reached.some((c) => c.op.debit === 1)).toBe(true);
      // close, too, resolves, though a two-tier limiter's hand-back of `held`'s lease fails.
      await expect(limiter.close()).resolves.toBeUndefined();
    });

    for (const policy of ['open', 'closed', 'local'] as const) {
      it(`acquire on a store that rejects resolves by the '${policy}' policy, never rejects`, async () => {
        const { limiter, store } = await make([EIGHT], {
          failurePolicy: policy,
          breaker: false,
          // `local` falls back to 8 ÷ 2 = 4 tokens; `closed` asks again after 10 ms, so that a
          // 50 ms wait retries on the failing store several times before it gives up.
          fallback: { instances: 2 },
          closedRetryAfterMs: 10,
        });
        if (!canAcquire(limiter)) return;
        store!.mode = 'reject';
        const key = fresh(`acquire-${policy}`);
        const wait = { maxWaitMs: 50 };
        const first = await limiter.acquire(key, 1, wait);
        expect(first.decision).toMatchObject({ tier: 'fallback', policy });
        expect(first.decision?.error?.code).toBe('ERR_TL_STORE');
        if (policy === 'closed') {
          expect(first).toMatchObject({ acquired: false, reason: 'timeout', decision: { allowed: false } });
          expect(first.waitedMs).toBeGreaterThanOrEqual(40);
          // Each retry asked the failing store again, and met its failure again without a rejection.
          expect(store!.calls.filter((c) => c.op.key === key).length).toBeGreaterThan(1);
          return;
        }
        expect(first).toMatchObject({ acquired: true, reason: 'acquired', decision: { allowed: true } });
        const rest = [];
        for (let i = 0; i < 4; i++) rest.push(await limiter.acquire(key, 1, wait));
        // `open` admits everything; `local` admits its 4-token share, then gives up at once (its
        // next token is 2,000 s away, past the 50 ms wait).
        expect(rest.map((r) => r.reason)).toEqual(
          policy === 'open'
            ? ['acquired', 'acquired', 'acquired', 'acquired']
            : ['acquired', 'acquired', 'acquired', 'timeout'],
        );
        expect(rest.at(-1)?.decision).toMatchObject({ tier: 'fallback', policy });
      });
    }
  });
}
