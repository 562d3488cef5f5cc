import { defineLimit, perSecond } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLOCK_THREAD_FROM_PER_SECOND,
  CLOCK_THREAD_UNTIL_PER_SECOND,
  HotClock,
} from '../src/tiered/hot-clock.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A `HotClock` over a decision count the test sets, reviewed at times the test gives. */
function counted(allowed = true) {
  let decisions = 0;
  const clock = new HotClock(allowed, 0, () => decisions);
  let nowMs = 0;
  /** `perSecond` decisions a second for `ms`, then a review at the end of them. */
  const run = (perSecond: number, ms = 100) => {
    decisions += (perSecond * ms) / 1000;
    nowMs += ms;
    clock.review(nowMs);
  };
  return { clock, run };
}

const held: HotClock[] = [];
afterEach(() => {
  for (const clock of held.splice(0)) clock.release();
});

describe('HotClock: the shared clock thread only while the hot path is busy', () => {
  it('reads the limiter’s clock below the rate the thread pays for', () => {
    const { clock, run } = counted();
    held.push(clock);
    run(CLOCK_THREAD_FROM_PER_SECOND - 1_000);
    expect(clock.hold.held).toBe(false);
    expect(clock.view).toBeUndefined();
  });

  it('joins the thread at the rate, and its slot follows the time', async () => {
    const { clock, run } = counted();
    held.push(clock);
    run(CLOCK_THREAD_FROM_PER_SECOND);
    expect(clock.hold.held).toBe(true);
    // The slot is read from the first review that finds the worker writing it.
    const started = performance.now() + 3_000;
    while (clock.view === undefined && performance.now() < started) {
      await sleep(10);
      run(CLOCK_THREAD_FROM_PER_SECOND);
    }
    const view = clock.view;
    expect(view).toBeInstanceOf(Float64Array);
    const first = view![0]!;
    expect(Math.abs(first - performance.now())).toBeLessThan(1_000);
    // The worker rewrites the slot every millisecond.
    const deadline = performance.now() + 3_000;
    while (view![0] === first && performance.now() < deadline) await sleep(10);
    expect(view![0]).toBeGreaterThan(first);
  });

  it('keeps its slot on the time while the main thread is blocked', async () => {
    const { clock, run } = counted();
    held.push(clock);
    run(CLOCK_THREAD_FROM_PER_SECOND);
    const started = performance.now() + 3_000;
    while (clock.view === undefined && performance.now() < started) {
      await sleep(10);
      run(CLOCK_THREAD_FROM_PER_SECOND);
    }
    const view = clock.view!;
    expect(view).toBeInstanceOf(Float64Array);
    // A busy handler or a long GC: no timer, no turn of the event loop for 200 ms. A slot the main
    // thread kept would read 200 ms behind now; the worker's is a few ms behind at most (50 ms
    // left for a worker kept off a core on a loaded machine).
    const blockedUntil = performance.now() + 200;
    while (performance.now() < blockedUntil);
    expect(performance.now() - view[0]!).toBeLessThan(50);
  });

  it('reads the limiter’s clock until the thread has written the time', () => {
    let running = false;
    const slot = new Float64Array(1);
    let holders = 0;
    const source = {
      acquire: () => {
        holders++;
        return { view: slot, running: () => running };
      },
      release: () => {
        holders--;
      },
    };
    let decisions = 0;
    const clock = new HotClock(true, 0, () => decisions, source);
    decisions += CLOCK_THREAD_FROM_PER_SECOND / 10;
    clock.review(100);
    expect(clock.hold.held).toBe(true);
    expect(clock.view).toBeUndefined();
    decisions += CLOCK_THREAD_FROM_PER_SECOND / 10;
    clock.review(200);
    expect(clock.view).toBeUndefined();
    running = true;
    decisions += CLOCK_THREAD_FROM_PER_SECOND / 10;
    clock.review(300);
    expect(clock.view).toBe(slot);
    clock.release();
    expect(clock.view).toBeUndefined();
    expect(holders).toBe(0);
  });

  it('keeps the thread between the two rates, and lets it go below the lower one', () => {
    const { clock, run } = counted();
    held.push(clock);
    run(CLOCK_THREAD_FROM_PER_SECOND * 2);
    run((CLOCK_THREAD_FROM_PER_SECOND + CLOCK_THREAD_UNTIL_PER_SECOND) / 2);
    expect(clock.hold.held).toBe(true);
    run(CLOCK_THREAD_UNTIL_PER_SECOND);
    expect(clock.hold.held).toBe(true);
    run(CLOCK_THREAD_UNTIL_PER_SECOND - 1_000);
    expect(clock.hold.held).toBe(false);
    expect(clock.view).toBeUndefined();
    // And joins again when busy again.
    run(CLOCK_THREAD_FROM_PER_SECOND);
    expect(clock.hold.held).toBe(true);
  });

  it('never joins when it may not (a clock of the caller’s, or exactClock)', () => {
    const { clock, run } = counted(false);
    held.push(clock);
    run(CLOCK_THREAD_FROM_PER_SECOND * 100);
    expect(clock.hold.held).toBe(false);
    expect(clock.view).toBeUndefined();
  });

  it('lets go once, however often it is released', () => {
    const { clock, run } = counted();
    run(CLOCK_THREAD_FROM_PER_SECOND);
    clock.release();
    clock.release();
    expect(clock.hold.held).toBe(false);
    expect(clock.view).toBeUndefined();
  });
});

describe('TieredLimiter: which clock its hot path reads', () => {
  const open: TieredLimiter[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((limiter) => limiter.close()));
  });

  const make = (options: Partial<TieredLimiterOptions> = {}) => {
    // One instance: a sync period of 20 ms, so the lease book's ticks (its reviews) come often.
    const limiter = new TieredLimiter({
      store: new MemoryStore(),
      limits: perSecond(100),
      failurePolicy: 'open',
      instances: 1,
      ...options,
    });
    open.push(limiter);
    return limiter;
  };

  /**
   * Bursts of decisions on one key (admitted, then remembered denials: nearly all on the hot path;
   * one the hot path cannot answer, once a denial ends, goes to the store), a turn of the event
   * loop between them, until `done()` or `ms` passed. A burst of 5,000 takes a few ms: far above
   * the rate the thread starts at, even on 2 loaded cores.
   */
  const busy = async (limiter: TieredLimiter, done: () => boolean, ms: number) => {
    const deadline = performance.now() + ms;
    while (!done() && performance.now() < deadline) {
      for (let i = 0; i < 5_000; i++) limiter.tryConsume('hot') ?? (await limiter.consume('hot'));
      await turn();
    }
  };

  it('reads performance.now() while quiet, joins the thread while busy, and leaves it when quiet again', async () => {
    const limiter = make();
    for (let i = 0; i < 50; i++) limiter.tryConsume('hot') ?? (await limiter.consume('hot'));
    await sleep(100);
    expect(limiter.stats().clockThread).toBe(false);

    await busy(limiter, () => limiter.stats().clockThread, 3_000);
    expect(limiter.stats().clockThread).toBe(true);

    const deadline = performance.now() + 2_000;
    while (limiter.stats().clockThread && performance.now() < deadline) await sleep(10);
    expect(limiter.stats().clockThread).toBe(false);
  });

  /**
   * Decisions on one key in a loop that never yields to the event loop, so no timer fires: lease
   * hits and remembered denials answer synchronously, and the `MemoryStore` in microtasks. Until
   * `done()` (checked every 1,000 decisions) or `ms` passed; says whether a timer fired meanwhile.
   */
  const busyHoldingTheLoop = async (limiter: TieredLimiter, done: () => boolean, ms: number) => {
    let timerFired = false;
    const timer = setTimeout(() => (timerFired = true), 0);
    const deadline = performance.now() + ms;
    while (!done() && performance.now() < deadline) {
      for (let i = 0; i < 1_000; i++) limiter.tryConsume('hot') ?? (await limiter.consume('hot'));
    }
    clearTimeout(timer);
    return { timerFired };
  };

  /** Denied for 10 s after its first 10 tokens: nearly every decision a remembered denial. */
  const DENIED = defineLimit({ capacity: 10, refillPerSecond: 0.1 });
  /** Never denies: every decision a lease hit, or a refill's. */
  const ADMITTED = defineLimit({ capacity: 1_000_000_000, refillPerSecond: 1_000_000_000 });

  // The lease book's timer cannot review the clock while the loop is held: the hot path does, every
  // 16,384 reads, at most every 500 ms or period (and the worker's start). Before, it read
  // `performance.now()` until the loop yielded.
  it.each([
    ['sync: false', 'denials', { sync: false as const, limits: DENIED }],
    ['sync: false', 'admissions', { sync: false as const, limits: ADMITTED }],
    ['the sync', 'denials', { limits: DENIED }],
    ['the sync', 'admissions', { limits: ADMITTED }],
  ])('joins the thread with %s in a loop that never yields (%s)', async (_sync, _kind, options) => {
    const limiter = make(options);
    const { timerFired } = await busyHoldingTheLoop(limiter, () => limiter.stats().clockThread, 3_000);
    expect(timerFired).toBe(false);
    expect(limiter.stats().clockThread).toBe(true);
  });

  // A period of 4.4 s (4 instances at 1 call a second): the ticks review at most every 2.2 s, so
  // the thread took two of them, 4.4–6.7 s, where the hot path's own reviews take half a second
  // and the worker's start.
  it('joins the thread about half a second into a busy spell, however long the sync period', async () => {
    const limiter = make({ instances: 4, sync: { fleetCallsPerSecond: 1 }, limits: ADMITTED });
    expect(limiter.stats().syncPeriodMs).toBeGreaterThan(4_000);
    const startedAt = performance.now();
    await busy(limiter, () => limiter.stats().clockThread, 3_000);
    expect(limiter.stats().clockThread).toBe(true);
    expect(performance.now() - startedAt).toBeLessThan(2_000);
  });

  it('without the sync, keeps the thread through the tick the loop held up, and leaves it when quiet', async () => {
    const limiter = make({ sync: false, limits: DENIED });
    await busyHoldingTheLoop(limiter, () => limiter.stats().clockThread, 3_000);
    expect(limiter.stats().clockThread).toBe(true);
    // 20 ms of other work and then a turn of the event loop, in which the late tick fires: the
    // few decisions since the hot path's review are no rate to let the thread go by.
    const until = performance.now() + 20;
    while (performance.now() < until);
    await sleep(1);
    expect(limiter.stats().clockThread).toBe(true);

    const deadline = performance.now() + 3_000;
    while (limiter.stats().clockThread && performance.now() < deadline) await sleep(10);
    expect(limiter.stats().clockThread).toBe(false);
  });

  it('never joins with exactClock', async () => {
    const limiter = make({ exactClock: true });
    await busy(limiter, () => limiter.stats().clockThread, 300);
    expect(limiter.stats().clockThread).toBe(false);
  });

  it('lets the thread go on close()', async () => {
    const limiter = make();
    await busy(limiter, () => limiter.stats().clockThread, 3_000);
    expect(limiter.stats().clockThread).toBe(true);
    await limiter.close();
    expect(limiter.stats().clockThread).toBe(false);
  });
});
