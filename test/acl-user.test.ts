/**
 * The README (When Redis answers with an error): "An ACL user for the limiters (a single server,
 * either client, both limiters, `reset` and the fleet registry included): `ACL SETUSER limiter on >…
 * ~<prefix>:* +evalsha …`". The user is made from the README's own list, so a list short of one
 * fails here; each permission is then taken away in turn, and what breaks without it is named.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineLimit, type StoreError, StoreReplyError } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { bucketKey, createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  connectServer,
  findBinary,
  freePort,
  type KindClient,
  RedisProcess,
  uniquePrefix,
  waitUntil,
  whenReady,
} from '@tiered-limiter/test-harness';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeTempDir } from './src/processes.js';

const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

/** The permissions of the README's ACL user, as it lists them after the key pattern. */
function readmePermissions(): string[] {
  const flat = README.replace(/\s+/g, ' ');
  const line = /`ACL SETUSER limiter on >… ~<prefix>:\* ([^`]+)`/.exec(flat);
  if (line === null) throw new Error("the README's ACL user is not where this test reads it");
  return line[1]!.trim().split(' ');
}

/** A bucket that refills nothing worth a token during a test: what Redis holds is what was taken. */
const SLOW = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'slow' });
const TIERED = defineLimit({ capacity: 40, refillPerSecond: 0.001, name: 'tiered' });
/** Long enough that no call times out on a loaded 2-core machine: a policy decision here is the ACL's. */
const TIMEOUT_MS = 2000;
/** The first heartbeat goes as the limiter is made: its answer's time, with room for a loaded machine. */
const FIRST_BEAT_MS = 1500;
const PASSWORD = 'tl-acl-pw';

let server: RedisProcess;
let serverDir: string;
let admin: Redis;
let users = 0;
const clients: KindClient[] = [];
const limiters: (TieredLimiter | RequestLimiter)[] = [];

beforeAll(async () => {
  serverDir = makeTempDir('acl-user');
  server = new RedisProcess(findBinary('redis-server')!, await freePort(), serverDir);
  await server.start();
  admin = new Redis({ host: '127.0.0.1', port: server.port });
  await whenReady(admin);
});
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
  for (const c of clients.splice(0)) c.close();
});
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
  removeTempDir(serverDir);
});

/** A new ACL user with `permissions` on `keys` only; resolves its name. */
async function makeUser(keys: string, permissions: readonly string[]): Promise<string> {
  users += 1;
  const name = `tl-acl-${users}`;
  await admin.call('ACL', 'SETUSER', name, 'reset', 'on', `>${PASSWORD}`, keys, ...permissions);
  return name;
}

/** The commands `ACL LOG` says Redis refused `user`, sorted, each once. */
async function deniedTo(user: string): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG', '1000')) as unknown[][];
  const denied = new Set<string>();
  for (const entry of entries) {
    const fields = new Map<string, unknown>();
    for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
    if (fields.get('username') === user) denied.add(`${fields.get('reason')}:${fields.get('object')}`);
  }
  return [...denied].sort();
}

/**
 * The limiters' options on a new connection of `kind` as `user`, policy `closed`; the connection is
 * closed after the test.
 */
async function optionsAs(kind: ClientKind, user: string, prefix: string) {
  const connection = await connectServer(
    kind,
    { host: '127.0.0.1', port: server.port },
    { override: { username: user, password: PASSWORD } },
  );
  clients.push(connection);
  return { redis: connection.client, prefix, failurePolicy: 'closed', timeoutMs: TIMEOUT_MS } as const;
}

/** What one run of everything the README claims did, as the user: equal to `CLEAN` when nothing broke. */
interface Report {
  /** `reply` of every failure either limiter reported, in order, repeats dropped. */
  failures: string[];
  /** Decisions the failure policy made. */
  fallbacks: number;
  /** Management calls that resolved `false` (the store did not do them). */
  refused: string[];
  /** The commands Redis refused the user (`ACL LOG`), sorted. */
  denied: string[];
  /** The per-request key's remaining after 3 takes, a reward of 2, a penalty of 1; then after a reset. */
  requestRemaining: number[];
  /** Whether the per-request key's bucket is gone from Redis after its reset (a full bucket is no key). */
  requestKeyAfterReset: number;
  /** The two-tier limiter's `acquire`s that got their token (of 3). */
  acquired: number;
  /** The two-tier limiter's live count, read from its heartbeats. */
  liveInstances: number | undefined;
  /** The fleet's sorted set's members while the limiter runs, and after its `close()`. */
  fleetWhileOpen: number;
  fleetAfterClose: number;
  /** The two-tier keys' remaining, read from Redis after `close()` handed the leased tokens back. */
  tieredAfterClose: number[];
}

/**
 * Everything the README's sentence covers, as the user `user` through a client of `kind`: both
 * limiters' decisions, their management calls, `reset`, the fleet registry, `close()` handing tokens
 * back, and script loading after `SCRIPT FLUSH` (EVALSHA answers NOSCRIPT: EVAL). Resolves what it saw.
 */
async function exercise(kind: ClientKind, user: string, prefix: string): Promise<Report> {
  await admin.script('FLUSH');
  const options = await optionsAs(kind, user, prefix);
  const errors: StoreError[] = [];
  let fallbacks = 0;
  const refused: string[] = [];
  const decide = async (decision: Promise<{ tier: string }>) => {
    if ((await decision).tier === 'fallback') fallbacks++;
  };
  const manage = async (what: string, call: Promise<boolean>) => {
    if (!(await call)) refused.push(what);
  };

  const request = createRedisLimiter({ ...options, limits: SLOW });
  limiters.push(request);
  request.on('failure', (e) => errors.push(e));
  const requestRemaining: number[] = [];
  for (let i = 0; i < 3; i++) await decide(request.consume('r'));
  await manage('request reward', request.reward('r', 2));
  await manage('request penalty', request.penalty('r', 1));
  // A reward that fills a bucket with nothing on lease leaves no key (a full bucket is no key).
  await decide(request.consume('f'));
  await manage('request reward to full', request.reward('f', 1));
  const peeked = await request.peek('r');
  await decide(Promise.resolve(peeked));
  requestRemaining.push(peeked.remaining);
  request.block('r', 60_000);
  await decide(request.consume('r'));
  await manage('request reset', request.reset('r'));
  const requestKeyAfterReset = await admin.exists(bucketKey(prefix, 'r', SLOW.name));
  // The server forgets its scripts (a restart, a failover to a replica that never saw them).
  await admin.script('FLUSH');
  const afterReset = await request.consume('r');
  await decide(Promise.resolve(afterReset));
  requestRemaining.push(afterReset.remaining);
  await request.close();

  const tiered = createTieredLimiter({ ...options, limits: TIERED, instances: 2 });
  limiters.push(tiered);
  tiered.on('failure', (e) => errors.push(e));
  const fleetKey = `${prefix}:{%fleet}`;
  // Registered as it is made: its first heartbeat answered.
  await waitUntil(
    'the first heartbeat',
    async () => tiered.stats().liveInstances !== undefined,
    FIRST_BEAT_MS,
  ).catch(() => {});
  const fleetWhileOpen = await admin.zcard(fleetKey);
  // A key asked again within 5 s is leased; the sync then holds it, and more is spent in process.
  for (let i = 0; i < 6; i++) await decide(tiered.consume('t'));
  let acquired = 0;
  for (let i = 0; i < 3; i++) {
    const waited = await tiered.acquire('t', 1, { maxWaitMs: 100 });
    if (waited.acquired) acquired++;
    if (waited.decision !== undefined) await decide(Promise.resolve(waited.decision));
  }
  await manage('tiered reward', tiered.reward('t', 1));
  await manage('tiered penalty', tiered.penalty('t', 1));
  await decide(tiered.peek('t'));
  await decide(tiered.consume('u'));
  await manage('tiered reset', tiered.reset('u'));
  tiered.block('b', 60_000);
  await decide(tiered.consume('b'));
  await admin.script('FLUSH');
  // Some sync rounds, the first after the flush loading the script again.
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < 3; i++) await decide(tiered.consume('v'));
  const liveInstances = tiered.stats().liveInstances;
  await tiered.close();
  const fleetAfterClose = await admin.zcard(fleetKey);

  // Read back as the admin: what Redis holds once the leases came home.
  const reader = createRedisLimiter({
    redis: admin,
    prefix,
    limits: TIERED,
    failurePolicy: 'closed',
    timeoutMs: TIMEOUT_MS,
  });
  const tieredAfterClose = [];
  for (const key of ['t', 'u', 'v']) tieredAfterClose.push((await reader.peek(key)).remaining);
  await reader.close();

  const failures: string[] = [];
  for (const e of errors) {
    const reply = e instanceof StoreReplyError ? e.reply : e.code;
    if (failures.at(-1) !== reply) failures.push(reply);
  }
  return {
    failures,
    fallbacks,
    refused,
    denied: await deniedTo(user),
    requestRemaining,
    requestKeyAfterReset,
    acquired,
    liveInstances,
    fleetWhileOpen,
    fleetAfterClose,
    tieredAfterClose,
  };
}

/** What the run does when Redis refuses the user nothing (SLOW and TIERED refill nothing worth a token). */
const CLEAN: Report = {
  failures: [],
  fallbacks: 0,
  refused: [],
  denied: [],
  // 40 − 3 taken + 2 rewarded − 1 penalised; after the reset, one taken from a full bucket.
  requestRemaining: [38, 39],
  requestKeyAfterReset: 0,
  acquired: 3,
  liveInstances: 1,
  fleetWhileOpen: 1,
  fleetAfterClose: 0,
  // t: 9 taken, 1 rewarded, 1 penalised; u: reset; v: 3 taken. Every leased token came home.
  tieredAfterClose: [31, 40, 37],
};

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

const EVERY_MANAGEMENT_CALL = [
  'request reward',
  'request penalty',
  'request reward to full',
  'request reset',
  'tiered reward',
  'tiered penalty',
  'tiered reset',
];

/**
 * Every script call refused: each decision the policy's, every management call undone, nothing
 * counted. `reply` is the failures' reply; `alsoSeen`, others that may come with it.
 */
function nothingRan(reply: string, alsoSeen: readonly string[] = []) {
  return (r: Report) => {
    expect(r.failures).toContain(reply);
    for (const failure of r.failures) expect([reply, ...alsoSeen]).toContain(failure);
    expect(r.fallbacks).toBeGreaterThanOrEqual(15);
    expect(r.refused).toEqual(EVERY_MANAGEMENT_CALL);
    expect(r.tieredAfterClose).toEqual([40, 40, 40]);
  };
}

/**
 * A heartbeat refused inside the script fails the whole call it rides in: the live count is never
 * read, and the sync's ops in that call fail with it (so may requests coalesced into it: 3 of the
 * run's decisions, the policy's, in each of five runs by hand).
 */
function heartbeatRefused(r: Report) {
  expect(r.failures).toEqual(['ERR']);
  expect(r.liveInstances).toBeUndefined();
}

/**
 * Why each permission of the README's user is there: what broke, as that user with ioredis, when it
 * alone was taken away. The README's list must be exactly these.
 */
const NEEDED: Record<string, (r: Report) => void> = {
  '+evalsha': nothingRan('NOPERM'),
  // On a server with no copy of the script (a restart, a failover, SCRIPT FLUSH: the run flushes it),
  // and ioredis' first call on each connection (below). Of two calls in one pipeline, ioredis sends
  // the second's EVALSHA again as it is (NOSCRIPT) and only the first's as EVAL (NOPERM).
  '+eval': nothingRan('NOPERM', ['NOSCRIPT']),
  // Refused inside the script, Redis 7 answers ERR (the README's NOPERM row).
  '+time': nothingRan('ERR'),
  '+get': nothingRan('ERR'),
  '+set': nothingRan('ERR'),
  // A bucket made full with nothing on lease is deleted: a reset, a reward (or a hand-back) that fills it.
  '+del': (r) => {
    expect(r.failures).toEqual(['ERR']);
    expect(r.fallbacks).toBe(0);
    expect(r.refused).toEqual(['request reward to full', 'request reset', 'tiered reset']);
    expect(r.requestKeyAfterReset).toBe(1);
    expect(r.tieredAfterClose[1]).toBe(39);
  },
  '+zadd': heartbeatRefused,
  '+zremrangebyscore': heartbeatRefused,
  '+zcard': heartbeatRefused,
  '+pttl': heartbeatRefused,
  '+pexpire': heartbeatRefused,
  // close()'s leave is refused, and with it the hand-back of the leased tokens in the same call.
  '+zrem': (r) => {
    expect(r.failures).toEqual(['ERR']);
    expect(r.fallbacks).toBe(0);
    expect(r.fleetAfterClose).toBe(1);
    // Lost, the leased tokens count as spent (t 28 and v 19 of 31 and 37 in most runs; t's lease was
    // sometimes empty at close: 31, and v 24, once each).
    for (const [i, remaining] of r.tieredAfterClose.entries()) {
      expect(remaining).toBeLessThanOrEqual(CLEAN.tieredAfterClose[i]!);
    }
    expect(sum(r.tieredAfterClose)).toBeLessThan(sum(CLEAN.tieredAfterClose));
  },
  // ioredis' (iovalkey's) ready check, which tells a server LOADING its dataset: refused, it warns and
  // skips the check; the limiters themselves are unharmed.
  '+info': (r) => expect({ ...r, denied: [] }).toEqual(CLEAN),
};

describe("the README's minimal ACL user", () => {
  it('lists exactly the permissions shown needed here', () => {
    expect(readmePermissions().sort()).toEqual(Object.keys(NEEDED).sort());
  });

  it.each(CLIENT_KINDS)(
    '%s: both limiters, their management calls, reset, the fleet registry, close() and a SCRIPT FLUSH, refused nothing',
    async (kind) => {
      const prefix = uniquePrefix('acl');
      const user = await makeUser(`~${prefix}:*`, readmePermissions());
      expect(await exercise(kind, user, prefix)).toEqual(CLEAN);
    },
  );

  it.each(Object.keys(NEEDED))('without %s, the run is refused it, and breaks', async (permission) => {
    const prefix = uniquePrefix('acl');
    const user = await makeUser(
      `~${prefix}:*`,
      readmePermissions().filter((p) => p !== permission),
    );
    const report = await exercise('ioredis', user, prefix);
    expect(report.denied).toEqual([`command:${permission.slice(1)}`]);
    NEEDED[permission]!(report);
  });

  it.each(CLIENT_KINDS)(
    '%s without +eval, on a server holding the script: refused its first call only if it sends EVAL first',
    async (kind) => {
      const prefix = uniquePrefix('acl');
      // The script loaded by another client's call.
      const loader = createRedisLimiter({
        redis: admin,
        prefix,
        limits: SLOW,
        failurePolicy: 'closed',
        timeoutMs: TIMEOUT_MS,
      });
      limiters.push(loader);
      await admin.script('FLUSH');
      expect(await loader.consume('loaded')).toMatchObject({ tier: 'global' });
      const user = await makeUser(
        `~${prefix}:*`,
        readmePermissions().filter((p) => p !== '+eval'),
      );
      const limiter = createRedisLimiter({ ...(await optionsAs(kind, user, prefix)), limits: SLOW });
      limiters.push(limiter);
      const tiers = [];
      for (const key of ['a', 'b']) tiers.push((await limiter.consume(key)).tier);
      // ioredis and iovalkey send a script's first call on a connection as EVAL (`lib/Script.ts`).
      const evalFirst = kind !== 'node-redis';
      expect(tiers).toEqual(evalFirst ? ['fallback', 'global'] : ['global', 'global']);
      expect(await deniedTo(user)).toEqual(evalFirst ? ['command:eval'] : []);
    },
  );

  it('node-redis asks for no INFO: the user without +info is refused nothing', async () => {
    const prefix = uniquePrefix('acl');
    const user = await makeUser(
      `~${prefix}:*`,
      readmePermissions().filter((p) => p !== '+info'),
    );
    expect(await exercise('node-redis', user, prefix)).toEqual(CLEAN);
  });

  it.each(CLIENT_KINDS)(
    '%s: a user whose key pattern is not the prefix gets NOPERM, decided by the policy',
    async (kind) => {
      const prefix = uniquePrefix('acl');
      const user = await makeUser(`~other-${prefix}:*`, readmePermissions());
      const options = await optionsAs(kind, user, prefix);
      const request = createRedisLimiter({ ...options, limits: SLOW });
      // No sync: its heartbeats, refused too, would add the fleet's key to `ACL LOG` on their own time.
      const tiered = createTieredLimiter({ ...options, limits: TIERED, instances: 2, sync: false });
      limiters.push(request, tiered);
      for (const limiter of [request, tiered]) {
        const failures: StoreError[] = [];
        limiter.on('failure', (e) => failures.push(e));
        const decision = await limiter.consume('k');
        expect(decision).toMatchObject({ allowed: false, tier: 'fallback', policy: 'closed' });
        expect(decision.error).toBeInstanceOf(StoreReplyError);
        expect(decision.error).toMatchObject({ reply: 'NOPERM' });
        expect(failures.map((e) => (e as StoreReplyError).reply)).toEqual(['NOPERM']);
      }
      expect(await deniedTo(user)).toEqual(
        [SLOW, TIERED].map((limit) => `key:${bucketKey(prefix, 'k', limit.name)}`).sort(),
      );
    },
  );
});
