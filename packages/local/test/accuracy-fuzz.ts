/**
 * The accuracy fuzz (docs/DECISIONS.md, 2026-12-05): a fleet of `TieredLimiter`s on one store
 * whose calls travel for random fake-timer ms, driven through bursts, costs above 1, `acquire`,
 * `reward`, `penalty`, `reset`, `setLimits`, `block`, restarts, stalls of the event loop and
 * quiet stretches, with the periodic sync or without it, exact or optimistic cold start, one limit
 * or two or three at once per key; every window of every key's admissions is checked against the bound the docs
 * state for the mode.
 */
import { type Decision, defineLimit, type LimitSpec } from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import { seededRandom } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { expect, vi } from 'vitest';
import { DelayedStore, type Take } from './delayed-store.js';
import { type FuzzBound, worstFuzzWindow } from './fuzz-bound.js';
import { type FuzzEvent, fuzzEvent, weightedFuzzEvent } from './fuzz-events.js';
import { type FuzzSetup, fuzzSetup, spacingFor } from './fuzz-setup.js';
import { settle } from './lease-properties.js';

/**
 * The property: any fleet, schedule and travel keeps every key's every window within its bound.
 * `weighted` draws costs up to the smallest capacity (`weightedFuzzEvent`), not 1 to 3.
 */
export function accuracyFuzzProperty(maxEvents = 40, weighted = false) {
  return fc.asyncProperty(
    fuzzSetup,
    fc.array(weighted ? weightedFuzzEvent : fuzzEvent, { minLength: 1, maxLength: maxEvents, size: 'max' }),
    (s, events) => runFuzz(s, events, weighted),
  );
}

/** The same, on keys of two or three limits at once, each checked on its own. */
export function severalLimitsFuzzProperty(maxEvents = 40) {
  return fc.asyncProperty(
    fuzzSetup.filter((s) => s.pair),
    fc.array(fuzzEvent, { minLength: 1, maxLength: maxEvents, size: 'max' }),
    (s, events) => runFuzz(s, events),
  );
}

const KEYS = 3;

/** What the runs exercised, counted when FUZZ_STATS is set (`fuzzCoverage`). */
const coverage = new Map<string, number>();

/** What the runs so far exercised (with FUZZ_STATS set): events, admissions by tier, and kinds of run. */
export function fuzzCoverage(): Record<string, number> {
  return Object.fromEntries([...coverage].sort());
}

/** Plays `events` on a fleet made by `s`, then checks the bound; fake timers on for the run only. */
export function runFuzz(s: FuzzSetup, events: readonly FuzzEvent[], weighted = false): Promise<void> {
  return onFakeTime(() => play(s, events, weighted));
}

/** Runs `run` with timers and `performance` faked, and real ones again after it, whatever happens. */
export async function onFakeTime(run: () => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
  try {
    await run();
  } finally {
    vi.useRealTimers();
  }
}

async function play(s: FuzzSetup, events: readonly FuzzEvent[], weighted: boolean): Promise<void> {
  // The true time: the fake timers' clock, or past it while the event loop is stalled (timers due
  // meanwhile fire late, at the stall's end).
  let stalledUntil = 0;
  const clock = { now: () => Math.max(performance.now(), stalledUntil) };
  // While set, the instances' clocks read this instead: a stale clock through a stall (A2 allows
  // it while the staleness and an instance's lag stay within the 250 ms grace).
  let frozenAt: number | undefined;
  const random = seededRandom(s.seed);
  const travel = () =>
    [Math.floor(random() * (s.maxTravelMs + 1)), Math.floor(random() * (s.maxTravelMs + 1))] as const;
  const store = new DelayedStore(new MemoryStore({ clock }), clock, travel);
  // Several limits are set again under the same names with other numbers (a limit dropped and back
  // would have missed the admissions meanwhile); one limit switches between its two specs.
  const names = s.pair ? ['A', 'B', 'C'].slice(0, s.several) : ['L'];
  const limitsOf = s.limits.map((l, i) =>
    defineLimit({ name: names[i % names.length]!, capacity: l.capacity, refillPerSecond: l.rate }),
  );
  const specs: (LimitSpec | LimitSpec[])[] = s.pair
    ? [limitsOf.slice(0, s.several), limitsOf.slice(s.several)]
    : limitsOf;
  // Both limit sets are in force in turn (setLimits): a cost must fit the smallest capacity of either.
  const costMax = Math.min(weighted ? Number.POSITIVE_INFINITY : 3, ...s.limits.map((l) => l.capacity));
  const spacingMs = s.optimistic ? spacingFor(s) : 0;
  let made = 0;
  let inForce = 0;
  const make = () => {
    const lag = s.lagMs[made++ % s.lagMs.length]!;
    const options: TieredLimiterOptions = {
      store,
      limits: specs[inForce]!,
      failurePolicy: s.optimistic ? 'open' : 'closed',
      clock: { now: () => Math.max(0, (frozenAt ?? clock.now()) - lag) },
      instances: s.declared,
      maxKeys: s.maxKeys,
      // Calls travel up to 2 × 80 ms: the store stays healthy, never timed out.
      timeoutMs: 1000,
      ...(s.sync === false
        ? { sync: false, lease: { ttlMs: s.ttlMs } }
        : { sync: { fleetCallsPerSecond: s.sync } }),
      ...(s.optimistic ? { coldStart: { mode: 'optimistic', credit: s.credit, spacingMs } } : {}),
    };
    const limiter = new TieredLimiter(options);
    everyLimiter.push(limiter);
    return limiter;
  };
  // Every instance made, closed ones too: what each admitted on credit counts at the end.
  const everyLimiter: TieredLimiter[] = [];
  const fleet = Array.from({ length: s.size }, make);
  const closing: Promise<void>[] = [];
  const pending: Promise<unknown>[] = [];
  const admitted: { key: string; atMs: number; cost: number }[] = [];
  const fallbacks: string[] = [];
  const tally = (what: string) => {
    if (process.env.FUZZ_STATS) coverage.set(what, (coverage.get(what) ?? 0) + 1);
  };
  const decided = (key: string, d: Decision, cost: number) => {
    if (d.allowed) tally(`admitted ${d.tier}`);
    if (d.tier === 'fallback') fallbacks.push(`${key} at ${clock.now()}`);
    if (!d.allowed) return;
    admitted.push({ key, atMs: clock.now(), cost });
  };
  const request = (l: TieredLimiter, key: string, cost: number) => {
    const d = l.tryConsume(key, cost);
    if (d !== undefined) decided(key, d, cost);
    else pending.push(l.consume(key, cost).then((d) => decided(key, d, cost)));
  };
  const advance = async (ms: number) => {
    // In steps, so that the clock a timer's callback reads is near the time it was due.
    for (let left = ms; left > 0; left -= 5) await vi.advanceTimersByTimeAsync(Math.min(5, left));
    await settle();
  };
  for (const e of events) {
    const l = fleet[e.instance % fleet.length]!;
    const key = `k${e.key % KEYS}`;
    const cost = Math.min(e.cost, costMax);
    tally(e.kind);
    switch (e.kind) {
      case 'burst':
        for (let i = 0; i < e.n; i++) {
          request(l, key, cost);
          await settle();
        }
        break;
      case 'hammer':
        // Every instance at once, a few requests each a few ms, for `ms`: a key held at its limit.
        for (let t = 0; t < e.ms; t += 1 + (e.n % 5)) {
          for (const m of fleet) for (let i = 0; i < 1 + (e.n % 3); i++) request(m, key, cost);
          await advance(1 + (e.n % 5));
        }
        break;
      case 'churn':
        // Every instance on every key in turn: with `maxKeys` 1 or 2 each evicts the lease of the
        // key before, whose next request starts cold again (optimistically, past its spacing).
        for (let t = 0, k = 0; t < e.ms; t += 1 + (e.n % 4), k++) {
          for (const m of fleet) request(m, `k${(e.key + k) % KEYS}`, cost);
          await advance(1 + (e.n % 4));
        }
        break;
      case 'wait':
        await advance(e.ms);
        break;
      case 'stall':
        // The clock jumps; the requests meanwhile run before any timer catches up, some reading
        // a clock that stayed where the stall began (at most 140 ms, plus a lag of at most 100).
        if (e.all && e.ms <= 140) frozenAt = clock.now();
        stalledUntil = clock.now() + e.ms;
        for (let i = 0; i < e.n; i++) request(l, key, cost);
        await settle();
        frozenAt = undefined;
        await advance(e.ms);
        break;
      case 'acquire':
        pending.push(
          l.acquire(key, cost, { maxWaitMs: e.ms }).then((r) => {
            tally(`acquire ${r.reason}`);
            if (r.acquired) decided(key, r.decision!, cost);
          }),
        );
        await settle();
        break;
      case 'reward':
        pending.push(l.reward(key, e.n));
        await settle();
        break;
      case 'penalty':
        pending.push(l.penalty(key, e.n));
        await settle();
        break;
      case 'reset':
        pending.push(l.reset(key));
        await settle();
        break;
      case 'block':
        l.block(key, Math.max(1, e.ms));
        break;
      case 'setLimits':
        // The whole fleet at once, and a new instance starts with the limits in force: a fleet
        // that disagrees for long on a limit's capacity is outside the bound (docs/ACCURACY.md).
        inForce = e.n % 2;
        for (const m of fleet) m.setLimits(specs[inForce]!);
        await settle();
        break;
      case 'restart': {
        const i = e.instance % fleet.length;
        closing.push(fleet[i]!.close());
        fleet[i] = make();
        await settle();
        break;
      }
    }
  }
  await advance(12_000);
  await Promise.all(pending);
  closing.push(...fleet.map((m) => m.close()));
  await advance(2_000);
  await Promise.all(closing);

  tally(`runs sync=${s.sync !== false} optimistic=${s.optimistic} travel=${s.maxTravelMs > 0}`);
  if (store.credits.length > 0) tally('runs with a credit');
  if (store.resets.some((r) => r.held > 0)) tally('runs with a reset of held tokens');
  expect(store.mismatches).toEqual([]);
  expect(fallbacks).toEqual([]);
  atTheStore(admitted, store.takes);
  // Nothing counted twice: every token admitted came once from the store (a take's, or a grant's
  // not handed back) or from optimistic credit. A token spent twice from a lease, or spent and
  // handed back too, would admit more than that. (Less is a lease a reset forgot, never spent.)
  let optimistic = 0;
  for (const l of everyLimiter) optimistic += l.stats().tokensOptimistic;
  const admittedTokens = admitted.reduce((sum, a) => sum + a.cost, 0);
  expect(admittedTokens, JSON.stringify({ given: store.given, optimistic })).toBeLessThanOrEqual(
    store.given + optimistic,
  );
  if (s.sync === false) expect(store.maxAheadMs).toBe(0);
  else expect(store.maxAheadMs).toBeLessThanOrEqual(5000);
  // Each limit of a key is a bucket of its own; one switched by setLimits is one bucket whose bound
  // takes the larger capacity and rate of its two specs.
  const limits = names.map((name, i) => {
    const specsOf = s.limits.filter((_, j) => j % names.length === i);
    return {
      name,
      capacity: Math.max(...specsOf.map((l) => l.capacity)),
      rate: Math.max(...specsOf.map((l) => l.rate)),
    };
  });
  for (const limit of limits) {
    const bound: FuzzBound = {
      capacity: limit.capacity,
      ratePerSecond: limit.rate,
      aheadMs: store.maxAheadMs,
      ...(s.optimistic ? { optimistic: { instances: s.declared, credit: s.credit, spacingMs } } : {}),
    };
    for (let k = 0; k < KEYS; k++) {
      const key = `k${k}`;
      const worst = worstFuzzWindow(
        admitted.filter((a) => a.key === key),
        bound,
        store.credits.filter((c) => c.key === key),
        store.resets.filter((r) => r.key === key && r.limit === limit.name),
      );
      expect(worst.held, `${key}, ${limit.name}: ${JSON.stringify({ worst, bound })}`).toBe(true);
    }
  }
}

/**
 * Moves each admission a take gave from its caller's moment to the store's: the docs' proof counts
 * a take where the store ran it, and its reply only carries the news, up to a trip later. An
 * admission of the same key and cost at the moment the take was answered is the take's (any other
 * such admission is the same stamp).
 */
function atTheStore(admitted: { key: string; atMs: number; cost: number }[], takes: readonly Take[]): void {
  for (const t of takes) {
    const i = admitted.findIndex((a) => a.key === t.key && a.cost === t.cost && a.atMs === t.answeredAtMs);
    expect(i, `the admission of ${JSON.stringify(t)}`).toBeGreaterThanOrEqual(0);
    admitted[i] = { key: t.key, atMs: t.atMs, cost: t.cost };
  }
}
