/**
 * How `pnpm bench` gets its Redis, and lets go of it: a REDIS_URL that refuses or never answers
 * ends the run with a clear error, and a run interrupted by a SIGINT to its own process stops the
 * redis-server it started (not 127.0.0.1:6379) and removes that server's directory. Each case runs
 * the bench's quick mode on one filtered section (5 rows, a few seconds). A row's process ends with
 * the bench.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, LOOPBACK, portIsFree, type RedisServer, startRedis } from '@tiered-limiter/test-harness';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RowMessage, RowOrders } from '../bench/src/row-process.js';
import { benchSettings } from '../bench/src/section.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BENCH = join(ROOT, 'bench');
const FILTER = 'RedisStore.take · 1 hot key · 100 at 10/s';

interface Bench {
  readonly child: ChildProcess;
  /** Everything printed on stderr so far. */
  stderr(): string;
  /** Resolves the first match of `pattern` on stderr; rejects if the bench exits first. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
  /** The exit: code, or the signal that ended it. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function bench(env: NodeJS.ProcessEnv): Bench {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', '--quick', '--filter', FILTER], {
    cwd: BENCH,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  const watchers = new Set<() => void>();
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString();
    for (const watch of watchers) watch();
  });
  // 'exit', not 'close': a row process outlives the bench a moment and holds its stderr open.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stderr: () => err,
    exited,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const watch = () => {
          const match = pattern.exec(err);
          if (match === null) return;
          watchers.delete(watch);
          resolve(match);
        };
        watchers.add(watch);
        watch();
        void exited.then(() => reject(new Error(`bench exited before ${pattern}:\n${err}`)));
      }),
  };
}

function withoutRedisUrl(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.REDIS_URL;
  return env;
}

beforeAll(() => {
  for (const pkg of ['core', 'local', 'redis']) {
    if (!existsSync(join(ROOT, 'packages', pkg, 'dist', 'index.js'))) {
      throw new Error(
        `packages/${pkg}/dist is missing: run \`pnpm build\` before this test (the bench loads dist)`,
      );
    }
  }
});

describe('pnpm bench on a REDIS_URL it cannot use', () => {
  let silent: Server;
  const sockets = new Set<Socket>();
  let silentPort: number;

  beforeAll(async () => {
    // Accepts connections and never answers: a port that is not Redis.
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', () => {});
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, LOOPBACK, resolve));
    silentPort = (silent.address() as { port: number }).port;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('says so and exits 1 when nothing listens there', async () => {
    const port = await freePort();
    const run = bench({ ...process.env, REDIS_URL: `redis://${LOOPBACK}:${port}` });
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(run.stderr()).toMatch(/Cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+\/?: connect ECONNREFUSED/);
  }, 60_000);

  it('says so and exits 1 when it accepts but never answers, after 10 s rather than never', async () => {
    const run = bench({ ...process.env, REDIS_URL: `redis://${LOOPBACK}:${silentPort}` });
    const timer = setTimeout(() => run.child.kill('SIGKILL'), 60_000);
    try {
      expect(await run.exited).toEqual({ code: 1, signal: null });
    } finally {
      clearTimeout(timer);
    }
    expect(run.stderr()).toMatch(/Cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+\/?: no answer in 10 s\./);
  }, 90_000);
});

describe('pnpm bench on a redis-server of its own', () => {
  it('stops that server and removes its directory when a SIGINT reaches the bench alone', async () => {
    const run = bench(withoutRedisUrl());
    const [, port] = await run.waitFor(/Redis: a throwaway redis-server \S+ from PATH on 127\.0\.0\.1:(\d+)/);
    const serverPort = Number(port);
    expect(serverPort).not.toBe(6379);
    const client = () =>
      new Redis({ host: LOOPBACK, port: serverPort, lazyConnect: true, retryStrategy: () => null }).on(
        'error',
        () => {},
      );
    try {
      const admin = client();
      await admin.connect();
      const [, dir] = (await admin.config('GET', 'dir')) as [string, string];
      admin.disconnect();
      expect(dir).toMatch(/tl-redis-/);
      expect(existsSync(dir)).toBe(true);
      // Rows begin: the run is under way, a few seconds from its end.
      await run.waitFor(/Quick run: \d+ tasks/);
      run.child.kill('SIGINT');
      // 130: the bench exited on the signal (a run that had finished would exit 0).
      expect(await run.exited).toEqual({ code: 130, signal: null });
      expect(await portIsFree(serverPort)).toBe(true);
      expect(existsSync(dir)).toBe(false);
    } finally {
      // Before the fix the server outlived the bench: stop it here rather than leave it running.
      if (!(await portIsFree(serverPort))) {
        const orphan = client();
        await orphan
          .connect()
          .then(() => orphan.call('SHUTDOWN', 'NOSAVE'))
          .catch(() => {});
        orphan.disconnect();
      }
    }
  }, 120_000);
});

describe("a bench row's process", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis.stop());

  it('ends when the bench goes, rather than running its row on for no one', async () => {
    // A row that measures for 20 s: a process that finished its row first would outlive the bench by
    // that long (before the fix it died at its next message to the bench, the row's end).
    const orders: RowOrders = {
      section: 'throughput',
      tasks: [{ name: FILTER, prefix: `tlbench-rowgone-${process.pid}-` }],
      settings: { ...benchSettings(false, 2), measureMs: 20_000 },
      url: redis.url,
    };
    const row = fork(join(BENCH, 'src', 'row-worker.ts'), [JSON.stringify(orders)], {
      cwd: BENCH,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    const exited = new Promise<number>((resolve) => row.once('exit', () => resolve(Date.now())));
    try {
      // The measurement has begun: its probe window opens.
      await new Promise<void>((resolve, reject) => {
        row.on('message', (message: RowMessage) => {
          if (message.type === 'probe-start') resolve();
        });
        void exited.then(() => reject(new Error('the row process exited before its measurement')));
      });
      // What the bench's exit does to the channel.
      row.disconnect();
      const gone = Date.now();
      const late = setTimeout(() => row.kill('SIGKILL'), 10_000);
      const exitedAt = await exited;
      clearTimeout(late);
      expect(exitedAt - gone).toBeLessThan(2_000);
    } finally {
      if (row.exitCode === null && row.signalCode === null) row.kill('SIGKILL');
    }
  }, 60_000);
});
