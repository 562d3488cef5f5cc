// The exercise table of the dist test: one case per exported function or class of each package,
// run from the packed tarballs, once loaded with import() and once with require(). The test lists
// each package's exports at run time and fails on an export with no case here (and on a case
// whose export is gone), so a new export cannot slip through untried: add one entry below.
//
// A case makes the thing, makes one real call (on a real Redis or a real HTTP server where it
// needs one), checks the answer and closes what it opened. Plain JavaScript on purpose: it runs
// in a consumer project outside the workspace, with no TypeScript loader and no vitest.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';

/**
 * @typedef {object} Modules every package loaded the same way (all import() or all require())
 * @property {any} core
 * @property {any} local
 * @property {any} redis
 * @property {any} http
 * @property {any} otel
 * @property {any} ioredis
 * @property {any} express
 * @property {any} fastify
 *
 * @typedef {object} Context
 * @property {() => Promise<any>} redis a connected ioredis client of the test's Redis (shared)
 * @property {string} prefix a key prefix of this run alone
 *
 * @typedef {(m: Modules, ctx: Context) => unknown} Exercise
 */

const spec = (m) => m.core.perSecond(10, { name: 'api' });

/** An error class: constructed, it is the library's error with its stable `code`. */
const errorCase = (name, args, code) => (m) => {
  const error = new m.core[name](...args);
  assert.ok(
    error instanceof m.core.TieredLimiterError && error instanceof Error,
    `${name} is a TieredLimiterError`,
  );
  assert.equal(error.code, code);
  assert.equal(error.name, name);
};

/** Starts a node:http server on a free loopback port, makes `count` GETs, returns the responses. */
async function serve(handler, count = 1) {
  const server = createServer((req, res) => {
    Promise.resolve(handler(req, res)).catch((error) => {
      res.statusCode = 500;
      res.end(String(error?.stack ?? error));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await getAll(`http://127.0.0.1:${server.address().port}/`, count);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

async function getAll(url, count) {
  const responses = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(url);
    responses.push({ status: res.status, headers: Object.fromEntries(res.headers), body: await res.text() });
  }
  return responses;
}

/** Options of a store-backed limiter on a MemoryStore: the one place to add a new required option. */
const onMemory = (m) => ({ store: new m.local.MemoryStore(), limits: spec(m), failurePolicy: 'closed' });

/**
 * Options of a Redis factory: a connected client, and a prefix of this run and this case. The
 * timeout is 1 s, not 20 ms: on 2 loaded cores a healthy Redis can answer late, and these cases
 * check the build, not the failure policy.
 */
const onRedis = async (m, ctx, name) => ({
  redis: await ctx.redis(),
  prefix: `${ctx.prefix}-${name}`,
  limits: spec(m),
  failurePolicy: 'closed',
  timeoutMs: 1000,
});

/** A limiter of one request per minute on a MemoryStore, for the HTTP cases. */
const onePerMinute = (m) =>
  new m.local.RequestLimiter({ ...onMemory(m), limits: m.core.perMinute(1, { name: 'http' }) });

/** Two GETs through a limit of one a minute: the first passes with the headers, the second is a 429. */
function assertSecondDenied([first, second]) {
  assert.equal(first.status, 200, first.body);
  assert.equal(first.body, 'ok');
  assert.match(first.headers['ratelimit-policy'] ?? '', /"http"/);
  assert.equal(second.status, 429, second.body);
  assert.equal(second.headers['content-type'], 'application/problem+json');
}

/** One decision of a per-request limiter on a limit of 10: the store admits it. Then closes it. */
async function usePerRequest(limiter) {
  const decision = await limiter.consume('k');
  await limiter.close();
  assert.deepEqual([decision.allowed, decision.remaining, decision.tier], [true, 9, 'global']);
}

/** Two decisions of a two-tier limiter (the second from its lease when it can). Then closes it. */
async function useTiered(limiter) {
  const first = await limiter.consume('k');
  const second = limiter.tryConsume('k') ?? (await limiter.consume('k'));
  await limiter.close();
  assert.deepEqual([first.allowed, second.allowed], [true, true]);
  assert.equal(first.tier === 'fallback' || second.tier === 'fallback', false);
}

/** @type {Record<string, Record<string, Exercise>>} */
export const exercises = {
  '@tiered-limiter/core': {
    // core's `internal` namespace: the shared arithmetic and validators the other packages use.
    internal: async (m) => {
      const cases = {
        advance: (m) => {
          const state = { tokens: 0, updatedAtMs: 0 };
          m.core.internal.advance(state, spec(m), 100);
          assert.deepEqual(state, { tokens: 1, updatedAtMs: 100 });
        },
        covers: (m) => {
          assert.equal(m.core.internal.covers(1 - 1e-12, 1), true);
          assert.equal(m.core.internal.covers(0.5, 1), false);
        },
        fullBucket: (m) =>
          assert.deepEqual(m.core.internal.fullBucket(spec(m), 5), { tokens: 10, updatedAtMs: 5 }),
        isFullAt: (m) => {
          const state = { tokens: 9, updatedAtMs: 0 };
          assert.equal(m.core.internal.isFullAt(state, spec(m), 50), false);
          assert.equal(m.core.internal.isFullAt(state, spec(m), 100), true);
        },
        msUntilFull: (m) => assert.equal(m.core.internal.msUntilFull(9, spec(m)), 100),
        msUntilTokens: (m) => assert.equal(m.core.internal.msUntilTokens(0, 2, spec(m)), 200),
        refilled: (m) => assert.equal(m.core.internal.refilled(0, 250, spec(m)), 2.5),
        denyDecisionLike: (m) => {
          const denied = m.core.denyDecision(40, 0, 900, spec(m), 'lease');
          assert.equal(m.core.internal.denyDecisionLike(denied, 39.5, 0, 900, spec(m), 'lease'), denied);
          assert.deepEqual(
            m.core.internal.denyDecisionLike(denied, 41, 0, 900, spec(m), 'lease').retryAfterMs,
            41,
          );
        },
        tryTake: (m) => {
          const limit = m.core.perSecond(1);
          const state = m.core.internal.fullBucket(limit, 0);
          assert.deepEqual(
            [m.core.internal.tryTake(state, limit, 1, 0), m.core.internal.tryTake(state, limit, 1, 0)],
            [true, false],
          );
        },
        wholeTokens: (m) =>
          assert.deepEqual(
            [m.core.internal.wholeTokens(2.9999999999), m.core.internal.wholeTokens(-1)],
            [3, 0],
          ),
        assertLimits: (m) => {
          const limits = m.core.internal.assertLimits('limits', spec(m));
          assert.equal(limits.length, 1);
          assert.ok(Object.isFrozen(limits));
          assert.throws(() => m.core.internal.assertLimits('limits', []), m.core.ConfigError);
        },
        smallestCapacity: (m) =>
          assert.equal(m.core.internal.smallestCapacity([spec(m), m.core.perMinute(3)]), 3),
        tightestWhenFull: (m) =>
          assert.equal(
            m.core.internal.tightestWhenFull([m.core.perSecond(5), m.core.perMinute(5)]).name,
            '5pm',
          ),
        assertCost: (m) => {
          assert.equal(m.core.internal.assertCost(2, 5), 2);
          assert.throws(() => m.core.internal.assertCost(6, 5), m.core.CostExceedsCapacityError);
        },
        assertKey: (m) => {
          assert.equal(m.core.internal.assertKey('k'), 'k');
          assert.throws(() => m.core.internal.assertKey(1), m.core.ArgumentError);
        },
        assertStore: (m) => {
          const store = new m.local.MemoryStore();
          assert.equal(m.core.internal.assertStore(store), store);
          assert.throws(() => m.core.internal.assertStore({}), m.core.ConfigError);
        },
        isTighter: (m) =>
          assert.deepEqual(
            [m.core.internal.isTighter(10, 0, 0, 5, 0, 0), m.core.internal.isTighter(5, 0, 0, 10, 0, 0)],
            [true, false],
          ),
        assertInteger: (m) => {
          assert.equal(m.core.internal.assertInteger('n', 3), 3);
          assert.throws(() => m.core.internal.assertInteger('n', 1.5), m.core.ConfigError);
        },
        assertPositive: (m) => {
          assert.equal(m.core.internal.assertPositive('n', 0.5), 0.5);
          assert.throws(() => m.core.internal.assertPositive('n', 0), m.core.ConfigError);
        },
        assertInRange: (m) => {
          assert.equal(m.core.internal.assertInRange('n', 5, 1, 10), 5);
          assert.throws(() => m.core.internal.assertInRange('n', 11, 1, 10), m.core.ConfigError);
        },
        assertOneOf: (m) => {
          assert.equal(m.core.internal.assertOneOf('p', 'open', ['open', 'closed']), 'open');
          assert.throws(
            () => m.core.internal.assertOneOf('p', 'shut', ['open', 'closed']),
            m.core.ConfigError,
          );
        },
      };
      for (const run of Object.values(cases)) await run(m);
    },
    applyBucketOp: (m) => {
      const limit = spec(m);
      const states = [m.core.freshSharedBucket(limit, 0)];
      const op = { key: 'k', limits: [limit], reserve: { want: 4, min: 1, holdMs: 1000 } };
      const lease = m.core.applyBucketOp(states, [limit], op, 0);
      assert.deepEqual([lease.ok, lease.granted, lease.remaining], [true, 4, 6]);
      assert.equal(m.core.isSharedBucketFull(states[0], limit), false);
    },
    freshSharedBucket: (m) =>
      assert.deepEqual(m.core.freshSharedBucket(spec(m), 7), { tokens: 10, updatedAtUs: 7, held: [] }),
    isSharedBucketFull: (m) =>
      assert.equal(m.core.isSharedBucketFull(m.core.freshSharedBucket(spec(m), 0), spec(m)), true),
    allowDecision: (m) =>
      assert.deepEqual(m.core.allowDecision(3, 700, spec(m), 'local'), {
        allowed: true,
        remaining: 3,
        retryAfterMs: 0,
        resetMs: 700,
        limit: 10,
        name: 'api',
        tier: 'local',
        policy: undefined,
        error: undefined,
        shadowDenied: false,
      }),
    denyDecision: (m) => {
      const denied = m.core.denyDecision(0.2, 0, 1000, spec(m), 'global');
      assert.equal(denied.allowed, false);
      assert.equal(denied.retryAfterMs, 1);
    },
    shadowOf: (m) => {
      const shadow = m.core.shadowOf(m.core.denyDecision(100, 0, 1000, spec(m), 'global'));
      assert.deepEqual([shadow.allowed, shadow.shadowDenied, shadow.retryAfterMs], [true, true, 0]);
    },
    TieredLimiterError: errorCase('TieredLimiterError', ['ERR_TL_TEST', 'a message'], 'ERR_TL_TEST'),
    ArgumentError: errorCase('ArgumentError', ['key', 1, 'a string'], 'ERR_TL_ARGUMENT'),
    ConfigError: errorCase('ConfigError', ['timeoutMs', -1, 'an integer'], 'ERR_TL_CONFIG'),
    CostExceedsCapacityError: errorCase('CostExceedsCapacityError', [5, 2], 'ERR_TL_COST_EXCEEDS_CAPACITY'),
    StoreError: errorCase('StoreError', ['down'], 'ERR_TL_STORE'),
    StoreReplyError: errorCase('StoreReplyError', ['OOM', 'refused'], 'ERR_TL_STORE_REPLY'),
    StoreTimeoutError: errorCase('StoreTimeoutError', [20], 'ERR_TL_STORE_TIMEOUT'),
    CircuitOpenError: errorCase('CircuitOpenError', [], 'ERR_TL_CIRCUIT_OPEN'),
    StoreWithdrawnError: errorCase('StoreWithdrawnError', [], 'ERR_TL_STORE_WITHDRAWN'),
    ClosedError: errorCase('ClosedError', ['limiter'], 'ERR_TL_CLOSED'),
    defineLimit: (m) => {
      const limit = m.core.defineLimit({ capacity: 20, refillPerSecond: 5, name: 'api' });
      assert.deepEqual(
        { ...limit },
        { name: 'api', capacity: 20, refillPerSecond: 5, refillPerMs: 0.005, fillMs: 4000 },
      );
      assert.throws(() => m.core.defineLimit({ capacity: 0, refillPerSecond: 1 }), m.core.ConfigError);
    },
    perSecond: (m) => assert.equal(m.core.perSecond(10).refillPerSecond, 10),
    perMinute: (m) => assert.equal(m.core.perMinute(120).refillPerSecond, 2),
    perHour: (m) => assert.equal(m.core.perHour(3600, { burst: 100 }).capacity, 100),
  },

  '@tiered-limiter/local': {
    LocalLimiter: (m) => {
      // A clock that stands still: the third decision's wait is exact whatever the machine's load.
      const limiter = new m.local.LocalLimiter({ limits: m.core.perSecond(2), clock: { now: () => 0 } });
      const decisions = [limiter.tryConsume('k'), limiter.tryConsume('k'), limiter.tryConsume('k')];
      assert.deepEqual(
        decisions.map((d) => [d.allowed, d.tier]),
        [
          [true, 'local'],
          [true, 'local'],
          [false, 'local'],
        ],
      );
      assert.equal(decisions[2].retryAfterMs, 500);
      // local's build requires core's build: its errors are the same classes the user imports.
      assert.throws(() => new m.local.LocalLimiter({ limits: spec(m), maxKeys: 0 }), m.core.ConfigError);
    },
    MemoryStore: async (m) => {
      const store = new m.local.MemoryStore();
      const reply = await store.apply({ key: 'k', limits: [spec(m)], take: 1 });
      assert.deepEqual([reply.ok, reply.remaining, reply.limitIndex], [true, 9, 0]);
    },
    RequestLimiter: (m) => usePerRequest(new m.local.RequestLimiter(onMemory(m))),
    TieredLimiter: (m) => useTiered(new m.local.TieredLimiter(onMemory(m))),
    StoreGuard: async (m) => {
      const guard = new m.local.StoreGuard({ timeoutMs: 1000 });
      assert.deepEqual(await guard.run(() => Promise.resolve(42)), { ok: true, value: 42 });
      const failed = await guard.run(() => Promise.reject(new Error('down')));
      assert.equal(failed.ok, false);
      assert.ok(failed.error instanceof m.core.StoreError);
    },
  },

  '@tiered-limiter/redis': {
    RedisStore: async (m, ctx) => {
      const store = new m.redis.RedisStore({ redis: await ctx.redis(), prefix: `${ctx.prefix}-store` });
      const reply = await store.apply({ key: 'k', limits: [spec(m)], take: 1 });
      assert.deepEqual([reply.ok, reply.remaining, reply.limitIndex], [true, 9, 0]);
    },
    createRedisLimiter: async (m, ctx) =>
      usePerRequest(m.redis.createRedisLimiter(await onRedis(m, ctx, 'request'))),
    createTieredLimiter: async (m, ctx) =>
      useTiered(m.redis.createTieredLimiter(await onRedis(m, ctx, 'tiered'))),
    assertPrefix: (m) => {
      assert.equal(m.redis.assertPrefix('api:v1'), 'api:v1');
      assert.throws(() => m.redis.assertPrefix('has space'), m.core.ConfigError);
    },
    keyTag: (m) => {
      assert.equal(m.redis.keyTag('user42'), 'user42');
      assert.notEqual(m.redis.keyTag('a{b}'), 'a{b}');
    },
    bucketKey: (m) => assert.equal(m.redis.bucketKey('tl', 'user42', 'api'), 'tl:{user42}:api'),
    bucketKeys: (m) => assert.deepEqual(m.redis.bucketKeys('tl', 'user42', [spec(m)]), ['tl:{user42}:api']),
    recommendedRetryStrategy: (m) => {
      const delays = [1, 2, 100].map((times) => m.redis.recommendedRetryStrategy(times));
      assert.deepEqual(delays, [50, 100, 1000]);
    },
    recommendedNodeRedisReconnectStrategy: (m) => {
      const delays = [0, 1, 99].map((retries) => m.redis.recommendedNodeRedisReconnectStrategy(retries));
      assert.deepEqual(delays, [50, 100, 1000]);
    },
    reconnectOnReadonly: (m) => {
      assert.equal(
        m.redis.reconnectOnReadonly(new Error("READONLY You can't write against a read only replica.")),
        true,
      );
      assert.equal(m.redis.reconnectOnReadonly(new Error('WRONGTYPE')), false);
    },
    shardOf: (m) => {
      assert.equal(m.redis.shardOf('a', 2 ** 31), 0xe40c292c % 2 ** 31);
      assert.equal(m.redis.bucketKeys('tl', 'a', [spec(m)], 4)[0], `tl:{s${m.redis.shardOf('a', 4)}}:a:api`);
    },
    whenReady: async (m, ctx) => {
      const client = await ctx.redis();
      await m.redis.whenReady(client, 1000);
      await assert.rejects(m.redis.whenReady({}), m.core.ConfigError);
    },
  },

  '@tiered-limiter/otel': {
    observeLimiter: async (m) => {
      const meter = recordingMeter();
      const limiter = new m.local.RequestLimiter(onMemory(m));
      await limiter.consume('k');
      const observation = m.otel.observeLimiter(limiter, meter, { attributes: { name: 'x' } });
      const points = meter.collect();
      assert.deepEqual(points['tiered_limiter.decisions'], [
        [1, { name: 'x', 'tiered_limiter.outcome': 'allowed' }],
        [0, { name: 'x', 'tiered_limiter.outcome': 'denied' }],
      ]);
      assert.equal(points['tiered_limiter.store.operations'][0][0], 1);
      observation.stop();
      assert.deepEqual(meter.collect(), {});
      await limiter.close();
    },
    instrumentStore: async (m) => {
      const meter = recordingMeter();
      const store = m.otel.instrumentStore(new m.local.MemoryStore(), meter);
      const reply = await store.apply({ key: 'k', limits: [spec(m)], take: 1 });
      assert.equal(reply.remaining, 9);
      const [[seconds, attributes]] = meter.records['tiered_limiter.store.operation.duration'];
      assert.ok(seconds >= 0 && seconds < 1);
      assert.deepEqual(attributes, { 'tiered_limiter.store.operation': 'take' });
    },
    operationOf: (m) => {
      const limits = [spec(m)];
      assert.equal(
        m.otel.operationOf({ key: 'k', limits, reserve: { want: 2, min: 1, holdMs: 1000 } }),
        'reserve',
      );
      assert.equal(m.otel.operationOf({ key: 'k', limits, credit: 1 }), 'settle');
      assert.equal(m.otel.operationOf({ key: 'k', limits }), 'peek');
    },
  },

  '@tiered-limiter/http': {
    ipKey: (m) => {
      assert.equal(m.http.ipKey('2001:db8:0:abcd::1'), '2001:db8:0:ab00::/56');
      assert.equal(m.http.ipKey('::ffff:203.0.113.7'), '203.0.113.7');
    },
    createRateLimit: async (m) => {
      const rateLimit = m.http.createRateLimit({ limiter: onePerMinute(m) });
      assertSecondDenied(
        await serve(async (req, res) => {
          if (await rateLimit(req, res)) res.end('ok');
        }, 2),
      );
    },
    createRateLimitCheck: async (m) => {
      const check = m.http.createRateLimitCheck({ limiter: onePerMinute(m) });
      const [response] = await serve(async (req, res) => res.end(JSON.stringify(await check(req, req))));
      const outcome = JSON.parse(response.body);
      assert.equal(outcome.allowed, true);
      assert.match(outcome.headers['RateLimit-Policy'], /"http"/);
    },
    writeOutcome: async (m) => {
      const check = m.http.createRateLimitCheck({ limiter: onePerMinute(m) });
      assertSecondDenied(
        await serve(async (req, res) => {
          if (m.http.writeOutcome(res, await check(req, req))) res.end('ok');
        }, 2),
      );
    },
    expressRateLimit: async (m) => {
      const app = m.express();
      app.use(m.http.expressRateLimit({ limiter: onePerMinute(m) }));
      app.get('/', (_req, res) => res.send('ok'));
      assertSecondDenied(await serve(app, 2));
    },
    fastifyRateLimit: async (m) => {
      const app = m.fastify();
      app.addHook('onRequest', m.http.fastifyRateLimit({ limiter: onePerMinute(m) }));
      app.get('/', async () => 'ok');
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        assertSecondDenied(await getAll(`http://127.0.0.1:${app.server.address().port}/`, 2));
      } finally {
        await app.close();
      }
    },
    fetchRateLimit: async (m) => {
      const rateLimit = m.http.fetchRateLimit({ limiter: onePerMinute(m) });
      const get = () => new Request('http://127.0.0.1/items');
      const first = await rateLimit(get(), '127.0.0.1');
      assert.equal(first.allowed, true);
      assert.equal(first.decision.key, '127.0.0.1');
      assert.match(first.finish(new Response('ok')).headers.get('ratelimit-policy') ?? '', /"http"/);
      const second = await rateLimit(get(), '127.0.0.1');
      assert.equal(second.response.status, 429);
      assert.equal(second.response.headers.get('content-type'), 'application/problem+json');
    },
    clientIp: async (m) => {
      const [response] = await serve((req, res) => res.end(m.http.clientIp(req)));
      assert.equal(response.body, '127.0.0.1');
    },
    rateLimitPolicy: (m) => assert.match(m.http.rateLimitPolicy(spec(m)).header, /^"api";/),
    rateLimitHeaders: (m) => {
      const decision = m.core.allowDecision(9, 100, spec(m), 'global');
      const headers = m.http.rateLimitHeaders(decision, m.http.rateLimitPolicy(spec(m)));
      assert.match(headers['RateLimit-Policy'], /"api"/);
      assert.match(headers.RateLimit, /"api"/);
    },
    defaultProblem: (m) => {
      const decision = m.core.denyDecision(2000, 0, 2000, spec(m), 'global');
      const problem = m.http.defaultProblem({ decision, status: 429, retryAfterSeconds: 2 });
      assert.deepEqual(
        [problem.type, problem.status, problem.title],
        ['about:blank', 429, 'Too Many Requests'],
      );
    },
  },
};

/**
 * A Meter of the OpenTelemetry API's shape that keeps what it is given: synchronous records by
 * instrument name, and the batch callbacks, which `collect()` runs. The dist test installs only
 * the API (an optional peer of the otel package), not an SDK.
 */
function recordingMeter() {
  const records = {};
  const callbacks = new Set();
  const push = (into, name, value, attributes) => {
    into[name] = [...(into[name] ?? []), [value, attributes]];
  };
  const instrument = (name) => ({
    name,
    add: (value, attributes) => push(records, name, value, attributes),
    record: (value, attributes) => push(records, name, value, attributes),
  });
  return {
    records,
    createCounter: instrument,
    createHistogram: instrument,
    createObservableCounter: instrument,
    createObservableUpDownCounter: instrument,
    createObservableGauge: instrument,
    addBatchObservableCallback: (callback) => callbacks.add(callback),
    removeBatchObservableCallback: (callback) => callbacks.delete(callback),
    collect() {
      const points = {};
      for (const callback of callbacks) {
        callback({ observe: (i, value, attributes) => push(points, i.name, value, attributes) });
      }
      return points;
    },
  };
}

const CASE_TIMEOUT_MS = 10_000;

/**
 * Loads every package with `load` (import() or require()), lists each one's exports, and runs
 * the cases. Returns, per package, its export names with their `typeof`, the constants' values,
 * and each case's outcome (`ok` or the error), plus the function exports with no case and the
 * cases with no export.
 */
export async function exerciseAll(load, { redisUrl, prefix }) {
  const interop = (mod) => mod.default ?? mod;
  const m = {
    core: await load('@tiered-limiter/core'),
    local: await load('@tiered-limiter/local'),
    redis: await load('@tiered-limiter/redis'),
    http: await load('@tiered-limiter/http'),
    otel: await load('@tiered-limiter/otel'),
    ioredis: await load('ioredis'),
    express: interop(await load('express')),
    fastify: interop(await load('fastify')),
  };
  let client;
  const ctx = {
    prefix,
    redis: async () => {
      if (!client) {
        client = new m.ioredis.Redis(redisUrl, m.redis.recommendedRedisOptions);
        await new Promise((resolve, reject) => {
          client.once('ready', resolve);
          client.once('error', reject);
        });
      }
      return client;
    },
  };
  const report = {};
  try {
    for (const [pkg, key] of Object.entries({
      '@tiered-limiter/core': 'core',
      '@tiered-limiter/local': 'local',
      '@tiered-limiter/redis': 'redis',
      '@tiered-limiter/http': 'http',
      '@tiered-limiter/otel': 'otel',
    })) {
      const mod = m[key];
      const cases = exercises[pkg] ?? {};
      const names = Object.keys(mod).filter((name) => name !== 'default' && name !== '__esModule');
      const entry = { exports: {}, constants: {}, results: {}, missing: [], stale: [] };
      // core's `internal` namespace needs a case as a function does.
      const exercised = (value, name) => typeof value === 'function' || name === 'internal';
      for (const name of names.sort()) {
        entry.exports[name] = typeof mod[name];
        if (typeof mod[name] !== 'function')
          entry.constants[name] = JSON.stringify(mod[name]) ?? String(mod[name]);
        if (exercised(mod[name], name) && !(name in cases)) entry.missing.push(name);
      }
      entry.stale = Object.keys(cases).filter((name) => !exercised(mod[name], name));
      for (const [name, exercise] of Object.entries(cases)) {
        if (!exercised(mod[name], name)) continue;
        entry.results[name] = await runCase(() => exercise(m, ctx));
      }
      report[pkg] = entry;
    }
  } finally {
    client?.disconnect();
  }
  return report;
}

async function runCase(body) {
  let timer;
  try {
    await Promise.race([
      Promise.resolve().then(body),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch (error) {
    return String(error?.stack ?? error);
  } finally {
    clearTimeout(timer);
  }
}
