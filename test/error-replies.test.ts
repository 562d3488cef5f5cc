import { randomBytes } from 'node:crypto';
import {
  CircuitOpenError,
  type Decision,
  defineLimit,
  type StoreError,
  StoreReplyError,
  StoreTimeoutError,
} from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import {
  bucketKey,
  createRedisLimiter,
  createTieredLimiter,
  type RedisTieredLimiterOptions,
} from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  connectServer,
  findBinary,
  freePort,
  type KindClient,
  msUntilStoreAnswers,
  RedisProcess,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeTempDir } from './src/processes.js';

// Redis answers, with an error: OOM, BUSY, NOPERM, MISCONF, LOADING, and evicted buckets. The
// failure policy decides within the timeout, the failure says which refusal it was, nothing the
// refused calls carried is counted, and the limiter is back on Redis by itself once it is lifted.
const TIMEOUT_MS = 20;
const LATENCY_BUDGET_MS = TIMEOUT_MS + 60;
const COOLDOWN_MS = 250;
/** Back within a cooldown once Redis takes writes again, with a margin for a loaded 2-core machine. */
const BACK_AFTER_LIFT_MS = COOLDOWN_MS + 750;
/** After a restart: the reconnect delay (1 s at most with the recommended options) and a cooldown too. */
const RECONNECT_MAX_MS = 1000;
const BACK_AFTER_LOADING_MS = RECONNECT_MAX_MS + COOLDOWN_MS + 500;
/** A bucket that refills nothing worth a token during a test, to count what ran. */
const SLOW = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });
const USER = 'tl-limited';
const PASSWORD = 'tl-limited-pw';

let server: RedisProcess;
let serverDir: string;
let admin: Redis;
const clients: KindClient[] = [];
const limiters: (TieredLimiter | RequestLimiter)[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  serverDir = makeTempDir('error-replies');
  // `dir` is a protected config: MISCONF is provoked by moving it where no file can be written.
  server = new RedisProcess(findBinary('redis-server')!, await freePort(), serverDir, [
    '--enable-protected-configs',
    'yes',
  ]);
  await server.start();
  admin = new Redis({ host: '127.0.0.1', port: server.port });
  await whenReady(admin);
  await admin.call('ACL', 'SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, '+@all', '~*');
});
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  for (const c of clients.splice(0)) c.close();
  expect(unhandled).toEqual([]);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  admin?.disconnect();
  await server?.stop();
  removeTempDir(serverDir);
});

type Kind = 'request' | 'tiered';

interface Subject {
  limiter: TieredLimiter | RequestLimiter;
  prefix: string;
  failures: StoreError[];
  degraded: StoreError[];
  recovered: number[];
}

/**
 * A limiter of `kind` on its own connection of `client` (as the ACL's user), policy `closed`. Tests
 * that count what Redis decided give it a long timeout: a call timed out on a loaded machine is not theirs.
 */
async function subject(
  kind: Kind,
  client: ClientKind,
  port = server.port,
  timeoutMs = TIMEOUT_MS,
  tieredOptions: Partial<RedisTieredLimiterOptions> = {},
): Promise<Subject> {
  // As the ACL's user on the file's server; another server (restarted, empty of users) as default.
  const override = port === server.port ? { username: USER, password: PASSWORD } : {};
  const connection = await connectServer(client, { host: '127.0.0.1', port }, { override });
  clients.push(connection);
  const prefix = uniquePrefix('refused');
  const options = {
    redis: connection.client,
    prefix,
    limits: SLOW,
    failurePolicy: 'closed',
    timeoutMs,
  } as const;
  const limiter =
    kind === 'request'
      ? createRedisLimiter(options)
      : createTieredLimiter({ ...options, instances: 4, ...tieredOptions });
  limiters.push(limiter);
  const s: Subject = { limiter, prefix, failures: [], degraded: [], recovered: [] };
  limiter.on('failure', (error) => s.failures.push(error));
  limiter.on('degraded', (error) => s.degraded.push(error));
  limiter.on('recovered', (info) => s.recovered.push(info.downMs));
  return s;
}

interface Timed {
  decision: Decision;
  ms: number;
}

async function drive(limiter: TieredLimiter | RequestLimiter, keys: readonly string[], gapMs = 0) {
  const out: Timed[] = [];
  for (const key of keys) {
    const start = performance.now();
    const decision = await limiter.consume(key);
    out.push({ decision, ms: performance.now() - start });
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
  return out;
}

async function info(field: string): Promise<string> {
  const text = await admin.info();
  return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim() ?? '';
}

/** A refusal Redis can be made to answer, and how to lift it. */
interface Refusal {
  /** The reply's first word, as `StoreReplyError.reply` reads it. */
  reply: string;
  /** The call is refused only once this resolves. */
  provoke(): Promise<void>;
  lift(): Promise<void>;
}

let busyScript: Promise<unknown> | undefined;
let busyConnection: Redis | undefined;
const BUSY_MS = 1500;

const REFUSALS: Record<string, Refusal> = {
  // Over `maxmemory` with `noeviction`: the script's first write is refused, so it wrote nothing.
  oom: {
    reply: 'OOM',
    provoke: async () => {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '1');
    },
    lift: async () => {
      await admin.config('SET', 'maxmemory', '0');
    },
  },
  // Another client's script past `busy-reply-threshold`: every other call answers BUSY at once.
  busy: {
    reply: 'BUSY',
    provoke: async () => {
      await admin.config('SET', 'busy-reply-threshold', '50');
      busyConnection = new Redis({ host: '127.0.0.1', port: server.port });
      await whenReady(busyConnection);
      busyScript = busyConnection.eval(
        `local s = redis.call('TIME') local stop = s[1] * 1e6 + s[2] + ${BUSY_MS * 1000}
         while true do local t = redis.call('TIME') if t[1] * 1e6 + t[2] > stop then break end end
         return 1`,
        0,
      );
      // Past the threshold, so that calls are answered BUSY rather than held.
      await new Promise((r) => setTimeout(r, 150));
    },
    lift: async () => {
      await busyScript;
      busyConnection?.disconnect();
      await admin.config('SET', 'busy-reply-threshold', '5000');
    },
  },
  // An ACL that does not let the user run scripts.
  'noperm-command': {
    reply: 'NOPERM',
    provoke: async () => {
      await admin.call('ACL', 'SETUSER', USER, '-evalsha', '-eval');
    },
    lift: async () => {
      await admin.call('ACL', 'SETUSER', USER, '+evalsha', '+eval');
    },
  },
  // An ACL whose key pattern does not cover the prefix.
  'noperm-keys': {
    reply: 'NOPERM',
    provoke: async () => {
      await admin.call('ACL', 'SETUSER', USER, 'resetkeys', '~other:*');
    },
    lift: async () => {
      await admin.call('ACL', 'SETUSER', USER, 'resetkeys', '~*');
    },
  },
  // An ACL without TIME: the script's first call is refused inside it, and Redis 7 answers ERR.
  'noperm-time': {
    reply: 'ERR',
    provoke: async () => {
      await admin.call('ACL', 'SETUSER', USER, '-time');
    },
    lift: async () => {
      await admin.call('ACL', 'SETUSER', USER, '+time');
    },
  },
  // `stop-writes-on-bgsave-error` after a save that failed: the server's directory is gone.
  misconf: {
    reply: 'MISCONF',
    provoke: async () => {
      const gone = makeTempDir('misconf');
      await admin.config('SET', 'dir', gone);
      removeTempDir(gone);
      await admin.config('SET', 'save', '3600 1');
      await admin.bgsave();
      const deadline = performance.now() + 5000;
      while (
        (await info('rdb_bgsave_in_progress')) !== '0' ||
        (await info('rdb_last_bgsave_status')) !== 'err'
      ) {
        if (performance.now() > deadline) throw new Error('BGSAVE did not fail: MISCONF not provoked');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    lift: async () => {
      await admin.config('SET', 'dir', serverDir);
      await admin.config('SET', 'save', '');
    },
  },
};

describe.each(Object.keys(REFUSALS))('Redis refuses the call: %s', (name) => {
  const refusal = REFUSALS[name]!;
  describe.each(CLIENT_KINDS)('%s', (client) => {
    it.each(['request', 'tiered'] as const)(
      '%s limiter: its policy in time, the reply named, nothing counted, back by itself',
      async (kind) => {
        const s = await subject(kind, client);
        // Connected, its script loaded; a warm-up call that timed out on a loaded machine is not the refusal's.
        await drive(s.limiter, ['warm-0', 'warm-1']);
        s.failures.length = 0;
        const keys = Array.from({ length: 8 }, (_, i) => `${name}-${i}`);
        await refusal.provoke();
        let during: Timed[];
        try {
          during = await drive(s.limiter, keys, 5);
        } finally {
          await refusal.lift();
        }
        // Nothing the refused calls carried was written (read before any later call can touch them).
        const written = await admin.exists(...keys.map((key) => bucketKey(s.prefix, key, SLOW.name)));
        expect(written).toBe(0);

        for (const { decision, ms } of during) {
          expect(decision).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed' });
          expect(ms).toBeLessThan(LATENCY_BUDGET_MS);
        }
        // The reply is named on each failure, and it keeps the breaker open.
        expect(s.failures.length).toBeGreaterThanOrEqual(3);
        const replies = s.failures.filter((e): e is StoreReplyError => e instanceof StoreReplyError);
        expect(replies.length).toBeGreaterThan(0);
        for (const e of s.failures) {
          // A call may also time out: BUSY's before the threshold, any on a loaded 2-core machine.
          if (e instanceof StoreTimeoutError) continue;
          expect(e).toBeInstanceOf(StoreReplyError);
          expect(e).toMatchObject({ code: 'ERR_TL_STORE_REPLY', reply: refusal.reply });
        }
        expect(s.degraded).toHaveLength(1);
        const open = during.filter((t) => t.decision.error instanceof CircuitOpenError);
        expect(open.length).toBeGreaterThan(0);
        for (const t of open) expect(s.failures).toContain(t.decision.error?.cause);

        const backMs = await msUntilStoreAnswers(s.limiter, `${name}-back`, BACK_AFTER_LIFT_MS);
        expect(backMs).toBeLessThan(BACK_AFTER_LIFT_MS);
        expect(s.recovered).toHaveLength(1);
      },
    );
  });
});

describe('a restart that loads a large dataset (LOADING)', () => {
  let loading: RedisProcess | undefined;
  let loadingDir: string | undefined;
  afterEach(async () => {
    await loading?.stop('SIGKILL');
    if (loadingDir !== undefined) removeTempDir(loadingDir);
    loading = undefined;
    loadingDir = undefined;
  });

  it.each(CLIENT_KINDS)(
    '%s: the policy while it loads, back on Redis within a reconnect and a cooldown of its end',
    async (client) => {
      loadingDir = makeTempDir('loading');
      // 1 ms a key makes the load last seconds; events are served every KiB, so it answers LOADING.
      loading = new RedisProcess(findBinary('redis-server')!, await freePort(), loadingDir, [
        '--key-load-delay',
        '1000',
        '--loading-process-events-interval-bytes',
        '1024',
      ]);
      await loading.start();
      const filler = new Redis({ host: '127.0.0.1', port: loading.port });
      await whenReady(filler);
      const fill = filler.pipeline();
      for (let i = 0; i < 1500; i++) fill.set(`fill:${i}`, 'x'.repeat(16));
      await fill.exec();
      // The file's bulk comes last (database 1 after 0): Redis' estimate of the time left, by bytes,
      // runs long while the slow small keys load, as it does for a real dataset of mixed sizes.
      await filler.select(1);
      await filler.set('bulk', randomBytes(3_000_000));
      await filler.save();
      filler.disconnect();

      const s = await subject('request', client, loading.port);
      await drive(s.limiter, ['warm-0', 'warm-1']);
      await loading.stop();
      const restarted = performance.now();
      let loadedAt: number | undefined;
      const started = loading.start().then(() => {
        loadedAt = performance.now();
      });
      // Decisions while the server is away and then loading: each its policy, within the timeout.
      const during: Timed[] = [];
      for (let i = 0; loadedAt === undefined && performance.now() - restarted < 30_000; i++) {
        during.push(...(await drive(s.limiter, [`loading-${i}`])));
        await new Promise((r) => setTimeout(r, 10));
      }
      await started;
      expect(performance.now() - restarted).toBeGreaterThan(1000); // it did load for a while
      for (const { decision, ms } of during) {
        expect(decision.tier).toBe('fallback');
        expect(ms).toBeLessThan(LATENCY_BUDGET_MS);
      }
      // Back once loading ended: the client's reconnect and the breaker's cooldown, not Redis' estimate.
      const backMs = await msUntilStoreAnswers(s.limiter, 'loaded', BACK_AFTER_LOADING_MS);
      expect(backMs).toBeLessThan(BACK_AFTER_LOADING_MS);
    },
  );
});

describe('buckets evicted under maxmemory (allkeys-*)', () => {
  afterEach(async () => {
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  });

  /** Evicts every key of the server as Redis does past `maxmemory`; resolves how many went. */
  async function evictAll(): Promise<number> {
    const before = Number(await info('evicted_keys'));
    await admin.config('SET', 'maxmemory-policy', 'allkeys-random');
    await admin.config('SET', 'maxmemory', '1');
    // Redis evicts before it runs a write, every key it can, and then refuses this one.
    await expect(admin.set('tl-evict-trigger', 'x')).rejects.toThrow(/^OOM/);
    await admin.config('SET', 'maxmemory', '0');
    return Number(await info('evicted_keys')) - before;
  }

  it('an evicted bucket reads full (a gift of what was taken), and a lease handed back to it adds nothing past its capacity', async () => {
    // One lease that lives through the test, and no sync: a sync op between the eviction and
    // close() leased anew from the bucket read full, and the two tokens spent from that lease were
    // rightly counted (38 where the test reads 40: 4 of 12 runs at a load of 12 on the 2 cores).
    const tiered = await subject('tiered', 'ioredis', server.port, 1000, {
      sync: false,
      lease: { ttlMs: 60_000, minBatch: 20 },
    });
    const reader = createRedisLimiter({
      redis: admin,
      prefix: tiered.prefix,
      limits: SLOW,
      failurePolicy: 'closed',
      timeoutMs: 1000,
    });
    limiters.push(reader);
    // The two-tier limiter leases tokens from the bucket and spends some of them in process.
    const spent = await drive(tiered.limiter, ['e', 'e', 'e', 'e', 'e']);
    expect(spent.every((t) => t.decision.allowed)).toBe(true);
    // Its first request leased (`minBatch`), a quarter of the bucket at most: 10, 5 of them spent here
    // unknown to the bucket, 3 left after two more (above the low water of 2.5: no refill).
    expect((await reader.peek('e')).remaining).toBe(SLOW.capacity - 10);
    // The request limiter's own key: 10 taken.
    await drive(
      reader,
      Array.from({ length: 10 }, () => 'r'),
    );
    expect((await reader.peek('r')).remaining).toBe(SLOW.capacity - 10);

    const evicted = await evictAll();
    expect(evicted).toBeGreaterThanOrEqual(2);
    // Every key went, and neither limiter writes one unasked.
    expect(await admin.exists(bucketKey(tiered.prefix, 'r', SLOW.name))).toBe(0);
    expect(await admin.exists(bucketKey(tiered.prefix, 'e', SLOW.name))).toBe(0);

    // The lease it holds still serves it, and closing hands back what is left of it: to a bucket
    // that no longer holds that lease, so nothing comes back, and the bucket stays at its capacity.
    const onLease = await drive(tiered.limiter, ['e', 'e']);
    expect(onLease.every((t) => t.decision.allowed && t.decision.tier === 'lease')).toBe(true);
    // Its tokens on top of a bucket read full again are not announced past the limit (42 of 40 before).
    for (const t of onLease) expect(t.decision.remaining).toBeLessThanOrEqual(SLOW.capacity);
    await tiered.limiter.close();
    expect(tiered.failures).toEqual([]);
    expect((await reader.peek('e')).remaining).toBe(SLOW.capacity);
    // The per-request key reads full again: its 10 tokens are given back, once.
    expect((await reader.consume('r')).remaining).toBe(SLOW.capacity - 1);
  });
});

describe('a key whose value is not a bucket, in a coalesced call (WRONGTYPE)', () => {
  it.each(CLIENT_KINDS)(
    '%s: only its own requests take the policy; the call’s other keys are decided by Redis, counted once',
    async (client) => {
      const s = await subject('request', client, server.port, 1000);
      await drive(s.limiter, ['warm-0']);
      await admin.set(bucketKey(s.prefix, 'bad', SLOW.name), 'not a bucket');
      const keys = ['good-0', 'good-1', 'bad', 'good-2', 'good-0', 'good-3', 'bad', 'good-4'];
      // One tick: one coalesced call carries them all.
      const decisions = await Promise.all(keys.map((key) => s.limiter.consume(key)));
      const byKey = keys.map((key, i) => [key, decisions[i]!] as const);
      for (const [key, d] of byKey) {
        if (key === 'bad') {
          expect(d).toMatchObject({ tier: 'fallback', policy: 'closed' });
          expect(d.error).toBeInstanceOf(StoreReplyError);
          expect(d.error).toMatchObject({ reply: 'WRONGTYPE' });
        } else {
          expect(d).toMatchObject({ allowed: true, tier: 'global' });
        }
      }
      // good-0's two takes in their order, and every good key's tokens taken once.
      expect(decisions.filter((_, i) => keys[i] === 'good-0').map((d) => d.remaining)).toEqual([
        SLOW.capacity - 1,
        SLOW.capacity - 2,
      ]);
      const after = await Promise.all(
        ['good-1', 'good-2', 'good-3', 'good-4'].map((k) => s.limiter.consume(k)),
      );
      expect(after.map((d) => d.remaining)).toEqual(after.map(() => SLOW.capacity - 2));
      expect(s.failures.map((e) => e.code)).toEqual(['ERR_TL_STORE_REPLY', 'ERR_TL_STORE_REPLY']);
      expect(s.degraded).toEqual([]);
    },
  );
});
