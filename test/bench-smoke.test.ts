import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// `pnpm bench --quick` as CI runs it: it must finish and produce every row with finite numbers.
// Speeds are never asserted: on a shared CI machine they mean nothing.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BENCH = join(ROOT, 'bench');
const run = promisify(execFile);

const IN_PROCESS = [
  'baseline · no limiter',
  'baseline · performance.now() alone',
  'LocalLimiter · 1 hot key',
  'LocalLimiter · 100k keys',
  'RateLimiterMemory · 1 hot key',
  'RateLimiterMemory · 100k keys',
];
const ON_REDIS = ['RedisStore.take', 'RequestLimiter', 'TieredLimiter', 'RateLimiterRedis'].flatMap(
  (limiter) =>
    ['1 hot key', '100k keys'].flatMap((keys) =>
      ['', ' · 64 in flight', ' · 256 in flight'].map((inFlight) => `${limiter} · ${keys}${inFlight}`),
    ),
);
const ACCURACY = ['RequestLimiter', 'TieredLimiter', 'RateLimiterRedis'].map(
  (l) => `${l} · accuracy, 4 processes`,
);
const FLEET = [10, 50, 200].flatMap((n) =>
  ['RequestLimiter', 'TieredLimiter'].map((l) => `${l} · fleet of ${n} instances`),
);

interface Results {
  quick: boolean;
  machine: { cpus: number; node: string };
  redis: { version: string };
  versions: Record<string, string>;
  throughput: Record<string, unknown>[];
  accuracy: Record<string, unknown>[];
  fleet: Record<string, unknown>[];
}

const finite = (value: unknown) => typeof value === 'number' && Number.isFinite(value);

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
    ['--import', 'tsx', 'src/main.ts', '--quick', '--json', '--out', out],
    { cwd: BENCH, timeout: 110_000, maxBuffer: 64 * 1024 * 1024 },
  );
  results = JSON.parse(stdout) as Results;
}, 120_000);

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

describe('pnpm bench --quick', () => {
  it('says what it ran on', () => {
    expect(results.quick).toBe(true);
    expect(results.machine.cpus).toBeGreaterThan(0);
    expect(results.redis.version).toMatch(/^\d+\.\d+/);
    expect(results.versions['rate-limiter-flexible']).toMatch(/^\d+\./);
  });

  it('produces every throughput row, with finite numbers and a ratio to its peer', () => {
    const byName = new Map(results.throughput.map((row) => [row.name as string, row]));
    expect([...byName.keys()].sort()).toEqual([...IN_PROCESS, ...ON_REDIS].sort());
    for (const [name, row] of byName) {
      for (const field of ['opsPerSecond', 'p50Ns', 'p99Ns', 'p999Ns', 'admittedShare']) {
        expect(finite(row[field]), `${name}: ${field} = ${row[field]}`).toBe(true);
      }
      expect(row.decisions as number, name).toBeGreaterThan(0);
      const onRedis = ON_REDIS.includes(name);
      expect(finite(row.roundTripsPer1000), `${name}: roundTripsPer1000`).toBe(onRedis);
      if (!name.startsWith('baseline')) expect(finite(row.timesPeer), `${name}: timesPeer`).toBe(true);
    }
  });

  it('produces every accuracy row, with the bound checked for the two-tier limiter', () => {
    expect(results.accuracy.map((row) => row.name)).toEqual(ACCURACY);
    for (const row of results.accuracy) {
      for (const field of ['decisions', 'admitted', 'ideal', 'admittedOfIdeal', 'roundTripsPer1000']) {
        expect(finite(row[field]), `${row.name}: ${field} = ${row[field]}`).toBe(true);
      }
    }
    const tiered = results.accuracy.find((row) => row.limiter === 'TieredLimiter')!;
    const window = tiered.window as Record<string, unknown>;
    for (const field of ['admitted', 'windowMs', 'bound', 'excess', 'maxIn1s', 'boundFor1s']) {
      expect(finite(window[field]), `window.${field}`).toBe(true);
    }
  });

  it('produces every fleet simulation row', () => {
    expect(results.fleet.map((row) => row.name)).toEqual(FLEET);
    for (const row of results.fleet) {
      for (const field of ['decisions', 'redisCallsPerSecond', 'roundTripsPer1000', 'p99Ns']) {
        expect(finite(row[field]), `${row.name}: ${field} = ${row[field]}`).toBe(true);
      }
    }
  });

  it('writes the markdown, the JSON and the chart', () => {
    const md = readFileSync(join(out, 'latest.md'), 'utf8');
    for (const name of [...IN_PROCESS, ...ON_REDIS, ...ACCURACY, ...FLEET])
      expect(md).toContain(`| ${name} |`);
    expect(JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).throughput).toHaveLength(
      IN_PROCESS.length + ON_REDIS.length,
    );
    const svg = readFileSync(join(out, 'latest.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  });
});
