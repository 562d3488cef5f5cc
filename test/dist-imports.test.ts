import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type RedisServer, startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DeclaredExports, declaredExports } from './packaging/declared-exports.js';
import { type ExerciseReport, expectEveryExportExercised } from './packaging/exercise-report.js';
import { bareProject, PACKAGES, type PackedWorkspace, packWorkspace, ROOT } from './packaging/packed.js';

// Every exported function and class of every package, from the packed tarballs installed in a
// consumer project of their own, loaded once with import() and once with require(), in a plain
// `node` (no vitest alias can stand in for a package there). The cases are the table in
// packaging/exercises.mjs; the export lists come from the modules themselves, at run time.
const run = promisify(execFile);
const here = (file: string) => fileURLToPath(new URL(`./packaging/${file}`, import.meta.url));
const NAMES = PACKAGES.map((dir) => `@tiered-limiter/${dir}`);

let redis: RedisServer;
let packed: PackedWorkspace;
const reports: Partial<Record<'ESM' | 'CommonJS', ExerciseReport>> = {};

async function exercise(format: 'ESM' | 'CommonJS'): Promise<ExerciseReport> {
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
    expectEveryExportExercised(name, reports[format]![name]!);
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

// The run-time lists above cannot see a type: these read each package's src/index.ts and the packed
// declarations with TypeScript, as a user's editor does, for `import` (.d.ts) and `require` (.d.cts).
describe('declarations of the packed packages', () => {
  // One program for the five packages' sources and declarations: TypeScript loads once.
  let declared: Map<string, DeclaredExports[]> | undefined;
  const declarationsOf = (dir: string): DeclaredExports[] => {
    if (declared === undefined) {
      const files = PACKAGES.map((d) => {
        const dist = join(packed.project, 'node_modules', `@tiered-limiter/${d}`, 'dist');
        return [
          join(ROOT, 'packages', d, 'src', 'index.ts'),
          join(dist, 'index.d.ts'),
          join(dist, 'index.d.cts'),
        ];
      });
      const { exports } = declaredExports(files.flat());
      declared = new Map(PACKAGES.map((d, i) => [d, exports.slice(i * 3, i * 3 + 3)]));
    }
    return declared.get(dir)!;
  };

  it.each(PACKAGES)(
    '@tiered-limiter/%s: every name src/index.ts exports, types included, in both declarations; its values at run time',
    (dir) => {
      const name = `@tiered-limiter/${dir}`;
      const [source, esm, cjs] = declarationsOf(dir);
      expect(source!.all.length).toBeGreaterThan(source!.values.length); // types-only exports are there
      expect(esm).toEqual(source);
      expect(cjs).toEqual(source);
      for (const format of ['ESM', 'CommonJS'] as const) {
        expect(Object.keys(reports[format]![name]!.exports).sort(), format).toEqual(source!.values);
      }
    },
  );
});

const OPTIONAL_PEERS = ['ioredis', 'redis', 'iovalkey', 'express', 'fastify', '@opentelemetry/api'];

describe('without the optional peers', () => {
  it('every package loads from import and require, and core, local, redis and http type-check', async () => {
    const bare = bareProject(packed);
    for (const peer of OPTIONAL_PEERS) expect(existsSync(join(bare, 'node_modules', peer)), peer).toBe(false);
    const script = `
      import { createRequire } from 'node:module';
      const require = createRequire(process.cwd() + '/');
      const names = {};
      for (const name of ${JSON.stringify(NAMES)}) {
        names[name] = [Object.keys(await import(name)).sort(), Object.keys(require(name)).sort()];
      }
      console.log(JSON.stringify(names));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: bare,
      timeout: 30_000,
    });
    const loaded = JSON.parse(stdout) as Record<string, [string[], string[]]>;
    for (const name of NAMES) {
      const expected = Object.keys(reports.ESM![name]!.exports).sort();
      expect(loaded[name], name).toEqual([expected, expected]);
    }
    // skipLibCheck off: a declaration that imports a missing peer's types fails here. otel's import
    // @opentelemetry/api's types, which its user has (the Meter comes from it).
    const typed = ['core', 'local', 'redis', 'http'].map((dir) => `@tiered-limiter/${dir}`);
    const esm = typed.map(
      (name, i) => `import * as m${i} from '${name}';\nexport type T${i} = typeof m${i};\n`,
    );
    const cjs = typed.map(
      (name, i) => `import m${i} = require('${name}');\nexport type T${i} = typeof m${i};\n`,
    );
    writeFileSync(join(bare, 'types.mts'), esm.join(''));
    writeFileSync(join(bare, 'types.cts'), cjs.join(''));
    const { diagnostics } = declaredExports([join(bare, 'types.mts'), join(bare, 'types.cts')], {
      skipLibCheck: false,
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules', '@types')],
    });
    expect(diagnostics).toEqual([]);
  });
});
