/**
 * The table of `@tiered-limiter/otel`'s README is what dashboards and alerts are written against:
 * every metric's name, kind, unit and attribute values there must be what the package reports.
 * A stub limiter with known counters (observeLimiter reads any limiter's `stats()`) and a wrapped
 * MemoryStore asked every kind of call make every row report.
 */
import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  AggregationTemporality,
  type DataPoint,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { defineLimit } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { ATTRIBUTES, instrumentStore, METRICS, observeLimiter } from '@tiered-limiter/otel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promisedLines } from './src/promised-output.js';
import { redisForFile } from './src/redis-for-file.js';

const README = readFileSync(fileURLToPath(new URL('../packages/otel/README.md', import.meta.url)), 'utf8');

interface Row {
  readonly name: string;
  readonly kind: string;
  readonly unit: string;
  /** Attribute key → the values the row lists. */
  readonly attributes: Map<string, string[]>;
}

/** The README's metric table. */
function table(): Row[] {
  const lines = README.split('\n').filter((line) => line.startsWith('| `tiered_limiter.'));
  return lines.map((line) => {
    const [name, kind, unit, attributes] = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    const listed = new Map<string, string[]>();
    for (const part of attributes!.split(';')) {
      const m = /`([\w.]+)`: (.*)$/.exec(part.trim());
      if (m)
        listed.set(
          m[1]!,
          [...m[2]!.matchAll(/`([\w-]+)`/g)].map((v) => v[1]!),
        );
    }
    return {
      name: name!.replaceAll('`', ''),
      kind: kind!,
      unit: unit!.replaceAll('`', ''),
      attributes: listed,
    };
  });
}

/** What the SDK's exported data says of each README kind: its point type, and whether a sum only grows. */
const KINDS: Record<string, { readonly points: DataPointType; readonly monotonic?: boolean }> = {
  counter: { points: DataPointType.SUM, monotonic: true },
  'up-down count': { points: DataPointType.SUM, monotonic: false },
  gauge: { points: DataPointType.GAUGE },
  'gauge (0 or 1)': { points: DataPointType.GAUGE },
  histogram: { points: DataPointType.HISTOGRAM },
};

/** The kind `metric` was reported as, in the terms of `KINDS`. */
function kindOf(metric: MetricData): { readonly points: DataPointType; readonly monotonic?: boolean } {
  return metric.dataPointType === DataPointType.SUM
    ? { points: metric.dataPointType, monotonic: metric.isMonotonic }
    : { points: metric.dataPointType };
}

/** Every counter a `TieredLimiter`'s `stats()` may hold, each a different number. */
const STATS = {
  allowed: 10,
  denied: 3,
  decisions: { lease: 6, global: 3, fallback: 2, local: 2 },
  storeOps: 4,
  tokensLeased: 20,
  tokensTaken: 1,
  tokensOptimistic: 2,
  tokensRefunded: 5,
  tokensExpired: 6,
  tokensUnreported: 7,
  tokensHeld: 8,
  fallbackMs: 1500,
  degraded: true,
  instances: 7,
};

async function collectAll() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  const meter = provider.getMeter('readme');
  const limiter = Object.assign(new EventEmitter(), { stats: () => STATS });
  const observation = observeLimiter(limiter, meter);
  limiter.emit('degraded', new Error('down'));
  limiter.emit('degraded', new Error('down again'));
  const store = instrumentStore(new MemoryStore(), meter);
  const limits = [defineLimit({ capacity: 10, refillPerSecond: 1 })];
  await store.apply({ key: 'k', limits, take: 1 });
  await store.apply({ key: 'k', limits, reserve: { want: 2, min: 1, holdMs: 1000 } });
  await store.apply({ key: 'k', limits, credit: 1 });
  await store.apply({ key: 'k', limits });
  await store.reset('k', limits);
  await store.heartbeat!('instance-a', 1000);
  await store.leave!('instance-a');
  const collect = async () => {
    exporter.reset();
    await reader.forceFlush();
    const metrics = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    return new Map(metrics.map((m) => [m.descriptor.name, m]));
  };
  const before = await collect();
  observation.stop();
  limiter.emit('degraded', new Error('after stop'));
  const after = await collect();
  await provider.shutdown();
  return { before, after };
}

const firstValue = (metric: MetricData | undefined) =>
  (metric?.dataPoints[0] as DataPoint<number> | undefined)?.value;

describe("@tiered-limiter/otel's README table", () => {
  const rows = table();
  let metrics: Map<string, MetricData>;
  let after: Map<string, MetricData>;
  beforeAll(async () => {
    ({ before: metrics, after } = await collectAll());
  });

  it('lists every metric the package names, and only those', () => {
    expect(rows.map((r) => r.name).sort()).toEqual(Object.values(METRICS).sort());
  });

  it.each(rows)('$name: reported with the kind, unit and attribute values the table says', (row) => {
    const metric = metrics.get(row.name);
    expect(metric, `${row.name} reported`).toBeDefined();
    expect(kindOf(metric!)).toEqual(KINDS[row.kind]);
    expect(metric!.descriptor.unit).toBe(row.unit);
    for (const [key, listed] of row.attributes) {
      // `error.type` carries an error's code, not a listed value.
      if (key === ATTRIBUTES.errorType) continue;
      const seen = new Set(
        (metric!.dataPoints as DataPoint<unknown>[])
          .map((p) => p.attributes[key])
          .filter((v): v is string => typeof v === 'string'),
      );
      expect([...seen].sort()).toEqual([...listed].sort());
    }
  });

  it('reports degraded time in seconds, the live fleet, and the breaker openings until stopped', () => {
    expect(firstValue(metrics.get(METRICS.degradedTime))).toBe(1.5);
    expect(firstValue(metrics.get(METRICS.degraded))).toBe(1);
    expect(firstValue(metrics.get(METRICS.instances))).toBe(7);
    expect(firstValue(metrics.get(METRICS.degradations))).toBe(2);
    // Stopped: the event after stop() is not counted.
    expect(firstValue(after.get(METRICS.degradations))).toBe(2);
  });
});

// The README's example has no `// example:` mark (the packed-package test would run it where no
// OpenTelemetry API is installed): it runs here, as written, against the built packages and a real
// Redis, with the API's own no-op meter, as an application with no SDK registered would.
describe("@tiered-limiter/otel's README example", () => {
  const redis = redisForFile();
  const dir = fileURLToPath(new URL('./.otel-readme-example/', import.meta.url));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs as written and prints what its comments say', () => {
    const code = /## Example\n\n```ts\n([\s\S]*?)```/.exec(README)![1]!;
    mkdirSync(dir, { recursive: true });
    // tsx would follow the root tsconfig's `paths` to the sources: run against the built packages.
    writeFileSync(
      `${dir}tsconfig.json`,
      JSON.stringify({ compilerOptions: { module: 'NodeNext', target: 'ES2022' } }),
    );
    writeFileSync(`${dir}example.mts`, code);
    const run = spawnSync(process.execPath, ['--import', 'tsx', `${dir}example.mts`], {
      cwd: dir,
      env: { ...process.env, REDIS_URL: redis.url, TSX_TSCONFIG_PATH: `${dir}tsconfig.json` },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.trimEnd().split('\n')).toEqual(promisedLines(code));
  });
});
