// Optimistic cold start's bound, C + r·W + N·c·(1 + ⌊W/S⌋) (`sync: false`, so no `r·T`), across
// what the accuracy fuzz leaves out: an instance's own outages while credit is outstanding (the
// charge refused by the breaker, or failed and counted lost), with evictions from tiny tables,
// restarts and setLimits of the whole fleet between two limits within the rule. Admissions by the
// failure policy (`open`, tier `fallback`) are the outage's, outside the bound, as README says.
import {
  type BucketOp,
  type BucketReply,
  type Decision,
  defineLimit,
  type GlobalStore,
  type LimitSpec,
} from '@tiered-limiter/core';
import { MemoryStore, TieredLimiter } from '@tiered-limiter/local';
import { FakeClock, optimisticBound, worstWindow } from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { FaultyView } from './faulty-view.js';
import { settle } from './lease-properties.js';

const KEYS = 3;

/** One limiter's way to its instance's view, counting the debits (optimistic charges) that landed. */
class LandedDebits implements GlobalStore {
  landed = 0;
  readonly #view: FaultyView;

  constructor(view: FaultyView) {
    this.#view = view;
  }

  async apply(op: BucketOp): Promise<BucketReply> {
    const reply = await this.#view.apply(op);
    this.landed += op.debit ?? 0;
    return reply;
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#view.reset(key, limits);
  }
}

/** What the runs went through (printed with `FUZZ_STATS=1`), so that a rare path is seen to be reached. */
const coverage = new Map<string, number>();
const tally = (what: string) => coverage.set(what, (coverage.get(what) ?? 0) + 1);

const event = fc.oneof(
  fc.record({
    kind: fc.constant('burst' as const),
    instance: fc.nat(),
    key: fc.nat(),
    cost: fc.integer({ min: 1, max: 4 }),
    n: fc.integer({ min: 1, max: 60 }),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 400 }) }),
  fc.record({ kind: fc.constant('fault' as const), instance: fc.nat(), on: fc.boolean() }),
  fc.record({ kind: fc.constant('setLimits' as const), which: fc.integer({ min: 0, max: 1 }) }),
  fc.record({ kind: fc.constant('restart' as const), instance: fc.nat() }),
);

const setup = fc.record({
  instances: fc.integer({ min: 2, max: 4 }),
  credit: fc.integer({ min: 1, max: 3 }),
  extra: fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 40 })),
  rates: fc.tuple(fc.integer({ min: 5, max: 60 }), fc.integer({ min: 5, max: 60 })),
  ttlMs: fc.integer({ min: 50, max: 400 }),
  maxKeys: fc.constantFrom(1, 2, 100),
  events: fc.array(event, { minLength: 10, maxLength: 60 }),
});

describe('optimistic cold start through outages, evictions, restarts and new limits', () => {
  it('no window of any key admits more than C + r·W + N·c·(1 + ⌊W/S⌋) outside the failure policy', {
    timeout: 240_000,
  }, async () => {
    await fc.assert(
      fc.asyncProperty(setup, async (s) => {
        vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
        try {
          await run(s);
        } finally {
          vi.useRealTimers();
        }
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 40) },
    );
    if (process.env.FUZZ_STATS) console.log(Object.fromEntries(coverage));
  });
});

async function run(s: typeof setup extends fc.Arbitrary<infer T> ? T : never): Promise<void> {
  const { instances: n, credit } = s;
  // The rule: N·c ≤ 0.1·C for both limits, spacing ≥ max(L, N·c ÷ r) for both (one spacing given).
  const specs = [0, 1].map((i) =>
    defineLimit({ name: 'L', capacity: 10 * n * credit + s.extra[i]!, refillPerSecond: s.rates[i]! }),
  );
  const spacingMs = Math.max(
    s.ttlMs,
    ...specs.map((l) => Math.ceil((n * credit * 1000) / l.refillPerSecond)),
  );
  const clock = new FakeClock(0);
  const shared = new MemoryStore({ clock });
  const views = Array.from({ length: n }, () => new FaultyView(shared));
  let inForce = 0;
  const made: { limiter: TieredLimiter; store: LandedDebits }[] = [];
  const make = (i: number) => {
    const store = new LandedDebits(views[i]!);
    const limiter = new TieredLimiter({
      store,
      clock,
      limits: specs[inForce]!,
      sync: false,
      lease: { ttlMs: s.ttlMs },
      instances: n,
      maxKeys: s.maxKeys,
      failurePolicy: 'open',
      breaker: { failureThreshold: 2, cooldownMs: 50 },
      coldStart: { mode: 'optimistic', credit, spacingMs },
    });
    made.push({ limiter, store });
    return limiter;
  };
  const fleet = views.map((_, i) => make(i));
  const admitted: { key: string; atMs: number; cost: number }[] = [];
  const pending: Promise<unknown>[] = [];
  const closing: Promise<void>[] = [];
  const decided = (key: string, d: Decision, cost: number) => {
    if (process.env.FUZZ_STATS) tally(`${d.allowed ? 'admitted' : 'denied'} ${d.tier}`);
    if (d.allowed && d.tier !== 'fallback') admitted.push({ key, atMs: clock.now(), cost });
  };
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= 5) {
      const step = Math.min(5, left);
      clock.advance(step);
      await vi.advanceTimersByTimeAsync(step);
    }
    await settle();
  };
  // A spacing in, every instance may give credit.
  await advance(spacingMs);
  for (const e of s.events) {
    switch (e.kind) {
      case 'burst': {
        const l = fleet[e.instance % n]!;
        const key = `k${e.key % KEYS}`;
        const cost = Math.min(e.cost, credit + 1);
        for (let i = 0; i < e.n; i++) {
          const d = l.tryConsume(key, cost);
          if (d !== undefined) decided(key, d, cost);
          else pending.push(l.consume(key, cost).then((d) => decided(key, d, cost)));
          // Another key now and then: with a table of 1 or 2 it evicts this one, whose next
          // request starts cold again.
          if (i % 7 === 3) {
            const other = `k${(e.key + 1 + i) % KEYS}`;
            const o = l.tryConsume(other);
            if (o !== undefined) decided(other, o, 1);
            else pending.push(l.consume(other).then((d) => decided(other, d, 1)));
          }
          if (i % 3 === 0) await settle();
        }
        await settle();
        break;
      }
      case 'advance':
        await advance(e.ms);
        break;
      case 'fault':
        views[(e as { instance: number }).instance % n]!.fault = e.on
          ? { mode: 'reject', lateMs: 0 }
          : undefined;
        await settle();
        break;
      case 'setLimits':
        inForce = e.which;
        for (const l of fleet) l.setLimits(specs[inForce]!);
        await settle();
        break;
      case 'restart': {
        const i = e.instance % n;
        closing.push(fleet[i]!.close());
        fleet[i] = make(i);
        await settle();
        break;
      }
    }
  }
  for (const view of views) view.fault = undefined;
  await advance(3_000);
  await Promise.all(pending);
  closing.push(...fleet.map((l) => l.close()));
  await advance(2_000);
  await Promise.all(closing);

  if (process.env.FUZZ_STATS) {
    tally('runs');
    if (fleet.some((l) => l.stats().tokensUnreported > 0)) tally('runs with tokens lost');
  }
  // Every credit was charged once or counted lost (its call failed), never sent twice. Lost counts
  // failed spends and hand-backs too, so it is a floor there.
  for (const { limiter, store } of made) {
    const { tokensOptimistic, tokensUnreported } = limiter.stats();
    expect(store.landed).toBeLessThanOrEqual(tokensOptimistic);
    expect(store.landed + tokensUnreported).toBeGreaterThanOrEqual(tokensOptimistic);
  }
  const bound = optimisticBound(Math.max(...specs.map((l) => l.capacity)), Math.max(...s.rates), {
    instances: n,
    credit,
    spacingMs,
  });
  for (let k = 0; k < KEYS; k++) {
    const key = `k${k}`;
    const worst = worstWindow(
      admitted.filter((a) => a.key === key),
      bound,
      { pieceMs: spacingMs },
    );
    expect(worst.held, `${key}: ${JSON.stringify({ worst, spacingMs, specs })}`).toBe(true);
  }
}
