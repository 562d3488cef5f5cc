import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type RedisServer, startRedis } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Every ```ts block of the README that starts with `// example: <name>` is run as it is written,
// against the built packages and a real Redis, so the README cannot drift from the library.
const README = fileURLToPath(new URL('../README.md', import.meta.url));
const DIR = fileURLToPath(new URL('./.readme-examples/', import.meta.url));
const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));

const examples = [
  ...readFileSync(README, 'utf8').matchAll(/```ts\n\/\/ example: ([\w-]+)\n([\s\S]*?)```/g),
].map((m) => ({ name: m[1]!, code: m[2]! }));

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  mkdirSync(DIR, { recursive: true });
  // tsx would follow the root tsconfig's `paths` to the sources: run against the built packages.
  writeFileSync(
    `${DIR}tsconfig.json`,
    JSON.stringify({ compilerOptions: { module: 'NodeNext', target: 'ES2022' } }),
  );
});
afterAll(async () => {
  rmSync(DIR, { recursive: true, force: true });
  await redis.stop();
});

describe('README examples', () => {
  it('finds the examples', () => {
    expect(examples.map((e) => e.name)).toEqual([
      'tiered',
      'per-request',
      'multi-limit',
      'local',
      'prometheus',
      'shutdown',
    ]);
  });

  it.each(examples)('$name runs', ({ name, code }) => {
    const file = `${DIR}${name}.mts`;
    writeFileSync(file, code);
    const run = spawnSync(process.execPath, ['--import', 'tsx', file], {
      cwd: TEST_DIR,
      env: { ...process.env, REDIS_URL: redis.url, TSX_TSCONFIG_PATH: `${DIR}tsconfig.json` },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.length).toBeGreaterThan(0);
  });
});
