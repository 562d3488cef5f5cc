import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// `pnpm bench --quick` as CI runs it: it must finish and produce every row with finite numbers,
// and every row must account for each decision (allowed, denied by the limit, or the policy's).
// Speeds are never asserted: on a shared CI machine they mean nothing.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BENCH = join(ROOT, 'bench');
const run = promisify(execFile);

const MICRO = [
  'baseline · no limiter',
  'baseline · performance.now()',
  'core · bucket step (tryTake, clock as argument) · ceiling',
  'LocalLimiter · 1 hot key · ceiling',
  'LocalLimiter · 1 hot key · 100 at 10/s',
  'LocalLimiter · 100k keys · ceiling',
  'RateLimiterMemory · 1 hot key · ceiling',
  'RateLimiterMemory · 1 hot key · 100 at 10/s',
  'TieredLimiter · lease hit (MemoryStore) · ceiling',
  'keys · bucketKeys · plain key',
  'keys · bucketKeys · escaped key',
  'keys · bucketKeys · hashed key (200 chars)',
];
const LIMITERS = ['RedisStore.take', 'RequestLimiter', 'TieredLimiter', 'RateLimiterRedis'];
const SCENARIOS = [
  ...['100 at 10/s', '100 at 200/s'].flatMap((l) => [`1 hot key · ${l}`, `1 hot key · ${l} · 64 in flight`]),
  '100k keys · 1 per 10 s · 64 in flight',
  ...['', ' · 64 in flight', ' · 256 in flight'].map((f) => `1 hot key · ceiling${f}`),
  '100k keys · ceiling · 64 in flight',
];
const ON_REDIS = [
  ...SCENARIOS.flatMap((s) => LIMITERS.map((l) => `${l} · ${s}`)),
  'baseline · no limiter · 1 hot key · ceiling',
  'baseline · no limiter · 1 hot key · ceiling · 64 in flight',
];
const ACCURACY = [
  'RequestLimiter · 1 hot key',
  'TieredLimiter · 1 hot key',
  'TieredLimiter (optimistic) · 1 hot key',
  'TieredLimiter (sync: false) · 1 hot key',
  'TieredLimiter · hot key + 50 keys',
  'TieredLimiter (optimistic) · hot key + 50 keys',
  'RateLimiterRedis · 1 hot key',
].map((l) => `${l}, 4 processes`);
const FLEET = [10, 50, 200].flatMap((n) =>
  ['RequestLimiter', 'TieredLimiter'].map((l) => `${l} · fleet of ${n} instances`),
);
const MANY = ['TieredLimiter', 'TieredLimiter (optimistic)', 'RequestLimiter', 'RateLimiterRedis'];
// Keys in turn at 64 in flight add the two-tier limiter told more instances than run.
const TOLD_MORE = 'TieredLimiter (told 4 instances)';
// Each scenario ends with its ceiling: `LocalLimiter` alone, in process, no store.
const IN_PROCESS = 'LocalLimiter (in process, not shared)';
const KEYS = ['100k keys Zipf', '100k keys'].flatMap((k) =>
  [64, 256].flatMap((n) =>
    [...(k === '100k keys' && n === 64 ? [MANY[0]!, TOLD_MORE, ...MANY.slice(1)] : MANY), IN_PROCESS].map(
      (l) => `${l} · ${k} · 100 at 10/s · ${n} in flight`,
    ),
  ),
);
const COLD = MANY.map((l) => `${l} · cold key`);
// The sharded row runs on the Cluster alone (on one server shards change nothing but key names).
const CLUSTER = (
  [
    ['1 master', ['TieredLimiter', 'RequestLimiter', 'RateLimiterRedis']],
    [
      '3-master Cluster',
      ['TieredLimiter', 'TieredLimiter (shards 12)', 'RequestLimiter', 'RateLimiterRedis'],
    ],
  ] as const
).flatMap(([t, limiters]) => limiters.map((l) => `${l} · 100k keys · 100 at 10/s · 256 in flight · ${t}`));
const LOAD = MANY.map((l) => `${l} · 100k keys Zipf · 100 at 10/s · 25,000/s`);
const IDLE = 'other client · idle (nothing of the bench running)';
const BUSY = 'other client · every core busy (spinning processes, no Redis traffic)';

type Row = Record<string, unknown> & { name: string };
interface Policy {
  allowed: number;
  denied: number;
}
interface Results {
  quick: boolean;
  machine: { cpus: number; node: string };
  redis: { version: string };
  versions: Record<string, string>;
  headline: string[];
  rows: {
    micro: Row[];
    neighbours: Row[];
    throughput: Row[];
    keys: Row[];
    cold: Row[];
    cluster: Row[];
    load: Row[];
    accuracy: Row[];
    fleet: Row[];
  };
}

const finite = (value: unknown) => typeof value === 'number' && Number.isFinite(value);
const policyTotal = (row: Row) => {
  const policy = row.policy as Policy | null;
  return policy === null ? 0 : policy.allowed + policy.denied;
};

let out: string;
let results: Results;

beforeAll(async () => {
  for (const pkg of ['core', 'local', 'redis']) {
    if (!existsSync(join(ROOT, 'packages', pkg, 'dist', 'index.js'))) {
      throw new Error(
        `packages/${pkg}/dist is missing: run \`pnpm build\` before this test (the bench loads dist)`,
      );
    }
  }
  out = mkdtempSync(join(tmpdir(), 'tl-bench-smoke-'));
  const { stdout } = await run(
    process.execPath,
    // 4 processes in the accuracy rows, not 8: this checks the rows, on a CI machine shared with the suite.
    ['--import', 'tsx', 'src/main.ts', '--quick', '--json', '--out', out, '--processes', '4'],
    { cwd: BENCH, timeout: 290_000, maxBuffer: 64 * 1024 * 1024 },
  );
  results = JSON.parse(stdout) as Results;
}, 300_000);

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

/** Each of `fields` of `object` (a row, or a part of it named `part`) is a finite number. */
function expectFinite(name: string, object: Record<string, unknown>, fields: readonly string[], part = '') {
  for (const field of fields)
    expect(finite(object[field]), `${name}: ${part}${field} = ${object[field]}`).toBe(true);
}

/**
 * Every decision of a row is admitted, denied, or the failure policy's, and health was measured
 * (by the probe, unless `probed` is false: a Cluster row has no probe).
 */
function expectAccounted(row: Row, probed = true) {
  const sum = (row.allowed as number) + (row.denied as number) + policyTotal(row);
  expect(sum, `${row.name}: allowed + denied + policy`).toBe(row.decisions);
  expect(row.decisions as number, row.name).toBeGreaterThan(0);
  const health = row.health as Record<string, unknown>;
  expectFinite(row.name, health, ['loopDelayP99Ms', 'loopDelayMaxMs'], 'health.');
  if (!probed) {
    expect(health.probe, `${row.name}: no probe`).toBeNull();
    return;
  }
  expect(typeof health.redisHealthy, `${row.name}: health.redisHealthy`).toBe('boolean');
  const probe = health.probe as Record<string, unknown>;
  expect(probe.sent as number, `${row.name}: the probe PINGed`).toBeGreaterThan(0);
  expect(probe.slow as number, `${row.name}: the probe counted its slow PINGs`).toBeGreaterThanOrEqual(0);
  expectFinite(row.name, probe, ['p50Ms', 'p99Ms', 'maxMs'], 'health.probe.');
}

describe('pnpm bench --quick', () => {
  it('says what it ran on', () => {
    expect(results.quick).toBe(true);
    expect(results.machine.cpus).toBeGreaterThan(0);
    expect(results.redis.version).toMatch(/^\d+\.\d+/);
    expect(results.versions['rate-limiter-flexible']).toMatch(/^\d+\./);
    expect(results.versions.tinybench).toMatch(/^\d+\./);
  });

  it('times every in-process task with tinybench, and counts what the limiters decided', () => {
    const byName = new Map(results.rows.micro.map((row) => [row.name, row]));
    expect([...byName.keys()]).toEqual(MICRO);
    for (const [name, row] of byName) {
      expectFinite(name, row, ['nsPerOp', 'p99NsPerOp', 'opsPerSecond', 'clockReads']);
      const decides = /Limiter|RateLimiterMemory/.test(name);
      expect(finite(row.allowed), `${name}: allowed`).toBe(decides);
    }
    expect(byName.get('LocalLimiter · 1 hot key · ceiling')!.denied).toBe(0);
    expect(byName.get('LocalLimiter · 1 hot key · 100 at 10/s')!.denied as number).toBeGreaterThan(0);
    const hit = byName.get('TieredLimiter · lease hit (MemoryStore) · ceiling')!;
    expect(finite(hit.timesPeer)).toBe(true);
    // The row times the hit path: a miss (the lease ran dry) would time the way to the promise.
    expect(hit.misses as number).toBeLessThanOrEqual(
      0.01 * ((hit.allowed as number) + (hit.misses as number)),
    );
  });

  it('produces every Redis row, accounting for every decision, at limits that bite and at the ceiling', () => {
    const byName = new Map(results.rows.throughput.map((row) => [row.name, row]));
    expect([...byName.keys()].sort()).toEqual([...ON_REDIS].sort());
    for (const [name, row] of byName) {
      expectFinite(name, row, ['opsPerSecond', 'p50Ns', 'p99Ns', 'roundTripsPer1000']);
      expectAccounted(row);
      const silent = name.startsWith('RateLimiterRedis') || name.startsWith('baseline');
      expect(row.policy === null, `${name}: policy shown`).toBe(silent);
      if (!name.startsWith('baseline')) expect(finite(row.timesPeer), `${name}: timesPeer`).toBe(true);
      if (name.includes('ceiling')) expect(row.denied, `${name}: the ceiling never denies`).toBe(0);
      // A burst of 100, then 10 or 200 a second: over 256 or more decisions of a hot key, some are denied.
      if (name.includes('1 hot key · 100 at')) expect(row.denied as number, name).toBeGreaterThan(0);
    }
  });

  it('produces every accuracy row, its policy decisions apart and the bound of its mode checked', () => {
    expect(results.rows.accuracy.map((row) => row.name)).toEqual(ACCURACY);
    for (const row of results.rows.accuracy) {
      expectAccounted(row);
      expectFinite(row.name, row, ['ideal', 'hotAllowed', 'allowedOfIdeal', 'roundTripsPer1000']);
      if (row.limiter === 'RateLimiterRedis') continue;
      // Leases with the periodic sync borrow one period of refill (r·T); on demand and per
      // request nothing is borrowed and the bound is the pure one.
      const limiter = String(row.limiter);
      const rule = limiter.includes('optimistic')
        ? /^C \+ r·W \+ r·\d+ ms \+ N·c/
        : limiter === 'TieredLimiter'
          ? /^C \+ r·W \+ r·\d+ ms$/
          : /^C \+ r·W$/;
      expect(row.boundRule, row.name).toMatch(rule);
      const window = row.window as Record<string, unknown>;
      expectFinite(
        row.name,
        window,
        ['admitted', 'windowMs', 'bound', 'excess', 'maxIn1s', 'boundFor1s'],
        'window.',
      );
    }
  });

  it('produces the many-keys rows: Redis calls, server µs and CPU, key-ops per call, the hottest keys checked', () => {
    expect(results.rows.keys.map((row) => row.name)).toEqual(KEYS);
    for (const row of results.rows.keys) {
      expectAccounted(row);
      expectFinite(row.name, row, [
        'opsPerSecond',
        'roundTripsPer1000',
        'redisUsPerDecision',
        'redisCpuUsPerDecision',
        'timesPeer',
      ]);
      const peer = row.limiter === 'RateLimiterRedis';
      const storeless = peer || row.limiter === IN_PROCESS;
      expect(finite(row.keyOpsPerCall), `${row.name}: keyOpsPerCall`).toBe(!storeless);
      expect(row.window === null, `${row.name}: window`).toBe(peer);
    }
    // Zipf's hottest keys are at their limit: the rows deny.
    for (const row of results.rows.keys.filter((r) => r.keySet === 'zipf'))
      expect(row.denied as number, row.name).toBeGreaterThan(0);
  });

  it('produces the cold-key rows, the optimistic one answering in process', () => {
    expect(results.rows.cold.map((row) => row.name)).toEqual(COLD);
    for (const row of results.rows.cold) {
      expectAccounted(row);
      expectFinite(row.name, row, ['p50Ns', 'p99Ns', 'maxNs', 'timesPeerP50']);
    }
    const optimistic = results.rows.cold.find((r) => r.limiter === 'TieredLimiter (optimistic)')!;
    expect(optimistic.synchronous as number).toBeGreaterThan(0);
  });

  it('produces the Cluster rows beside the same rows on one server', () => {
    expect(results.rows.cluster.map((row) => row.name)).toEqual(CLUSTER);
    for (const row of results.rows.cluster) {
      expectAccounted(row, row.topology !== 'cluster');
      expectFinite(row.name, row, [
        'opsPerSecond',
        'roundTripsPer1000',
        'redisCpuUsPerDecision',
        'timesOneMaster',
        'timesPeer',
      ]);
    }
  });

  it('produces the fixed-load rows: the load offered, what each limiter cost its process, against the peer', () => {
    expect(results.rows.load.map((row) => row.name)).toEqual(LOAD);
    for (const row of results.rows.load) {
      expectAccounted(row);
      expectFinite(row.name, row, [
        'opsPerSecond',
        'cpuUsPerDecision',
        'cpuShare',
        'awaitedShare',
        'awaitedP99Ns',
        'roundTripsPer1000',
        'redisUsPerDecision',
        'redisCpuUsPerDecision',
        'timesPeerCpu',
      ]);
      expectFinite(row.name, row.gc as Record<string, unknown>, ['pauses', 'totalMs', 'maxMs'], 'gc.');
      // Paced, not a closed loop: every row is offered the same load, however fast it answers.
      expect(row.opsPerSecond as number, row.name).toBeGreaterThan(0.9 * (row.offeredPerSecond as number));
      expect(row.opsPerSecond as number, row.name).toBeLessThanOrEqual(
        1.01 * (row.offeredPerSecond as number),
      );
      expect(row.cpuUsPerDecision as number, row.name).toBeGreaterThan(0);
    }
    // Every decision of the per-request limiters goes to Redis; most of the two-tier limiter's do not.
    const share = (limiter: string) => results.rows.load.find((r) => r.limiter === limiter)!.awaitedShare;
    expect(share('RateLimiterRedis')).toBe(1);
    expect(share('RequestLimiter')).toBe(1);
    expect(share('TieredLimiter') as number).toBeLessThan(1);
    expect(results.headline.some((l) => l.startsWith('Fixed load, 25,000 decisions/s'))).toBe(true);
  });

  it('measures what another Redis client sees with the bench idle, and with every core busy', () => {
    expect(results.rows.neighbours.map((row) => row.name)).toEqual([IDLE, BUSY]);
    for (const row of results.rows.neighbours) {
      const probe = (row.health as { probe: Record<string, unknown> }).probe;
      expect(probe.sent as number).toBeGreaterThan(0);
      expectFinite(row.name, probe, ['p50Ms', 'p99Ms', 'maxMs'], 'health.probe.');
    }
  });

  it('produces every fleet simulation row, its policy decisions apart, the calls split by origin', () => {
    expect(results.rows.fleet.map((row) => row.name)).toEqual(FLEET);
    for (const row of results.rows.fleet) {
      expectAccounted(row);
      expectFinite(row.name, row, [
        'redisCallsPerSecond',
        'roundTripsPer1000',
        'p99Ns',
        'storeWaits',
        'promised',
      ]);
      const tiered = row.limiter === 'TieredLimiter';
      expect(row.census === null, `${row.name}: census`).toBe(!tiered);
      if (!tiered) continue;
      expectFinite(row.name, row.census as Record<string, unknown>, [
        'sync',
        'outOfBand',
        'refund',
        'syncCalls',
      ]);
      expectFinite(row.name, row, ['syncPeriodMs', 'statsInstances', 'timesFewerCalls']);
    }
  });

  it('states the headline ratios at limits that bite, and whether the policy decided while Redis was healthy', () => {
    expect(
      results.headline.some((l) => l.startsWith('Two-tier hot key ÷ rate-limiter-flexible, 100 at 10/s')),
    ).toBe(true);
    expect(results.headline.some((l) => l.startsWith('Lease hit'))).toBe(true);
    const marked = [
      ...results.rows.throughput,
      ...results.rows.keys,
      ...results.rows.cold,
      ...results.rows.cluster,
      ...results.rows.load,
      ...results.rows.accuracy,
      ...results.rows.fleet,
    ].filter((row) => policyTotal(row) > 0 && (row.health as { redisHealthy: boolean }).redisHealthy);
    // Apart: the rows whose probe saw Redis slower than the store timeout (⧗), and the others (⚠).
    const slowPings = (row: (typeof marked)[number]) =>
      (row.health as { probe: { slow?: number } | null }).probe?.slow ?? 0;
    const own = marked.filter((row) => slowPings(row) === 0);
    const slow = marked.filter((row) => slowPings(row) > 0);
    const last = results.headline.at(-1)!;
    if (marked.length === 0) expect(last).toBe('No failure-policy decision while Redis was healthy.');
    else if (own.length === 0)
      expect(last).toMatch(/^No failure-policy decision while Redis answered every probe within/);
    else {
      expect(last).toMatch(/^⚠ /);
      for (const row of own) expect(last).toContain(row.name);
    }
    const slowLine = results.headline.find((l) => l.startsWith('⧗ '));
    if (slow.length === 0) expect(slowLine).toBeUndefined();
    else for (const row of slow) expect(slowLine).toContain(`${row.name} (`);
  });

  it('writes the markdown, with a policy column and its ⚠ note, the JSON and the chart', () => {
    const md = readFileSync(join(out, 'latest.md'), 'utf8');
    for (const name of [
      ...MICRO,
      IDLE,
      ...ON_REDIS,
      ...KEYS,
      ...COLD,
      ...CLUSTER,
      ...LOAD,
      ...ACCURACY,
      ...FLEET,
    ])
      expect(md).toContain(`| ${name} |`);
    expect(md).toContain('| policy |');
    expect(md).toContain('**⚠**: policy decisions while the probe saw Redis answer every PING within');
    expect(md).toContain('**⧗**: policy decisions while Redis answered every PING, but some slower');
    const json = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as Results;
    expect(json.rows.throughput).toHaveLength(ON_REDIS.length);
    const svg = readFileSync(join(out, 'latest.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    // A repeated attribute makes the whole picture invalid XML: browsers then show nothing.
    for (const [tag, attributes] of svg.matchAll(/<[a-z]+ ([^>]*)>/g)) {
      const names = [...attributes!.matchAll(/([a-z-]+)=/g)].map((m) => m[1]);
      expect(new Set(names).size, tag).toBe(names.length);
    }
  });
});
