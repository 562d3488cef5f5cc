/**
 * A bounded load run on loopback: requests per second of `GET /api/items` with no limiter and
 * with each limiter, every server in its own process and autocannon in this one, so that a row
 * divided by the first is what the limiter costs. Redis is `REDIS_URL`, or a throwaway
 * `redis-server` from PATH.
 *
 *   pnpm --filter @tiered-limiter/example-service load
 *
 * Environment: DURATION_S (5 per row), CONNECTIONS (50), KEYS (1000 distinct `x-client` keys, in turn).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type EmbeddedRedis, startEmbeddedRedis } from './embedded-redis.js';
import type { LoadMode } from './load-server.js';

const DURATION_S = Number(process.env.DURATION_S ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const KEYS = Number(process.env.KEYS ?? 1000);
const WARMUP_S = 1;
const START_TIMEOUT_MS = 15_000;

const ROWS: readonly [LoadMode, string][] = [
  ['none', 'no limiter'],
  ['request-memory', 'RequestLimiter · MemoryStore'],
  ['tiered-redis', 'TieredLimiter · Redis'],
  ['request-redis', 'RequestLimiter · Redis'],
];

let embedded: EmbeddedRedis | undefined;
let redisUrl = process.env.REDIS_URL;
if (!redisUrl) {
  embedded = await startEmbeddedRedis();
  redisUrl = embedded.url;
}

const results: { label: string; rps: number; p50: number; p99: number; errors: number }[] = [];
try {
  for (const [mode, label] of ROWS) {
    const { child, url } = await startServer(mode, redisUrl);
    try {
      await run(url, WARMUP_S);
      const result = await run(url, DURATION_S);
      results.push({
        label,
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        errors: result.errors + result.timeouts + result.non2xx,
      });
    } finally {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
  }
} finally {
  await embedded?.stop();
}

const base = results[0]!.rps;
console.log(
  `\n${DURATION_S} s per row, ${CONNECTIONS} connections, ${KEYS} keys, Node ${process.version}, loopback\n`,
);
console.log('| Server | req/s | × no limiter | p50 ms | p99 ms | non-2xx + errors |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
for (const r of results) {
  console.log(
    `| ${r.label} | ${Math.round(r.rps)} | ${(r.rps / base).toFixed(2)} | ${r.p50} | ${r.p99} | ${r.errors} |`,
  );
}

function run(url: string, seconds: number): Promise<autocannon.Result> {
  let next = 0;
  return autocannon({
    url: `${url}/api/items`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => {
          next = (next + 1) % KEYS;
          return { ...request, headers: { ...request.headers, 'x-client': `client-${next}` } };
        },
      },
    ],
  });
}

function startServer(mode: LoadMode, redis: string): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(fileURLToPath(new URL('./load-server.ts', import.meta.url)), {
    env: { ...process.env, MODE: mode, REDIS_URL: redis, LIMIT_PREFIX: `load-${process.pid}-${mode}` },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${mode} server not listening in ${START_TIMEOUT_MS} ms: ${output}`));
    }, START_TIMEOUT_MS);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1]! });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${mode} server exited (${code}): ${output}`));
    });
  });
}
