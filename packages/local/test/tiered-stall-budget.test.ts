// A request's refills share one budget, the guard's timeout, lengthened by the stalls of this
// process the guard saw. Before, a stall seen restarted every request's budget where it ended: a
// request that had used most of its timeout got a whole new one (a fresh clone's CI read 136 ms
// against the 110 ms promised on a slow Redis, with the stall already taken off).

import {
  type BucketOp,
  type BucketReply,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
} from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';

const TIMEOUT_MS = 200;
/** Each refill's answer: under the timeout, so only the shared budget can end a request early. */
const ANSWER_MS = 150;
/** How long this process stalls, from just before the stuck call's timer is due. */
const STALL_MS = 20;
/** Tens of ms, as the brief allows a decision on a loaded 2-core machine (before: 360–369 ms). */
const MARGIN_MS = 80;
/** A key at its limit: each refill brings at most 5 tokens for 30 waiters. */
const HOT = defineLimit({ capacity: 5, refillPerSecond: 200, name: 'hot' });
const WAITERS = 30;

/** A `MemoryStore` that answers after `ANSWER_MS`, and never for the key `stuck`. */
class SlowStore implements GlobalStore {
  readonly #inner = new MemoryStore();

  apply(op: BucketOp): Promise<BucketReply> {
    if (op.key.endsWith('stuck')) return new Promise<BucketReply>(() => {});
    return new Promise((resolve, reject) =>
      setTimeout(() => this.#inner.apply(op).then(resolve, reject), ANSWER_MS),
    );
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#inner.reset(key, limits);
  }
}

const open: TieredLimiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** A two-tier limiter on the `SlowStore`, no sync and no breaker: only the budget ends a request early. */
function slowLimiter(): TieredLimiter {
  const limiter = new TieredLimiter({
    store: new SlowStore(),
    limits: HOT,
    sync: false,
    failurePolicy: 'closed',
    timeoutMs: TIMEOUT_MS,
    breaker: false,
  });
  open.push(limiter);
  return limiter;
}

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // this process stalls, as a long synchronous task or garbage collection makes it
  }
}

describe('TieredLimiter: a stall of this process during a request on a slow store', () => {
  it('lengthens the budget its refills share by the stall, rather than granting a whole new timeout', async () => {
    const limiter = slowLimiter();
    // A call that never answers: its timer, due at STUCK_DUE_MS, is the one the stall makes late.
    const STUCK_DUE_MS = ANSWER_MS - 10;
    const t0 = performance.now();
    void limiter.consume('stuck');
    void limiter.consume('stuck');
    await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS - STUCK_DUE_MS));
    const startedAt = performance.now();
    // The stall begins just before the stuck call's timer is due, and ends after the hot key's
    // first refill has answered: the guard sees it, then the waiters who lost that refill retry.
    const stall = setTimeout(() => busyFor(STALL_MS), t0 + TIMEOUT_MS - 5 - performance.now());
    const took = await Promise.all(
      Array.from({ length: WAITERS }, async () => {
        await limiter.consume('hot');
        return performance.now() - startedAt;
      }),
    );
    clearTimeout(stall);
    const slowest = Math.max(...took);
    console.log(`slowest of ${WAITERS}: ${Math.round(slowest)} ms`);
    expect(slowest).toBeLessThanOrEqual(TIMEOUT_MS + STALL_MS + MARGIN_MS);
  });
});

describe('TieredLimiter: a request whose budget runs out on a call still on its way', () => {
  it('gets the policy, counted in stats().decisions.fallback, with no failure event: no call failed', async () => {
    const limiter = slowLimiter();
    const failures: unknown[] = [];
    limiter.on('failure', (error) => failures.push(error));
    // 30 waiters on 5 tokens: the first refill answers at 150 ms; those it left out retry with
    // 50 ms of their 200 left, on a refill that takes 150: the policy decides for them.
    const decisions = await Promise.all(Array.from({ length: WAITERS }, () => limiter.consume('hot')));
    const byPolicy = decisions.filter((d) => d.tier === 'fallback');
    expect(byPolicy.length).toBeGreaterThan(0);
    for (const d of byPolicy)
      expect(d).toMatchObject({ allowed: false, policy: 'closed', error: { code: 'ERR_TL_STORE_TIMEOUT' } });
    expect(limiter.stats().decisions.fallback).toBe(byPolicy.length);
    // The late refills land (within their own timeouts): nothing failed, so nothing is reported as failed.
    await new Promise((resolve) => setTimeout(resolve, 2 * ANSWER_MS));
    expect(failures).toEqual([]);
  });
});
