import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type RedisServer, startRedis } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inOrder, promisedLines } from './src/promised-output.js';

// Every ```ts block of a README that starts with `// example: <name>` is run as it is written,
// against the built packages and a real Redis, so the README cannot drift from the library. The
// HTTP package's examples run from inside that package, where Express, Fastify and the package
// itself (by its own name) resolve. A `// → …` comment says a line the example prints.
interface Readme {
  readonly file: string;
  /** Where the examples are written and run from: imports resolve from here. */
  readonly dir: string;
  readonly names: readonly string[];
  /**
   * The first lines of its ```ts blocks that are not examples: sketches with free names (a
   * `limiter`, an `app`) that cannot run alone. Each is listed, so a new block that runs nowhere
   * fails here until it is made an example or named a sketch on purpose.
   */
  readonly sketches: readonly string[];
}

const url = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const READMES: readonly Readme[] = [
  {
    file: url('../README.md'),
    dir: url('./.readme-examples/'),
    names: [
      'tiered',
      'per-request',
      'multi-limit',
      'local',
      'node-redis',
      'prometheus',
      'otel',
      'shutdown',
      'from-bucket4j',
    ],
    sketches: ["import { StoreReplyError } from '@tiered-limiter/core';"],
  },
  {
    file: url('../packages/http/README.md'),
    dir: url('../packages/http/test/.readme-examples/'),
    names: [
      'http-node',
      'http-express',
      'http-fastify',
      'http-hono',
      'http-fetch',
      'http-keys',
      'http-routes',
      'http-plans',
      'http-denials',
      'http-http2',
      'migrate-express-rate-limit',
      'migrate-fastify-rate-limit',
      'migrate-rate-limiter-flexible',
      'migrate-upstash-ratelimit',
    ],
    sketches: [
      'expressRateLimit({ limiter: login, skipSuccessfulRequests: true }); // only failed logins count',
      'server.close(async () => {',
      'const check = createRateLimitCheck({ limiter });',
    ],
  },
];

const examples = READMES.flatMap((readme) =>
  [...readFileSync(readme.file, 'utf8').matchAll(/```ts\n\/\/ example: ([\w-]+)\n([\s\S]*?)```/g)].map(
    (m) => ({
      name: m[1]!,
      code: m[2]!,
      readme,
    }),
  ),
);

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  for (const { dir } of READMES) {
    mkdirSync(dir, { recursive: true });
    // tsx would follow the root tsconfig's `paths` to the sources: run against the built packages.
    writeFileSync(
      `${dir}tsconfig.json`,
      JSON.stringify({ compilerOptions: { module: 'NodeNext', target: 'ES2022' } }),
    );
  }
});
afterAll(async () => {
  for (const { dir } of READMES) rmSync(dir, { recursive: true, force: true });
  await redis.stop();
});

describe('README examples', () => {
  it.each(READMES)('finds the examples of $file', (readme) => {
    expect(examples.filter((e) => e.readme === readme).map((e) => e.name)).toEqual(readme.names);
  });

  it.each(READMES)('runs every ```ts block of $file, but for the sketches it names', (readme) => {
    const firstLines = [...readFileSync(readme.file, 'utf8').matchAll(/```ts\n(.*)\n/g)].map((m) => m[1]!);
    expect(firstLines.filter((line) => !line.startsWith('// example: '))).toEqual(readme.sketches);
  });

  it.each(examples)('$name runs', ({ name, code, readme }) => {
    const file = `${readme.dir}${name}.mts`;
    writeFileSync(file, code);
    const run = spawnSync(process.execPath, ['--import', 'tsx', file], {
      cwd: readme.dir,
      env: { ...process.env, REDIS_URL: redis.url, TSX_TSCONFIG_PATH: `${readme.dir}tsconfig.json` },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.length).toBeGreaterThan(0);
    // What the example says it prints, it prints, in that order.
    expect(inOrder(run.stdout.split('\n'), promisedLines(code))).toEqual(promisedLines(code));
  });
});
