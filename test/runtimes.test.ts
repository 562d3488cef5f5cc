import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type RedisServer, startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExerciseReport, expectEveryExportExercised } from './packaging/exercise-report.js';
import { PACKAGES, type PackedWorkspace, packWorkspace } from './packaging/packed.js';
import { type Runtime, runtimes } from './packaging/runtimes.js';

// The packed packages on Bun and Deno, as a service on either would install them from npm: every
// export from import() and require() (the exercise table of test/dist-imports.test.ts, run by the
// other runtime), then what leans on the runtime rather than the language (the shared clock
// thread, close() handing leases back, a process that ends by itself, the Fetch adapter on the
// runtime's own server: packaging/runtime-probe.mjs). Node.js runs the same probe, as the
// reference. Each runtime is the npm release pinned in test/package.json.
const run = promisify(execFile);
const here = (file: string) => fileURLToPath(new URL(`./packaging/${file}`, import.meta.url));
const NAMES = PACKAGES.map((dir) => `@tiered-limiter/${dir}`);
/** Deno.serve's notice that it aborts a request's signal after a successful response. */
const DENO_LEGACY_ABORT =
  /^Deno\.serve: request\.signal aborts on successful responses \(legacy behavior\)\./;
/**
 * Generous (a run takes 0.3–3 s, more on 2 loaded cores), and under the test's own 30 s, so that a
 * process that wrote its report but did not end fails with that said.
 */
const RUN_TIMEOUT_MS = 25_000;

let redis: RedisServer;
let packed: PackedWorkspace;

beforeAll(async () => {
  [redis, packed] = await Promise.all([startRedis(), packWorkspace('runtimes')]);
  for (const file of ['exercises.mjs', 'consumer.mjs', 'consumer.cjs', 'runtime-probe.mjs']) {
    copyFileSync(here(file), join(packed.project, file));
  }
});

afterAll(async () => {
  packed?.remove();
  await redis?.stop();
});

interface Ran {
  stderr: string;
  /** What the script wrote to its report file. */
  report: unknown;
}

/**
 * Runs `script` of the consumer project with `binary args…`, its report going to a file of its
 * own; rejects, saying which, when the script failed or wrote its report but did not end.
 */
async function runScript(
  label: string,
  binary: string,
  args: readonly string[],
  env: Record<string, string>,
  script: string,
  extra: readonly string[] = [],
): Promise<Ran> {
  const out = join(packed.project, `report-${label}.json`);
  try {
    const { stderr } = await run(binary, [...args, script, out, ...extra], {
      cwd: packed.project,
      env: { ...process.env, ...env, REDIS_URL: redis.url, TL_PREFIX: uniquePrefix(label) },
      timeout: RUN_TIMEOUT_MS,
    });
    return { stderr, report: JSON.parse(readFileSync(out, 'utf8')) };
  } catch (error) {
    const { killed, stderr } = error as { killed?: boolean; stderr?: string };
    if (killed && existsSync(out)) {
      throw new Error(
        `${label}: wrote its report, then did not end within ${RUN_TIMEOUT_MS} ms (a handle kept it alive)`,
      );
    }
    throw new Error(`${label}: ${String((error as Error).message)}\n${stderr ?? ''}`);
  }
}

const temp = () => dirname(packed.project);

describe.each(runtimes())('the packed packages on $name', (runtime: Runtime) => {
  const inRuntime = (label: string, script: string, extra: readonly string[] = []) =>
    runScript(`${runtime.name}-${label}`, runtime.binary, runtime.args, runtime.env(temp()), script, extra);

  it.each([
    ['ESM', 'consumer.mjs'],
    ['CommonJS', 'consumer.cjs'],
  ])('from %s: every exported function and class has a case, and each passes', async (format, script) => {
    const { report } = await inRuntime(format, script);
    for (const name of NAMES) expectEveryExportExercised(name, (report as ExerciseReport)[name]!);
  });

  it('joins the shared clock thread on a busy hot path within the limit, hands leases back on close(), runs on node-redis and iovalkey, serves the Fetch adapter natively, keeps the timeout while Redis is paused, ends by itself, with nothing on stderr', async () => {
    const checks =
      'hotPathOnTheClockThread,closeHandsBack,otherClients,fetchAdapterOnNativeServer,pausedRedisWithinTimeout';
    const { report, stderr } = await inRuntime('probe', 'runtime-probe.mjs', [checks]);
    expect(report).toEqual({
      checks: {
        hotPathOnTheClockThread: 'ok',
        closeHandsBack: 'ok',
        otherClients: 'ok',
        fetchAdapterOnNativeServer: 'ok',
        pausedRedisWithinTimeout: 'ok',
      },
    });
    expect(stderr).toBe('');
  });

  // Counting by outcome reads the request's signal, and Deno.serve then warns (once a process, on
  // stderr) that it aborts that signal after a successful response: its own line, and nothing else.
  it('counts by outcome on its own server: a 500 gives its token back, a 200 keeps it, once', async () => {
    const { report, stderr } = await inRuntime('outcome', 'runtime-probe.mjs', ['fetchCountsByOutcome']);
    expect(report).toEqual({ checks: { fetchCountsByOutcome: 'ok' } });
    const lines = stderr.split('\n').filter((line) => line !== '' && !DENO_LEGACY_ABORT.test(line));
    expect(lines).toEqual([]);
  });
});

describe('Node.js, the reference', () => {
  it('passes the same probe, but for the Fetch adapter (the other tests run it on Hono)', async () => {
    const checks = 'hotPathOnTheClockThread,closeHandsBack,otherClients,pausedRedisWithinTimeout';
    const { report, stderr } = await runScript('Node-probe', process.execPath, [], {}, 'runtime-probe.mjs', [
      checks,
    ]);
    expect(report).toEqual({
      checks: {
        hotPathOnTheClockThread: 'ok',
        closeHandsBack: 'ok',
        otherClients: 'ok',
        pausedRedisWithinTimeout: 'ok',
      },
    });
    expect(stderr).toBe('');
  });
});
