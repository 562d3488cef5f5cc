/**
 * The outage fuzz (docs/DECISIONS.md, 2026-12-05): a fleet of `TieredLimiter`s and
 * `RequestLimiter`s on one store that each instance can lose on its own, in four ways: calls
 * refused at once, calls that never answer, calls whose op runs at once but whose answer comes past
 * the timeout, and calls whose op reaches the store only after the caller gave up. Driven through
 * bursts, hammering, `acquire`, rewards, penalties, resets, restarts and quiet stretches under one failure policy
 * (`open`, `closed` or `local`), it checks what the README promises for an outage: nothing throws;
 * every decision comes within the timeout (an `acquire` within its patience plus the timeout); the
 * store's own admissions keep the accuracy bound, and `closed` admits nothing more; `local` admits
 * no more than its fallback bucket per instance; every policy decision is counted and its failure
 * reported; and once the store is back, every instance is back on it by itself.
 */
import { type Decision, defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import { MemoryStore, RequestLimiter, TieredLimiter, type TieredLimiterOptions } from '@tiered-limiter/local';
import fc from 'fast-check';
import { expect, vi } from 'vitest';
import { onFakeTime } from './accuracy-fuzz.js';
import { DelayedStore } from './delayed-store.js';
import { type Fault, FaultyView } from './faulty-view.js';
import { worstFuzzWindow } from './fuzz-bound.js';
import { settle } from './lease-properties.js';

const KEYS = 3;

/** What the runs exercised, counted when FUZZ_STATS is set (`outageCoverage`). */
const coverage = new Map<string, number>();

/** What the runs so far exercised (with FUZZ_STATS set): decisions by tier and policy, faults by mode. */
export function outageCoverage(): Record<string, number> {
  return Object.fromEntries([...coverage].sort());
}

function tally(what: string): void {
  if (process.env.FUZZ_STATS) coverage.set(what, (coverage.get(what) ?? 0) + 1);
}

/** One run's settings. */
export interface OutageSetup {
  /** Per instance: a two-tier limiter (true) or a per-request one. */
  readonly tiered: readonly boolean[];
  readonly policy: FailurePolicy;
  readonly sync: number | false;
  readonly capacity: number;
  readonly rate: number;
  /** The `local` policy's bucket per instance. */
  readonly fallback: { readonly capacity: number; readonly rate: number };
  readonly timeoutMs: number;
  readonly breaker: { readonly failureThreshold: number; readonly cooldownMs: number } | false;
}

/** One step: requests, a wait, or a change of one instance's (or every instance's) way to the store. */
export interface OutageEvent {
  readonly kind:
    | 'burst'
    | 'hammer'
    | 'wait'
    | 'fault'
    | 'heal'
    | 'acquire'
    | 'reward'
    | 'penalty'
    | 'reset'
    | 'restart';
  readonly instance: number;
  readonly all: boolean;
  readonly key: number;
  readonly n: number;
  readonly ms: number;
  readonly fault: Fault;
}

const outageSetup: fc.Arbitrary<OutageSetup> = fc.record({
  tiered: fc.array(fc.boolean(), { minLength: 2, maxLength: 3 }),
  policy: fc.constantFrom<FailurePolicy>('open', 'closed', 'local'),
  sync: fc.oneof(fc.constant(false as const), fc.integer({ min: 10, max: 400 })),
  capacity: fc.integer({ min: 3, max: 30 }),
  rate: fc.integer({ min: 5, max: 300 }),
  fallback: fc.record({ capacity: fc.integer({ min: 1, max: 10 }), rate: fc.integer({ min: 1, max: 100 }) }),
  timeoutMs: fc.integer({ min: 5, max: 80 }),
  breaker: fc.oneof(
    fc.constant(false as const),
    fc.record({
      failureThreshold: fc.integer({ min: 1, max: 5 }),
      cooldownMs: fc.integer({ min: 20, max: 500 }),
    }),
  ),
});

const outageEvent: fc.Arbitrary<OutageEvent> = fc.record({
  kind: fc.oneof(
    { weight: 6, arbitrary: fc.constant('burst' as const) },
    { weight: 5, arbitrary: fc.constant('hammer' as const) },
    { weight: 4, arbitrary: fc.constant('wait' as const) },
    { weight: 4, arbitrary: fc.constant('fault' as const) },
    { weight: 3, arbitrary: fc.constant('heal' as const) },
    { weight: 2, arbitrary: fc.constant('acquire' as const) },
    { weight: 1, arbitrary: fc.constant('reward' as const) },
    { weight: 1, arbitrary: fc.constant('penalty' as const) },
    { weight: 1, arbitrary: fc.constant('reset' as const) },
    { weight: 1, arbitrary: fc.constant('restart' as const) },
  ),
  instance: fc.integer({ min: 0, max: 2 }),
  all: fc.boolean(),
  key: fc.integer({ min: 0, max: KEYS - 1 }),
  n: fc.integer({ min: 1, max: 30 }),
  ms: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 31, max: 1500 })),
  fault: fc.record({
    mode: fc.constantFrom('reject' as const, 'hang' as const, 'lateAnswer' as const, 'lateArrival' as const),
    // Past any timeout the run draws: the caller has given up when the answer (or the op) lands.
    lateMs: fc.integer({ min: 81, max: 2000 }),
  }),
});

/** The property: any fleet, policy and schedule of outages keeps every promise of the README's outage section. */
export function outageFuzzProperty(maxEvents = 30) {
  return fc.asyncProperty(
    outageSetup,
    fc.array(outageEvent, { minLength: 1, maxLength: maxEvents, size: 'max' }),
    runOutageFuzz,
  );
}

/** Plays `events` on a fleet made by `s`, then checks the promises; fake timers on for the run only. */
export function runOutageFuzz(s: OutageSetup, events: readonly OutageEvent[]): Promise<void> {
  return onFakeTime(() => play(s, events));
}

type Limiter = TieredLimiter | RequestLimiter;

/** What one limiter did: its policy decisions, its fallback admissions' moments, its failures reported. */
interface Ledger {
  byPolicy: number;
  /** Whether an `acquire` ran here: its tries are decisions too, counted in stats but not seen here. */
  acquired: boolean;
  failuresReported: number;
  readonly fallbackAdmitted: { key: string; atMs: number; cost: number }[];
}

async function play(s: OutageSetup, events: readonly OutageEvent[]): Promise<void> {
  const clock = { now: () => performance.now() };
  const shared = new DelayedStore(new MemoryStore({ clock }), clock, () => [0, 0] as const);
  const limit = defineLimit({ name: 'L', capacity: s.capacity, refillPerSecond: s.rate });
  const fallbackLimit = defineLimit({
    name: 'L',
    capacity: s.fallback.capacity,
    refillPerSecond: s.fallback.rate,
  });
  const views = s.tiered.map(() => new FaultyView(shared));
  const ledgers = new Map<Limiter, Ledger>();
  const make = (i: number): Limiter => {
    const common = {
      store: views[i]!,
      limits: limit,
      failurePolicy: s.policy,
      ...(s.policy === 'local' ? { fallback: { limits: [fallbackLimit] } } : {}),
      clock,
      timeoutMs: s.timeoutMs,
      breaker: s.breaker,
    };
    const limiter = s.tiered[i]
      ? new TieredLimiter({
          ...common,
          instances: s.tiered.length,
          ...(s.sync === false ? { sync: false } : { sync: { fleetCallsPerSecond: s.sync } }),
        } as TieredLimiterOptions)
      : new RequestLimiter(common);
    const ledger: Ledger = { byPolicy: 0, acquired: false, failuresReported: 0, fallbackAdmitted: [] };
    limiter.on('failure', () => ledger.failuresReported++);
    ledgers.set(limiter, ledger);
    return limiter;
  };
  const fleet = s.tiered.map((_, i) => make(i));
  const pending: Promise<unknown>[] = [];
  const closing: Promise<void>[] = [];
  /** Admissions the store made (any tier but `fallback`), at their caller's moment. */
  const admitted: { key: string; atMs: number; cost: number }[] = [];
  const late: string[] = [];

  const decided = (l: Limiter, key: string, d: Decision, startedAt: number, patienceMs: number) => {
    const tookMs = clock.now() - startedAt;
    // Fake timers run to the ms; the drive advances in steps of 5.
    if (tookMs > patienceMs + s.timeoutMs + 5) late.push(`${key}: ${tookMs} ms (${d.tier}, ${d.policy})`);
    const ledger = ledgers.get(l)!;
    tally(`${l instanceof TieredLimiter ? 'tiered' : 'request'} ${d.tier} ${d.policy ?? ''} ${d.allowed}`);
    if (d.tier === 'fallback') {
      ledger.byPolicy++;
      expect(d.policy).toBe(s.policy);
      expect(d.error).toBeDefined();
      if (s.policy === 'closed') expect(d.allowed).toBe(false);
      if (d.allowed) ledger.fallbackAdmitted.push({ key, atMs: clock.now(), cost: 1 });
      return;
    }
    if (d.allowed) admitted.push({ key, atMs: clock.now(), cost: 1 });
  };
  const request = (l: Limiter, key: string) => {
    const startedAt = clock.now();
    const now = l instanceof TieredLimiter ? l.tryConsume(key) : undefined;
    if (now !== undefined) return decided(l, key, now, startedAt, 0);
    pending.push(l.consume(key).then((d) => decided(l, key, d, startedAt, 0)));
  };
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= 5) await vi.advanceTimersByTimeAsync(Math.min(5, left));
    await settle();
  };
  const affected = (e: OutageEvent) => (e.all ? views : [views[e.instance % views.length]!]);

  for (const e of events) {
    const i = e.instance % fleet.length;
    const l = fleet[i]!;
    const key = `k${e.key}`;
    switch (e.kind) {
      case 'burst':
        for (let j = 0; j < e.n; j++) request(l, key);
        await settle();
        break;
      case 'hammer':
        for (let t = 0; t < Math.min(e.ms, 400); t += 2) {
          for (const m of fleet) request(m, key);
          await advance(2);
        }
        break;
      case 'wait':
        await advance(e.ms);
        break;
      case 'fault':
        tally(`fault ${e.fault.mode}`);
        for (const v of affected(e)) v.fault = e.fault;
        break;
      case 'heal':
        for (const v of affected(e)) v.fault = undefined;
        break;
      case 'acquire': {
        const startedAt = clock.now();
        const maxWaitMs = Math.min(e.ms, 500);
        if (!(l instanceof TieredLimiter)) break;
        ledgers.get(l)!.acquired = true;
        pending.push(
          l.acquire(key, 1, { maxWaitMs }).then((r) => {
            if (r.acquired) decided(l, key, r.decision!, startedAt, maxWaitMs);
            else {
              expect(clock.now() - startedAt).toBeLessThanOrEqual(maxWaitMs + s.timeoutMs + 5);
              if (r.decision?.tier === 'fallback') expect(r.decision.policy).toBe(s.policy);
            }
          }),
        );
        await settle();
        break;
      }
      case 'reward':
        // Whether it landed or not, a reward resolves: a landed one is a credit the bound adds.
        pending.push(l.reward(key, Math.min(e.n, 3)).then((landed) => expect(typeof landed).toBe('boolean')));
        await settle();
        break;
      case 'penalty':
        pending.push(
          l.penalty(key, Math.min(e.n, 3)).then((landed) => expect(typeof landed).toBe('boolean')),
        );
        await settle();
        break;
      case 'reset':
        // A reset that fails leaves the key to the policy here (README); one that lands is a lift the bound adds.
        pending.push(l.reset(key).then((landed) => expect(typeof landed).toBe('boolean')));
        await settle();
        break;
      case 'restart':
        closing.push(l.close());
        fleet[i] = make(i);
        await settle();
        break;
    }
  }

  // The store comes back for everyone: every instance finds it again by itself.
  for (const v of views) v.fault = undefined;
  await advance(2_500);
  await Promise.all(pending);
  for (const [j, m] of fleet.entries()) {
    // A breaker left open by the last failure probes with the next request, past its cooldown.
    const d = await m.consume(`fresh-${j}`);
    expect(d.tier, `instance ${j}'s first decision after the outage`).not.toBe('fallback');
    expect(m.degraded, `instance ${j} still degraded after a decision by the store`).toBe(false);
  }
  closing.push(...fleet.map((m) => m.close()));
  await advance(2_500);
  await Promise.all(closing);

  expect(late).toEqual([]);
  for (const [m, ledger] of ledgers) {
    // Every policy decision counted, and none without a failure reported.
    const counted = m.stats().decisions.fallback;
    if (ledger.acquired) expect(counted).toBeGreaterThanOrEqual(ledger.byPolicy);
    else expect(counted).toBe(ledger.byPolicy);
    if (counted > 0) expect(ledger.failuresReported).toBeGreaterThan(0);
    if (s.policy === 'local') {
      const bound = { capacity: s.fallback.capacity, ratePerSecond: s.fallback.rate, aheadMs: 0 };
      for (let k = 0; k < KEYS; k++) {
        const own = ledger.fallbackAdmitted.filter((a) => a.key === `k${k}`);
        const worst = worstFuzzWindow(own, bound, [], []);
        expect(worst.held, `fallback, k${k}: ${JSON.stringify(worst)}`).toBe(true);
      }
    }
  }
  // A late answer lands after its caller gave up, and a late op runs after it: the bound counts
  // what the store admitted, and a lease that landed late may be spent until its lifetime ends.
  // The shadow of the books, which tells what a reset found, is the store's twin.
  expect(shared.mismatches).toEqual([]);
  const bound = { capacity: s.capacity, ratePerSecond: s.rate, aheadMs: shared.maxAheadMs };
  for (let k = 0; k < KEYS; k++) {
    const key = `k${k}`;
    const worst = worstFuzzWindow(
      admitted.filter((a) => a.key === key),
      bound,
      shared.credits.filter((c) => c.key === key),
      shared.resets.filter((r) => r.key === key),
    );
    expect(worst.held, `${key}: ${JSON.stringify({ worst, bound })}`).toBe(true);
  }
}
