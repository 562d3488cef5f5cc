import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { type RedisServer, startRedis } from '@tiered-limiter/test-harness';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedManifest, type PackedWorkspace, packWorkspace, type Tarball } from './packaging/packed.js';
import { promisedLines } from './src/promised-output.js';

// What npm would publish: the tarballs of `pnpm pack`, linted by publint and arethetypeswrong
// (both offline, on the local .tgz files), checked against the house's package.json rules, and
// the examples of each package's README (the npm page) run from them. `pnpm check:packages`
// runs this file alone; `pnpm exec attw <file.tgz>` shows attw's table for one tarball.
const run = promisify(execFile);

let packed: PackedWorkspace;
let redis: RedisServer;
beforeAll(async () => {
  [packed, redis] = await Promise.all([packWorkspace('pack'), startRedis()]);
});
afterAll(async () => {
  packed?.remove();
  await redis?.stop();
});

const tarballs = () => packed.tarballs;
const bytes = (tarball: Tarball) => readFileSync(tarball.file);
const manifest = (tarball: Tarball) => installedManifest(packed.project, tarball.name);

describe.each(['core', 'local', 'redis', 'http', 'otel'] as const)('@tiered-limiter/%s tarball', (dir) => {
  const tarball = () => tarballs().find((t) => t.dir === dir)!;

  it('holds the ESM and CommonJS builds with their types, the LICENSE and the README, and no sources', () => {
    const files = tarball().files;
    for (const file of ['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts']) {
      expect(files).toContain(file);
    }
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    const shipped = /^(dist|lua)\/|^(LICENSE|README\.md|CHANGELOG\.md|package\.json)$/;
    expect(files.filter((f) => !shipped.test(f))).toEqual([]);
    const license = readFileSync(join(packed.project, 'node_modules', tarball().name, 'LICENSE'), 'utf8');
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 tiered-limiter contributors\n/);
  });

  it('has a package.json that follows the house rules, with no workspace: range left', () => {
    const pkg = manifest(tarball());
    expect(pkg).toMatchObject({
      name: `@tiered-limiter/${dir}`,
      license: 'MIT',
      author: 'tiered-limiter contributors',
      type: 'module',
      sideEffects: false,
      engines: { node: '>=20' },
      repository: { type: 'git', directory: `packages/${dir}` },
      publishConfig: { access: 'public' },
    });
    expect(pkg.description?.length).toBeGreaterThan(40);
    expect(pkg.homepage).toMatch(/^https:\/\//);
    expect(pkg.bugs?.url).toMatch(/^https:\/\//);
    expect(pkg.keywords?.length).toBeGreaterThanOrEqual(3);
    expect(pkg.files).toContain('dist');
    // Types first inside each condition: TypeScript takes the first condition that matches.
    const root = pkg.exports?.['.'] as Record<'import' | 'require', Record<string, string>>;
    expect(Object.keys(root)).toEqual(['import', 'require']);
    expect(Object.keys(root.import)).toEqual(['types', 'default']);
    expect(Object.keys(root.require)).toEqual(['types', 'default']);
    const ranges = { ...pkg.dependencies, ...pkg.peerDependencies };
    for (const [name, range] of Object.entries(ranges)) {
      expect(range, name).not.toMatch(/^workspace:/);
      if (name.startsWith('@tiered-limiter/'))
        expect(range, name).toBe(`^${manifest(tarballOf(name)).version}`);
    }
  });

  it('passes publint, strict (no error, warning or suggestion)', async () => {
    const data = bytes(tarball());
    const tarballBuffer = data.buffer.slice(
      data.byteOffset,
      data.byteOffset + data.byteLength,
    ) as ArrayBuffer;
    const { messages, pkg } = await publint({
      pack: { tarball: tarballBuffer },
      level: 'suggestion',
      strict: true,
    });
    expect(messages.map((message) => `${message.type}: ${formatMessage(message, pkg)}`)).toEqual([]);
  });

  it('passes arethetypeswrong (node10, node16 from CJS and ESM, bundler)', async () => {
    const result = await checkPackage(createPackageFromTarballData(new Uint8Array(bytes(tarball()))));
    expect(result.types).not.toBe(false);
    expect('problems' in result ? result.problems : []).toEqual([]);
  });
});

function tarballOf(name: string): Tarball {
  const found = tarballs().find((t) => t.name === name);
  if (!found) throw new Error(`${name} was not packed`);
  return found;
}

describe('package specifics', () => {
  it('redis takes its clients (ioredis, node-redis, iovalkey) as optional peers: a user installs one', () => {
    const pkg = manifest(tarballOf('@tiered-limiter/redis'));
    for (const optional of ['ioredis', 'redis', 'iovalkey']) {
      expect(pkg.peerDependencies).toHaveProperty(optional);
      expect(pkg.peerDependenciesMeta?.[optional]?.optional).toBe(true);
      expect(pkg.dependencies ?? {}).not.toHaveProperty(optional);
    }
    expect(tarballOf('@tiered-limiter/redis').files).toContain('lua/bucket.lua');
  });

  it('http takes its frameworks (Express, Fastify) as optional peers: a user installs the one they use', () => {
    const pkg = manifest(tarballOf('@tiered-limiter/http'));
    for (const optional of ['express', 'fastify']) {
      expect(pkg.peerDependencies).toHaveProperty(optional);
      expect(pkg.peerDependenciesMeta?.[optional]?.optional).toBe(true);
      expect(pkg.dependencies ?? {}).not.toHaveProperty(optional);
    }
  });

  // The README: "The five are released together, under one version", as one changesets `fixed`
  // group, so that an application never holds two copies of core's error classes.
  it('the five packages share one version and are one `fixed` group of changesets', () => {
    const five = ['core', 'local', 'redis', 'http', 'otel'].map((dir) => `@tiered-limiter/${dir}`).sort();
    const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
    // Every directory under packages/, not only the five named: a sixth fails here until it joins
    // the version, the group and the README's count.
    const manifests = readdirSync(root('packages')).map(
      (dir) =>
        JSON.parse(readFileSync(root(`packages/${dir}/package.json`), 'utf8')) as {
          name: string;
          version: string;
        },
    );
    // By name, so that a failure shows which package strayed from core's version.
    const versions = Object.fromEntries(manifests.map((m) => [m.name, m.version]));
    const core = versions['@tiered-limiter/core'];
    expect(versions).toEqual(Object.fromEntries(five.map((name) => [name, core])));
    const changesets = JSON.parse(readFileSync(root('.changeset/config.json'), 'utf8')) as {
      fixed: string[][];
    };
    expect(changesets.fixed.map((group) => [...group].sort())).toEqual([five]);
  });

  it('core has no dependencies and imports nothing: no I/O, no timers (its README)', () => {
    const pkg = manifest(tarballOf('@tiered-limiter/core'));
    expect(pkg.dependencies ?? {}).toEqual({});
    expect(pkg.peerDependencies ?? {}).toEqual({});
    const root = join(packed.project, 'node_modules', '@tiered-limiter/core', 'dist');
    for (const file of ['index.js', 'index.cjs']) {
      const code = readFileSync(join(root, file), 'utf8');
      expect(code).not.toMatch(/\bimport\s*(?:[\w*{][^;]*?from\s*)?["']|\brequire\(/);
      expect(code).not.toMatch(/\b(setTimeout|setInterval|setImmediate|queueMicrotask)\(/);
    }
  });

  it('http depends on core alone, and otel on core alone with the OpenTelemetry API as types only', () => {
    expect(Object.keys(manifest(tarballOf('@tiered-limiter/http')).dependencies ?? {})).toEqual([
      '@tiered-limiter/core',
    ]);
    const root = join(packed.project, 'node_modules', '@tiered-limiter/otel', 'dist');
    for (const file of ['index.js', 'index.cjs']) {
      expect(readFileSync(join(root, file), 'utf8')).not.toContain('@opentelemetry/api');
    }
  });

  // ESM-only dependencies: local's refill queue (p-limit), redis's coalescer queues (yocto-queue).
  it.each([
    { pkg: 'local', dep: 'p-limit' },
    { pkg: 'redis', dep: 'yocto-queue' },
  ])(
    "$pkg's CommonJS build carries $dep, with its licence notice; its ESM build imports it",
    ({ pkg, dep }) => {
      const root = join(packed.project, 'node_modules', `@tiered-limiter/${pkg}`, 'dist');
      const notices = readFileSync(join(root, 'THIRD-PARTY-LICENSES.md'), 'utf8');
      expect(notices).toMatch(
        new RegExp(`## ${dep}@\\d+\\.\\d+\\.\\d+\n\nMIT License\n\nCopyright \\(c\\) Sindre Sorhus`),
      );
      expect(readFileSync(join(root, 'index.cjs'), 'utf8')).not.toContain(`require("${dep}")`);
      expect(readFileSync(join(root, 'index.js'), 'utf8')).toContain(`from "${dep}"`);
    },
  );
});

// Each ```ts block of a packed README that starts with `// example: <name>` runs as an ES module in
// the consumer project (through tsx, which only strips the types: the imports resolve to the
// tarballs, not the sources); it prints the lines its `// → …` comments say, and nothing else.
const TSX = createRequire(import.meta.url).resolve('tsx');
const EXAMPLE = /```ts\n\/\/ example: ([\w-]+)\n([\s\S]*?)```/g;

describe('otel', () => {
  it('takes @opentelemetry/api as an optional peer and depends on core alone', () => {
    const pkg = manifest(tarballOf('@tiered-limiter/otel'));
    expect(pkg.peerDependencies).toHaveProperty('@opentelemetry/api');
    expect(pkg.peerDependenciesMeta?.['@opentelemetry/api']?.optional).toBe(true);
    expect(Object.keys(pkg.dependencies ?? {})).toEqual(['@tiered-limiter/core']);
  });
});

describe('README examples of the packed packages', () => {
  // How many examples each README has at least (http's print headers line by line and run in
  // test/readme.test.ts against the built packages; otel's need an
  // OpenTelemetry SDK, which a consumer of the tarballs alone lacks: the root README runs one).
  const examples = { core: 1, local: 1, redis: 1, otel: 0 } as const;

  it.each(Object.entries(examples))(
    '@tiered-limiter/%s: its examples run and print what their comments say',
    async (dir, least) => {
      const readme = readFileSync(
        join(packed.project, 'node_modules', `@tiered-limiter/${dir}`, 'README.md'),
        'utf8',
      );
      const found = [...readme.matchAll(EXAMPLE)];
      expect(found.length).toBeGreaterThanOrEqual(least);
      for (const [, name, code] of found) {
        const file = join(packed.project, `example-${name}.mts`);
        writeFileSync(file, code!);
        const expected = promisedLines(code!);
        const { stdout, stderr } = await run(process.execPath, ['--import', pathToFileURL(TSX).href, file], {
          cwd: packed.project,
          env: { ...process.env, REDIS_URL: redis.url },
          timeout: 30_000,
        });
        expect(stderr).toBe('');
        expect(stdout.trimEnd().split('\n')).toEqual(expected);
      }
    },
  );
});
