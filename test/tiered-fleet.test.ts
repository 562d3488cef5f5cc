import {
  commandDelta,
  type FleetOrders,
  readCommandStats,
  runFleet,
  tokenBucketBound,
  uniquePrefix,
  worstWindow,
} from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';
import { STAMP_SLACK_MS } from './src/stamp-slack.js';

// The README's bound for leases on demand (`lease.ttlMs` given, so `sync: false`): over any window W
// the fleet admits at most capacity + rate × W, whatever the lease TTL.
const CAPACITY = 100;
const RATE = 200;
const TTL_MS = 1000;
const DURATION_MS = 3000;

const redis = redisForFile();

function orders(prefix: string, extra: Partial<FleetOrders> = {}): FleetOrders {
  return {
    url: redis.url,
    prefix,
    key: 'shared',
    tier: 'tiered',
    capacity: CAPACITY,
    refillPerSecond: RATE,
    instances: 4,
    durationMs: DURATION_MS,
    maxDecisions: 50_000_000,
    lease: { ttlMs: TTL_MS },
    ...extra,
  };
}

describe('TieredLimiter across processes on real Redis', () => {
  it('4 processes hammering one key: within the bound, ≥ 95 % of the ideal, few round trips', async () => {
    const admin = redis.client();
    const before = await readCommandStats(admin);
    const prefix = uniquePrefix('fleet');
    const reports = await runFleet([1, 2, 3, 4].map(() => orders(prefix)));
    const { roundTrips } = commandDelta(before, await readCommandStats(admin));

    const stamps = reports.flatMap((r) => r.admittedAt);
    const decisions = reports.reduce((sum, r) => sum + r.decisions, 0);
    const ideal = CAPACITY + (RATE * DURATION_MS) / 1000;
    const worst = worstWindow(stamps, tokenBucketBound(CAPACITY, RATE, STAMP_SLACK_MS));
    console.info(
      `fleet: admitted ${stamps.length} of ideal ${ideal} (${((100 * stamps.length) / ideal).toFixed(1)} %), ` +
        `${decisions} decisions, ${roundTrips} round trips (${((1000 * roundTrips) / decisions).toFixed(3)} per 1,000), ` +
        `worst window ${worst.admitted} admitted in ${worst.windowMs} ms (excess over bound ${worst.excess.toFixed(1)})`,
    );

    expect(worst.excess).toBeLessThanOrEqual(0);
    expect(stamps.length).toBeGreaterThanOrEqual(0.95 * ideal);
    expect(decisions).toBeGreaterThan(20 * stamps.length);
    expect(roundTrips / decisions).toBeLessThan(5 / 100);
  });

  it('uneven demand: the hot instance gets the capacity, the idle ones do not hoard it', async () => {
    const prefix = uniquePrefix('uneven');
    const idle = orders(prefix, { requestsPerSecond: 5 });
    const [hot, ...quiet] = await runFleet([orders(prefix), idle, idle, idle]);
    const quietAdmitted = quiet.reduce((sum, r) => sum + r.admittedAt.length, 0);
    const total = hot!.admittedAt.length + quietAdmitted;
    console.info(
      `uneven: hot admitted ${hot!.admittedAt.length}, idle admitted ${quiet.map((r) => r.admittedAt.length).join('/')}, ` +
        `idle leased ${quiet.map((r) => r.stats?.tokensLeased).join('/')} for ${quiet.map((r) => r.decisions).join('/')} requests`,
    );
    expect(hot!.admittedAt.length).toBeGreaterThanOrEqual(0.9 * total);
    expect(total).toBeGreaterThanOrEqual(0.95 * (CAPACITY + (RATE * DURATION_MS) / 1000));
    for (const r of quiet) {
      // An idle instance leases about what it spends: a few tokens of slack, not a batch.
      expect(r.stats?.tokensLeased as number).toBeLessThanOrEqual(r.admittedAt.length + 3);
    }
  });
});
