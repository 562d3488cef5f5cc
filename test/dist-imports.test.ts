import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { type RedisServer, startRedis } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The built packages, as a user installs them. No vitest alias may stand in for them here, so each
// is reached by its file path (or, last, by its name through its exports map) in a plain `node`.
const root = fileURLToPath(new URL('..', import.meta.url));
const dist = (pkg: string, file: string) => `${root}packages/${pkg}/dist/${file}`;
const run = promisify(execFile);

beforeAll(() => {
  for (const pkg of ['core', 'local', 'redis', 'http']) {
    for (const file of ['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts']) {
      if (!existsSync(dist(pkg, file))) {
        throw new Error(`${dist(pkg, file)} is missing: run \`pnpm build\` before this test`);
      }
    }
  }
});

describe('built packages', () => {
  it('work from ESM: a dynamic import() of dist/index.js makes a decision', async () => {
    // In a node of its own: inside vitest, import() of the dist file would still go through vite,
    // whose alias would hand local's dist the sources of core.
    const script = `
      const core = await import(${JSON.stringify(pathToFileURL(dist('core', 'index.js')).href)});
      const local = await import(${JSON.stringify(pathToFileURL(dist('local', 'index.js')).href)});
      const limiter = new local.LocalLimiter({ limits: core.perSecond(2) });
      const decisions = [limiter.tryConsume('k'), limiter.tryConsume('k'), limiter.tryConsume('k')];
      let sameCore = false;
      try { new local.LocalLimiter({ limits: core.perSecond(1), maxKeys: 0 }); }
      catch (err) { sameCore = err instanceof core.ConfigError; }
      process.stdout.write(JSON.stringify({ decisions, sameCore }));
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root });
    const { decisions, sameCore } = JSON.parse(stdout);
    expect(decisions[0]).toMatchObject({ allowed: true, remaining: 1, limit: 2, tier: 'local' });
    expect(decisions[2]).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 500 });
    // local's dist imports core's dist: its errors are the built core's classes.
    expect(sameCore).toBe(true);
  });

  it('work from CommonJS: require() of the .cjs files makes a decision', async () => {
    const script = `
      const core = require(${JSON.stringify(dist('core', 'index.cjs'))});
      const local = require(${JSON.stringify(dist('local', 'index.cjs'))});
      const limiter = new local.LocalLimiter({ limits: core.perSecond(2) });
      const first = limiter.tryConsume('k');
      let sameCore = false;
      try { new local.LocalLimiter({ limits: core.perSecond(1), maxKeys: 0 }); }
      catch (err) { sameCore = err instanceof core.ConfigError; }
      process.stdout.write(JSON.stringify({ first, sameCore }));
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: root });
    const { first, sameCore } = JSON.parse(stdout);
    expect(first).toMatchObject({ allowed: true, remaining: 1, limit: 2, tier: 'local' });
    expect(sameCore).toBe(true);
  });

  it('resolve by package name through the exports map, both import and require', async () => {
    // From test/, whose node_modules links the workspace packages as a user's would.
    const cwd = `${root}test`;
    const esm = `
      const { perSecond } = await import('@tiered-limiter/core');
      const { LocalLimiter } = await import('@tiered-limiter/local');
      process.stdout.write(JSON.stringify(new LocalLimiter({ limits: perSecond(3) }).tryConsume('k')));
    `;
    const cjs = `
      const { perSecond } = require('@tiered-limiter/core');
      const { LocalLimiter } = require('@tiered-limiter/local');
      process.stdout.write(JSON.stringify(new LocalLimiter({ limits: perSecond(3) }).tryConsume('k')));
    `;
    const fromEsm = await run(process.execPath, ['--input-type=module', '-e', esm], { cwd });
    const fromCjs = await run(process.execPath, ['-e', cjs], { cwd });
    expect(JSON.parse(fromEsm.stdout)).toMatchObject({ allowed: true, remaining: 2, limit: 3 });
    expect(JSON.parse(fromCjs.stdout)).toMatchObject({ allowed: true, remaining: 2, limit: 3 });
  });
});

describe('built Redis and HTTP packages', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis.stop());

  it.each([
    ['ESM', ['--input-type=module', '-e'], 'await import'],
    ['CommonJS', ['-e'], 'require'],
  ])('work from %s: a Redis limiter decides and the HTTP headers render', async (_name, flags, load) => {
    // Top-level await is ESM only: the CommonJS script runs inside an async function.
    const body = `
      const { perSecond } = ${load}('@tiered-limiter/core');
      const { createRedisLimiter, recommendedRedisOptions } = ${load}('@tiered-limiter/redis');
      const { rateLimitHeaders, rateLimitPolicy } = ${load}('@tiered-limiter/http');
      const { Redis } = ${load}('ioredis');
      const client = new Redis(${JSON.stringify(redis.url)}, recommendedRedisOptions);
      await new Promise((resolve) => client.once('ready', resolve));
      const limit = perSecond(5, { name: 'dist' });
      const limiter = createRedisLimiter({ redis: client, prefix: 'dist-${_name}-' + process.pid, limits: limit, failurePolicy: 'closed' });
      const decision = await limiter.consume('k');
      const headers = rateLimitHeaders(decision, rateLimitPolicy(limit));
      await limiter.close();
      client.disconnect();
      process.stdout.write(JSON.stringify({ decision, headers }));
    `;
    const script = load === 'require' ? `(async () => { ${body} })();` : body;
    const { stdout } = await run(process.execPath, [...flags, script], { cwd: `${root}test` });
    const { decision, headers } = JSON.parse(stdout);
    expect(decision).toMatchObject({ allowed: true, remaining: 4, limit: 5, tier: 'global' });
    expect(headers).toMatchObject({ 'RateLimit-Policy': '"dist";q=5;w=1', RateLimit: '"dist";r=4;t=1' });
  });
});
