import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandDelta, parseCommandStats, readCommandStats } from './commandstats.js';
import { type FleetOrders, runFleet } from './fleet.js';
import { type RedisServer, startRedis } from './redis-server.js';
import { parseServerCpuSeconds, readServerCpuSeconds } from './server-cpu.js';
import { uniquePrefix } from './unique-prefix.js';
import {
  type Admission,
  mostInWindow,
  tokenBucketBound,
  WINDOW_EPSILON,
  type WindowBound,
  worstWindow,
} from './window-bound.js';

/** Every pair of admissions, as the check was written before: the reference. */
function bruteForce(admissions: readonly Admission[], bound: WindowBound): number {
  const sorted = admissions
    .map((a) => (typeof a === 'number' ? { atMs: a, cost: 1 } : a))
    .sort((a, b) => a.atMs - b.atMs);
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < sorted.length; i++) {
    let sum = 0;
    for (let j = i; j < sorted.length; j++) {
      sum += sorted[j]!.cost;
      worst = Math.max(worst, sum - bound(sorted[j]!.atMs - sorted[i]!.atMs));
    }
  }
  return worst;
}

const admission = fc.record({
  atMs: fc.integer({ min: 0, max: 3000 }),
  cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 5 }), fc.double({ min: 0, max: 3, noNaN: true })),
});

describe('worstWindow', () => {
  it('finds the same worst excess as every pair, for the pure bound and the lease bound', () => {
    fc.assert(
      fc.property(
        fc.array(admission, { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 500 }),
        fc.constantFrom(0, 100, 1000),
        (admissions, capacity, rate, leaseMs) => {
          const bound = tokenBucketBound(capacity, rate, leaseMs);
          const worst = worstWindow(admissions, bound);
          expect(worst.excess).toBeCloseTo(bruteForce(admissions, bound), 9);
          expect(worst.bound).toBeCloseTo(bound(worst.windowMs), 9);
          expect(worst.windowMs).toBe(worst.toMs - worst.fromMs);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('checks a bound with steps exactly when told the length of its affine pieces', () => {
    // The optimistic cold-start bound's shape: C + r·(W + L) + n·c·(1 + ⌊W/S⌋).
    fc.assert(
      fc.property(
        fc.array(admission, { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 50, max: 1500 }),
        (admissions, stepMs) => {
          const bound: WindowBound = (w) => 5 + (40 * (w + 100)) / 1000 + 3 * (1 + Math.floor(w / stepMs));
          const worst = worstWindow(admissions, bound, { pieceMs: stepMs });
          expect(worst.excess).toBeCloseTo(bruteForce(admissions, bound), 9);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('names the window and the numbers of a breach', () => {
    // 10 at t=0, 10 at t=100: 20 in 100 ms against 10 + 50/s × 0.1 s = 15.
    const stamps = [...Array(10).fill(0), ...Array(10).fill(100)];
    const worst = worstWindow(stamps, tokenBucketBound(10, 50));
    expect(worst).toEqual({
      admitted: 20,
      fromMs: 0,
      toMs: 100,
      windowMs: 100,
      bound: 15,
      excess: 5,
      held: false,
    });
    expect(worstWindow(stamps, tokenBucketBound(10, 100)).held).toBe(true);
  });

  it('holds a bound met to the last token, and nothing for no admissions', () => {
    const exact = Array.from({ length: 101 }, (_, i) => ({ atMs: i * 10, cost: i === 0 ? 5 : 1 }));
    const worst = worstWindow(exact, tokenBucketBound(5, 100));
    expect(worst.excess).toBeLessThanOrEqual(WINDOW_EPSILON);
    expect(worst.held).toBe(true);
    expect(worstWindow([], tokenBucketBound(3, 1))).toMatchObject({ admitted: 0, excess: -3, held: true });
  });

  it('refuses a bound that is not affine where it was told it is', () => {
    const stepped: WindowBound = (w) => 10 + Math.floor(w / 100);
    expect(() => worstWindow([0, 50, 150], stepped)).toThrow(/not affine .*pass pieceMs/);
    expect(() => worstWindow([0, 50, 150], stepped, { pieceMs: 100 })).not.toThrow();
    expect(() => worstWindow([0], tokenBucketBound(1, 1), { pieceMs: 0 })).toThrow(RangeError);
    expect(() => worstWindow([{ atMs: Number.NaN, cost: 1 }], tokenBucketBound(1, 1))).toThrow(RangeError);
  });

  it('checks 40,000 stamps in well under a second', () => {
    // 8 processes × 5 s at saturation: the size a multi-process test produces.
    const stamps = Array.from({ length: 40_000 }, (_, i) => Math.floor(i / 8));
    const started = performance.now();
    const worst = worstWindow(stamps, tokenBucketBound(100, 8000, 20), { pieceMs: 1000 });
    const elapsedMs = performance.now() - started;
    console.info(`worstWindow: 40,000 stamps, 5 pieces, ${elapsedMs.toFixed(1)} ms`);
    expect(worst.held).toBe(true);
  });
});

describe('mostInWindow', () => {
  it('is the most admitted in any closed window of the length', () => {
    fc.assert(
      fc.property(
        fc.array(admission, { maxLength: 60 }),
        fc.integer({ min: 0, max: 1000 }),
        (admissions, w) => {
          const flat = admissions.map((a) => ({ ...a }));
          let most = 0;
          for (const start of flat) {
            const inside = flat.filter((a) => a.atMs >= start.atMs && a.atMs <= start.atMs + w);
            most = Math.max(
              most,
              inside.reduce((s, a) => s + a.cost, 0),
            );
          }
          expect(mostInWindow(admissions, w).admitted).toBeCloseTo(most, 9);
        },
      ),
      { numRuns: 200 },
    );
  });
});

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(() => redis.stop());

describe('INFO commandstats', () => {
  it('parses Redis 7 lines, rejected calls counted as calls', () => {
    const info = [
      '# Commandstats',
      'cmdstat_evalsha:calls=10,usec=300,usec_per_call=30.00,rejected_calls=2,failed_calls=1',
      'cmdstat_client|setname:calls=1,usec=2,usec_per_call=2.00,rejected_calls=0,failed_calls=0',
      'cmdstat_hset:calls=7,usec=14,usec_per_call=2.00',
    ].join('\r\n');
    expect(parseCommandStats(info)).toEqual(
      new Map([
        ['evalsha', { calls: 12, usec: 300 }],
        ['client|setname', { calls: 1, usec: 2 }],
        ['hset', { calls: 7, usec: 14 }],
      ]),
    );
  });

  it('counts script calls as round trips and what runs inside them as commands, from a real server', async () => {
    const client = redis.client();
    const key = `kit-${process.pid}`;
    const before = await readCommandStats(client);
    for (let i = 0; i < 5; i++) {
      await client.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", 1, key, i);
    }
    await client.del(key);
    await client.ping();
    const delta = commandDelta(before, await readCommandStats(client));
    expect(delta.roundTrips).toBe(5);
    expect(delta.byCommand).toEqual({ eval: 5, set: 5, get: 5, del: 1 });
    expect(delta.commands).toBe(16);
    expect(delta.roundTripUsec).toBeGreaterThan(0);
  });
});

describe('INFO cpu', () => {
  it('adds user and system seconds of the whole server, not its children', () => {
    const info = [
      '# CPU',
      'used_cpu_sys:1.250000',
      'used_cpu_user:2.500000',
      'used_cpu_sys_children:7.000000',
      'used_cpu_user_children:9.000000',
      'used_cpu_sys_main_thread:1.000000',
      'used_cpu_user_main_thread:2.000000',
    ].join('\r\n');
    expect(parseServerCpuSeconds(info)).toBe(3.75);
  });

  it('names the field a reply lacks', () => {
    expect(() => parseServerCpuSeconds('# CPU\r\nused_cpu_user:1.0\r\n')).toThrow(/used_cpu_sys/);
  });

  it("counts a real server's work: 20,000 SETs cost it a millisecond at least", async () => {
    const client = redis.client();
    const key = `kit-cpu-${process.pid}`;
    const before = await readServerCpuSeconds(client);
    for (let round = 0; round < 20; round++) {
      const pipeline = client.pipeline();
      for (let i = 0; i < 1000; i++) pipeline.set(key, i);
      await pipeline.exec();
    }
    await client.del(key);
    expect((await readServerCpuSeconds(client)) - before).toBeGreaterThanOrEqual(0.001);
  });
});

describe('fleet worker (runFleet)', () => {
  // The loops end at 200 decisions, well within the duration; a generous store timeout, so that
  // a loaded machine's slow reply is not a policy decision.
  const orders = (extra: Partial<FleetOrders>): FleetOrders => ({
    url: redis.url,
    prefix: uniquePrefix('kit'),
    tier: 'request',
    capacity: 2,
    refillPerSecond: 1,
    instances: 2,
    durationMs: 10_000,
    maxDecisions: 200,
    ...extra,
    options: { timeoutMs: 1000, ...extra.options },
  });

  it('takes many keys in turn and reports admissions per key, every decision accounted for', async () => {
    const prefix = uniquePrefix('kit');
    const reports = await runFleet([
      orders({ prefix, keys: 3 }),
      orders({ prefix, keys: 3, tier: 'tiered' }),
    ]);
    for (const r of reports) {
      expect(r.decisions).toBe(200);
      expect(r.allowed + r.denied + r.fallback.allowed + r.fallback.denied).toBe(r.decisions);
      expect(r.admittedAtByKey).toHaveLength(3);
      expect(r.admittedAtByKey!.flat().sort()).toEqual([...r.admittedAt].sort());
      expect(r.loopDelayMs.max).toBeGreaterThanOrEqual(0);
      expect(r.stats).toBeTypeOf('object');
    }
    // Three keys of capacity 2 refilled 1/s, shared by both processes: each admits its burst, and
    // at most C + r·W over the span of its admissions, W widened by half a second for the time
    // between the key's first take and its first admission (a slow reply under load).
    const admitted = reports.reduce((sum, r) => sum + r.allowed, 0);
    expect(admitted).toBeGreaterThanOrEqual(6);
    for (let key = 0; key < 3; key++) {
      const stamps = reports.flatMap((r) => r.admittedAtByKey![key]!);
      const spanS = (Math.max(...stamps) - Math.min(...stamps)) / 1000;
      expect(stamps.length).toBeLessThanOrEqual(2 + Math.floor(spanS + 0.5));
    }
  });

  it('passes unknown limiter options through verbatim, and paces a loop when told a rate', async () => {
    // shadow: the limit decides but never enforces, so every decision admits.
    // 600 ms at 50 a second: about 30 decisions, where an unpaced loop would make its 200.
    const paced = { durationMs: 600, requestsPerSecond: 50 };
    const [shadow] = await runFleet([orders({ options: { shadow: true }, ...paced })]);
    expect(shadow!.decisions).toBeGreaterThan(5);
    expect(shadow!.decisions).toBeLessThanOrEqual(50);
    expect(shadow!.allowed).toBe(shadow!.decisions);
    const [enforced] = await runFleet([orders(paced)]);
    expect(enforced!.denied).toBeGreaterThan(0);
  });

  it('sends hotShare of the decisions to key 0, the rest in turn, over several hosted limiters', async () => {
    const [report] = await runFleet([
      orders({ keys: 5, hotShare: 0.5, limiters: 3, capacity: 1000, refillPerSecond: 1000 }),
    ]);
    // Nothing is denied at this limit: the admissions per key are the decisions per key.
    const perKey = report!.admittedAtByKey!.map((stamps) => stamps.length);
    expect(perKey[0]).toBe(100);
    expect(perKey.slice(1)).toEqual([25, 25, 25, 25]);
    expect(report!.limiterStats).toHaveLength(3);
    const requests = report!.limiterStats.map(
      (s) => (s as { decisions: { global: number } }).decisions.global,
    );
    expect(requests.reduce((a, b) => a + b, 0)).toBe(200);
    expect(report!.storeStats!.calls).toBeGreaterThan(0);
    expect(report!.storeStats!.ops).toBeGreaterThanOrEqual(report!.storeStats!.calls);
  });
});
