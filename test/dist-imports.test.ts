import { execFile } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type RedisServer, startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGES, type PackedWorkspace, packWorkspace } from './packaging/packed.js';

// Every exported function and class of every package, from the packed tarballs installed in a
// consumer project of their own, loaded once with import() and once with require(), in a plain
// `node` (no vitest alias can stand in for a package there). The cases are the table in
// packaging/exercises.mjs; the export lists come from the modules themselves, at run time.
const run = promisify(execFile);
const here = (file: string) => fileURLToPath(new URL(`./packaging/${file}`, import.meta.url));
const NAMES = PACKAGES.map((dir) => `@tiered-limiter/${dir}`);

interface PackageReport {
  exports: Record<string, string>;
  constants: Record<string, string>;
  results: Record<string, string>;
  missing: string[];
  stale: string[];
}
type Report = Record<string, PackageReport>;

let redis: RedisServer;
let packed: PackedWorkspace;
const reports: Partial<Record<'ESM' | 'CommonJS', Report>> = {};

async function exercise(format: 'ESM' | 'CommonJS'): Promise<Report> {
  const entry = format === 'ESM' ? 'consumer.mjs' : 'consumer.cjs';
  const out = join(packed.project, `report-${format}.json`);
  await run(process.execPath, [entry, out], {
    cwd: packed.project,
    env: { ...process.env, REDIS_URL: redis.url, TL_PREFIX: uniquePrefix(`dist-${format}`) },
    timeout: 60_000,
  });
  return JSON.parse(readFileSync(out, 'utf8'));
}

beforeAll(async () => {
  [redis, packed] = await Promise.all([startRedis(), packWorkspace('dist')]);
  for (const file of ['exercises.mjs', 'consumer.mjs', 'consumer.cjs']) {
    copyFileSync(here(file), join(packed.project, file));
  }
  [reports.ESM, reports.CommonJS] = await Promise.all([exercise('ESM'), exercise('CommonJS')]);
});

afterAll(async () => {
  packed?.remove();
  await redis?.stop();
});

describe.each(['ESM', 'CommonJS'] as const)('packed packages from %s', (format) => {
  it.each(NAMES)('%s: every exported function and class has a case, and each passes', (name) => {
    const report = reports[format]![name]!;
    expect(Object.keys(report.exports).length).toBeGreaterThan(0);
    // A new export needs an entry in test/packaging/exercises.mjs; a removed one loses its entry.
    expect(report.missing, `exports of ${name} with no case in exercises.mjs`).toEqual([]);
    expect(report.stale, `cases in exercises.mjs for functions ${name} no longer exports`).toEqual([]);
    const failed = Object.entries(report.results).filter(([, outcome]) => outcome !== 'ok');
    expect(Object.fromEntries(failed)).toEqual({});
    // Every function ran, and core's `internal` namespace (an object) too.
    expect(Object.keys(report.results).length).toBe(
      Object.entries(report.exports).filter(
        ([export_, type]) => type === 'function' || export_ === 'internal',
      ).length,
    );
  });
});

describe('ESM and CommonJS builds', () => {
  it.each(NAMES)('%s: the same exports, of the same kinds, with the same constant values', (name) => {
    const esm = reports.ESM![name]!;
    const cjs = reports.CommonJS![name]!;
    expect(cjs.exports).toEqual(esm.exports);
    expect(cjs.constants).toEqual(esm.constants);
  });
});
