// What the exercise table cannot see in another JavaScript runtime (Bun, Deno): the parts of the
// two-tier limiter that lean on the runtime rather than on the language. Run by
// test/runtimes.test.ts inside the consumer project of the packed tarballs:
//   <runtime> runtime-probe.mjs <report.json> [check,check,…]
// with REDIS_URL and TL_PREFIX set. Writes { checks: { name: 'ok' | error } } and then returns
// without calling process.exit: the test also holds that the process ends by itself.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { perMinute, perSecond } from '@tiered-limiter/core';
import { fetchRateLimit } from '@tiered-limiter/http';
import {
  createRedisLimiter,
  createTieredLimiter,
  recommendedNodeRedisOptions,
  recommendedRedisOptions,
  recommendedValkeyOptions,
} from '@tiered-limiter/redis';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';

const redisUrl = process.env.REDIS_URL;
const prefix = process.env.TL_PREFIX;
// A second, not 20 ms: a healthy Redis on 2 loaded cores can answer late, and these checks are
// about the runtime, not the failure policy (a decision by it would fail them).
const TIMEOUT_MS = 1000;

/** A Redis limiter's options on `client`, under a prefix of this run and `name`, with `more` over them. */
const onRedis = (client, name, limits, more = {}) => ({
  redis: client,
  prefix: `${prefix}-${name}`,
  limits,
  failurePolicy: 'closed',
  timeoutMs: TIMEOUT_MS,
  ...more,
});

const connect = async () => {
  const client = new Redis(redisUrl, recommendedRedisOptions);
  await new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
  return client;
};

const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A hot key driven at millions of decisions a second for 1.2 s, in slices of 4 ms between which
 * the event loop runs: the limiter must join the shared clock thread (a `worker_threads` worker
 * started from source, writing a `SharedArrayBuffer` under `Atomics.wait`), and with it keep to
 * the limit on both sides: no more than the bucket gives one instance (capacity, the refill over
 * the run and what one lease may borrow ahead), and, since the clock moves and remembered denials
 * end, most of what the refill gives.
 */
async function hotPathOnTheClockThread(client) {
  const capacity = 100;
  const perSec = 200;
  const limiter = createTieredLimiter(
    onRedis(client, 'hot', perSecond(perSec, { burst: capacity, name: 'hot' })),
  );
  let admitted = 0;
  let decisions = 0;
  let onThread = false;
  const started = performance.now();
  try {
    while (performance.now() - started < 1200) {
      const sliceEnd = performance.now() + 4;
      while (performance.now() < sliceEnd) {
        const decision = limiter.tryConsume('k') ?? (await limiter.consume('k'));
        assert.notEqual(decision.tier, 'fallback', 'a decision by the failure policy on a healthy Redis');
        decisions++;
        if (decision.allowed) admitted++;
      }
      onThread ||= limiter.stats().clockThread;
      await yieldToLoop();
    }
  } finally {
    await limiter.close();
  }
  const elapsedSec = (performance.now() - started) / 1000;
  assert.ok(onThread, `the hot path never read the shared clock thread (${decisions} decisions)`);
  // One instance: the bucket's capacity, its refill over the run, and one sync period of refill a
  // lease may borrow ahead (at most a second here), as docs/ACCURACY.md bounds it.
  const most = capacity + perSec * (elapsedSec + 1);
  assert.ok(admitted <= most, `${admitted} admitted in ${elapsedSec.toFixed(2)} s, above ${most}`);
  const ideal = capacity + perSec * elapsedSec;
  assert.ok(
    admitted >= 0.5 * ideal,
    `${admitted} admitted in ${elapsedSec.toFixed(2)} s, of ${ideal} the refill gave`,
  );
}

/**
 * `close()` hands leased tokens back: a lease of at least ten tokens is out (`minBatch`), one is
 * spent, and after `close()` the bucket in Redis holds everything but the one (plus the little a
 * slow refill adds).
 */
async function closeHandsBack(client) {
  const limits = perMinute(1, { burst: 1000, name: 'back' });
  const options = onRedis(client, 'back', limits);
  const tiered = createTieredLimiter({ ...options, lease: { minBatch: 10 } });
  const reader = createRedisLimiter(options);
  try {
    const first = await tiered.consume('k');
    assert.deepEqual([first.allowed, first.tier], [true, 'global']);
    const leased = await reader.peek('k');
    assert.ok(leased.remaining <= 990, `the lease took ${1000 - leased.remaining} tokens, not 10 or more`);
    await tiered.close();
    const after = await reader.peek('k');
    assert.ok(
      after.remaining >= 999 && after.remaining <= 1000,
      `${after.remaining} left after close(), not 999`,
    );
  } finally {
    await tiered.close();
    await reader.close();
  }
}

/**
 * The other two clients the store takes, node-redis and iovalkey, on the runtime's sockets: a
 * two-tier limiter on each admits the bucket's capacity and denies the next request by Redis.
 */
async function otherClients() {
  const { hostname, port } = new URL(redisUrl);
  const nodeRedis = createClient({
    ...recommendedNodeRedisOptions,
    socket: { ...recommendedNodeRedisOptions.socket, host: hostname, port: Number(port) },
  });
  await nodeRedis.connect();
  const valkey = new Valkey(redisUrl, recommendedValkeyOptions);
  try {
    for (const [name, client] of [
      ['node-redis', nodeRedis],
      ['iovalkey', valkey],
    ]) {
      const limiter = createTieredLimiter(onRedis(client, name, perMinute(1, { burst: 3, name: 'clients' })));
      try {
        const decisions = [];
        for (let i = 0; i < 4; i++) decisions.push(limiter.tryConsume('k') ?? (await limiter.consume('k')));
        assert.deepEqual(
          decisions.map((d) => [d.allowed, d.tier === 'fallback']),
          [
            [true, false],
            [true, false],
            [true, false],
            [false, false],
          ],
          name,
        );
      } finally {
        await limiter.close();
      }
    }
  } finally {
    await nodeRedis.quit();
    await valkey.quit();
  }
}

/**
 * The failure policy while Redis is paused (`CLIENT PAUSE`, the server's own): each limiter's
 * decision on a key it has no tokens for comes back within the default 20 ms timeout plus a margin
 * for a loaded machine, made by the policy it declared; once the pause ends, Redis decides again.
 * The guard's timer and its one more turn of the event loop are the runtime's to keep.
 */
async function pausedRedisWithinTimeout(client) {
  const limits = perSecond(10, { name: 'paused' });
  // The default timeout, 20 ms: `undefined` counts as absent.
  const policy = (failurePolicy, more = {}) =>
    onRedis(client, failurePolicy, limits, { failurePolicy, timeoutMs: undefined, ...more });
  const made = [
    ['closed', createRedisLimiter(policy('closed')), false],
    ['open', createTieredLimiter(policy('open')), true],
    ['local', createTieredLimiter(policy('local', { instances: 2 })), true],
  ];
  try {
    for (const [policy, limiter] of made) {
      const warm = await limiter.consume('warm');
      assert.notEqual(warm.tier, 'fallback', `${policy}: a policy decision before the pause`);
    }
    await client.call('CLIENT', 'PAUSE', '600', 'ALL');
    for (const [policy, limiter, allowed] of made) {
      const started = performance.now();
      const decision = await limiter.consume(`cold-${policy}`);
      const tookMs = performance.now() - started;
      assert.deepEqual(
        [decision.tier, decision.policy, decision.allowed],
        ['fallback', policy, allowed],
        policy,
      );
      assert.ok(tookMs <= 20 + 80, `${policy}: ${tookMs.toFixed(1)} ms with Redis paused (timeout 20 ms)`);
    }
    for (const [policy, limiter] of made) {
      const until = performance.now() + 5000;
      let decision;
      do {
        decision = await limiter.consume(`after-${policy}`);
        if (decision.tier !== 'fallback') break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      } while (performance.now() < until);
      assert.notEqual(decision.tier, 'fallback', `${policy}: still by the policy 5 s after the pause`);
    }
  } finally {
    await Promise.all(made.map(([, limiter]) => limiter.close()));
  }
}

/**
 * `fetchRateLimit` on the runtime's own HTTP server (`Bun.serve`, `Deno.serve`), with the client
 * address the server gives: a limit of two a minute admits two GETs with their `RateLimit`
 * headers and answers the third with a 429 problem document and `Retry-After`.
 */
async function fetchAdapterOnNativeServer(client) {
  const limiter = createRedisLimiter(onRedis(client, 'http', perMinute(2, { name: 'http' })));
  const rateLimit = fetchRateLimit({ limiter });
  const keys = [];
  const handle = async (request, address) => {
    const result = await rateLimit(request, address);
    keys.push(result.decision.key);
    return result.allowed ? result.finish(new Response('ok')) : result.response;
  };
  const server = serveNatively(handle);
  try {
    const statuses = [];
    let last;
    for (let i = 0; i < 3; i++) {
      last = await fetch(`${server.url}items`);
      statuses.push(last.status);
      if (i < 2) {
        assert.equal(await last.text(), 'ok');
        assert.match(last.headers.get('ratelimit-policy') ?? '', /"http"/);
      }
    }
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.equal(last.headers.get('content-type'), 'application/problem+json');
    assert.ok(Number(last.headers.get('retry-after')) >= 1, `Retry-After ${last.headers.get('retry-after')}`);
    await last.text();
    assert.deepEqual(keys, ['127.0.0.1', '127.0.0.1', '127.0.0.1']);
  } finally {
    await server.stop();
    await limiter.close();
  }
}

/**
 * `skipFailedRequests` on the runtime's own server: a request answered 500 gives its token back
 * and one answered 200 keeps it, once, though the runtime may abort the request's signal after the
 * response is sent (`Deno.serve` does, and says so on stderr: this check runs in a process apart).
 */
async function fetchCountsByOutcome(client) {
  const limiter = createRedisLimiter(onRedis(client, 'outcome', perMinute(3, { name: 'outcome' })));
  const rateLimit = fetchRateLimit({ limiter, skipFailedRequests: true });
  const handle = async (request, address) => {
    const result = await rateLimit(request, address);
    if (!result.allowed) return result.response;
    const failed = new URL(request.url).pathname === '/fail';
    return result.finish(new Response(failed ? 'no' : 'ok', { status: failed ? 500 : 200 }));
  };
  const server = serveNatively(handle);
  const left = async (expected) => {
    // A refund is a store call made after the response: it lands a little later.
    const until = performance.now() + 2000;
    let remaining;
    do {
      remaining = (await limiter.peek('127.0.0.1')).remaining;
      if (remaining === expected) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    } while (performance.now() < until);
    assert.equal(remaining, expected, 'tokens left');
  };
  try {
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${server.url}fail`);
      assert.equal(response.status, 500, await response.text());
      await left(3);
    }
    const ok = await fetch(`${server.url}ok`);
    assert.equal(ok.status, 200, await ok.text());
    await left(2);
    // Past the runtime's abort of the finished request's signal: still counted once, as a success.
    await new Promise((resolve) => setTimeout(resolve, 100));
    await left(2);
  } finally {
    await server.stop();
    await limiter.close();
  }
}

function serveNatively(handle) {
  if (globalThis.Bun !== undefined) {
    const server = globalThis.Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: (request, srv) => handle(request, srv.requestIP(request)?.address),
    });
    return { url: `http://127.0.0.1:${server.port}/`, stop: () => server.stop(true) };
  }
  if (globalThis.Deno !== undefined) {
    const server = globalThis.Deno.serve(
      { hostname: '127.0.0.1', port: 0, onListen: () => {} },
      (request, info) => handle(request, info.remoteAddr.hostname),
    );
    return { url: `http://127.0.0.1:${server.addr.port}/`, stop: () => server.shutdown() };
  }
  throw new Error('no native Fetch API server in this runtime (Bun.serve or Deno.serve)');
}

async function check(body) {
  try {
    await body();
    return 'ok';
  } catch (error) {
    return String(error?.stack ?? error);
  }
}

const native = globalThis.Bun !== undefined || globalThis.Deno !== undefined;
const ALL = {
  hotPathOnTheClockThread,
  closeHandsBack,
  otherClients,
  pausedRedisWithinTimeout,
  ...(native ? { fetchAdapterOnNativeServer, fetchCountsByOutcome } : {}),
};
// The checks to run, comma-separated (all of them by default).
const wanted = process.argv[3]?.split(',') ?? Object.keys(ALL);
const client = await connect();
const checks = {};
try {
  for (const name of wanted) {
    const body = ALL[name];
    checks[name] = body === undefined ? `no such check here: ${name}` : await check(() => body(client));
  }
} finally {
  await client.quit();
}
writeFileSync(process.argv[2], JSON.stringify({ checks }));
