/**
 * Each Redis client library RedisStore drives (ioredis, iovalkey, node-redis), with its
 * recommended options, on a real server and a real 3-master Cluster: a call in flight when its
 * connection drops fails and is never sent again, a call made while it is down fails at once and
 * is never sent late (with the offline queue on, it is), and ops made together travel together.
 */
import { defineLimit, type LimitSpec, StoreError } from '@tiered-limiter/core';
import { bucketKeys, RedisStore } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  connectCluster,
  connectServer,
  type KindClient,
  type KindOptions,
  type RedisCluster,
  type RedisServer,
  sleepAtLeast,
  startCluster,
  startRedis,
  uniquePrefix,
  waitUntil,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });
const PAUSE_MS = 3000;

let server: RedisServer;
let cluster: RedisCluster;
const opened: KindClient[] = [];

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3 })]);
});
afterEach(() => {
  for (const client of opened.splice(0)) client.close();
});
afterAll(async () => {
  await Promise.all([server.stop(), cluster.stop()]);
});

type Topology = 'server' | 'cluster';

async function connect(kind: ClientKind, topology: Topology, options: KindOptions = {}): Promise<KindClient> {
  const client =
    topology === 'server'
      ? await connectServer(kind, server, options)
      : await connectCluster(kind, cluster.nodes, options);
  opened.push(client);
  return client;
}

/** A plain ioredis admin connection to the node that holds `key`. */
async function adminFor(topology: Topology, key: string): Promise<Redis> {
  if (topology === 'server') return server.client();
  const any = cluster.nodeClient(cluster.nodes[0]!);
  const slot = Number(await any.call('CLUSTER', 'KEYSLOT', key));
  const ranges = (await any.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
  const owner = ranges.find(([from, to]) => from <= slot && slot <= to)![2];
  return cluster.nodeClient(cluster.nodes.find((node) => node.id === owner[2])!);
}

/** The ids of the connections named `name` on the server `admin` speaks to. */
async function connectionsNamed(admin: Redis, name: string): Promise<string[]> {
  const list = String(await admin.call('CLIENT', 'LIST'));
  return list
    .split('\n')
    .filter((line) => line.includes(` name=${name} `))
    .map((line) => /\bid=(\d+)/.exec(line)![1]!);
}

/**
 * Sends a take while the key's node holds every write (`CLIENT PAUSE … WRITE`: the call is on the
 * server, not yet run), kills the client's connections there, lets writes go again, and waits
 * past any reconnect and resend. Returns how the take ended and the tokens the bucket lost: 0 if
 * the take was never run, 1 if the client sent it again after the reconnect.
 */
async function killInFlight(kind: ClientKind, topology: Topology, override?: Record<string, unknown>) {
  const name = uniquePrefix('inflight').replaceAll('-', '_');
  const { client } = await connect(kind, topology, { name, override });
  const store = new RedisStore({ redis: client, prefix: uniquePrefix('inflight') });
  const limits: LimitSpec[] = [slow];
  await store.apply({ key: 'k', limits }); // loads the script on that node
  const admin = await adminFor(topology, bucketKeys(store.prefix, 'k', limits)[0]!);
  await admin.call('CLIENT', 'PAUSE', PAUSE_MS, 'WRITE');
  let outcome: { reply?: unknown; error?: unknown };
  try {
    const pending = store.apply({ key: 'k', limits, take: 1 }).then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error }),
    );
    await sleepAtLeast(100); // written and held by the server
    const ids = await connectionsNamed(admin, name);
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id);
    outcome = await Promise.race([pending, sleepAtLeast(PAUSE_MS).then(() => ({ error: 'unsettled' }))]);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE');
  }
  await sleepAtLeast(500); // past the reconnect (≤ 100 ms) and any resend it would make
  const checker = await connect('ioredis', topology);
  const peek = await new RedisStore({ redis: checker.client, prefix: store.prefix }).apply({
    key: 'k',
    limits,
  });
  return { ...outcome, taken: 10 - peek.remaining };
}

/** Whether `client` (any kind) has a connection it can write to now. */
function connected(client: object): boolean {
  const c = client as { status?: string; isReady?: boolean };
  return c.isReady ?? c.status === 'ready';
}

/**
 * Kills the client's connection to the server (which keeps its data), and as soon as the client
 * has seen it drop, before its reconnect (50 ms later with the recommended back-off), makes a
 * take. Waits for the reconnect and past any late send, then returns how the take ended, whether
 * the client was still down when it did, and the tokens the bucket lost: 0 if the take never ran,
 * 1 if it was sent late.
 */
async function takeWhileDisconnected(kind: ClientKind, override?: Record<string, unknown>) {
  const name = uniquePrefix('offline').replaceAll('-', '_');
  const { client } = await connect(kind, 'server', { name, override });
  const store = new RedisStore({ redis: client, prefix: uniquePrefix('offline') });
  const limits: LimitSpec[] = [slow];
  await store.apply({ key: 'k', limits }); // loads the script
  const admin = server.client();
  const ids = await connectionsNamed(admin, name);
  expect(ids.length).toBeGreaterThan(0);
  for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id);
  const seenAt = performance.now() + 2000;
  while (connected(client) && performance.now() < seenAt) await new Promise((r) => setImmediate(r));
  expect(connected(client)).toBe(false);
  const outcome: { reply?: unknown; error?: unknown; stillDown: boolean } = await store
    .apply({ key: 'k', limits, take: 1 })
    .then(
      (reply) => ({ reply, stillDown: !connected(client) }),
      (error: unknown) => ({ error, stillDown: !connected(client) }),
    );
  await waitUntil('the client to reconnect', async () => connected(client), 5000);
  await sleepAtLeast(300); // past any late send
  const peek = await new RedisStore({ redis: admin, prefix: store.prefix }).apply({ key: 'k', limits });
  return { ...outcome, taken: 10 - peek.remaining };
}

describe.each(CLIENT_KINDS)('%s with its recommended options', (kind) => {
  describe.each(['server', 'cluster'] as const)('on a %s', (topology) => {
    it('a call in flight when its connection drops fails at once and is never sent again', async () => {
      const { reply, error, taken } = await killInFlight(kind, topology);
      expect(reply).toBeUndefined();
      expect(error).toBeInstanceOf(StoreError);
      expect(taken).toBe(0);
    });

    if (topology === 'server') {
      it('a call made while its connection is down fails at once and is never sent late', async () => {
        const { reply, error, stillDown, taken } = await takeWhileDisconnected(kind);
        expect(reply).toBeUndefined();
        expect(error).toBeInstanceOf(StoreError);
        // At once: before the reconnect, not at it (a queued call settles only once it is sent).
        expect(stillDown).toBe(true);
        expect(taken).toBe(0);
      });
    }

    it('ops made together travel together: one call per node, each op its own reply', async () => {
      const { client } = await connect(kind, topology);
      const store = new RedisStore({ redis: client, prefix: uniquePrefix('together') });
      const users = Array.from({ length: 40 }, (_, i) => `user-${i}`);
      const before = store.stats();
      const replies = await Promise.all(users.map((key) => store.apply({ key, limits: [slow], take: 3 })));
      expect(replies.map((r) => r.remaining)).toEqual(users.map(() => 7));
      const after = store.stats();
      expect(after.ops - before.ops).toBe(40);
      expect(after.keys - before.keys).toBe(40);
      // Two calls in flight at once per node, the rest waits and goes in the next one.
      const nodes = topology === 'server' ? 1 : 3;
      expect(after.calls - before.calls).toBeLessThanOrEqual(2 * nodes);
    });
  });
});

describe.each(['ioredis', 'iovalkey'] as const)('%s with its default options', (kind) => {
  it('sends the call again after the reconnect: a token taken for a call the limiter gave up on', async () => {
    const { taken } = await killInFlight(kind, 'server', {
      maxRetriesPerRequest: 20,
      autoResendUnfulfilledCommands: true,
      enableOfflineQueue: true,
    });
    expect(taken).toBe(1);
  });
});

describe.each(['ioredis', 'iovalkey'] as const)('%s with its offline queue on', (kind) => {
  it('sends a call made while disconnected after the reconnect: a token taken late', async () => {
    const { reply, taken } = await takeWhileDisconnected(kind, {
      enableOfflineQueue: true,
      maxRetriesPerRequest: 20,
    });
    expect(reply).toBeDefined();
    expect(taken).toBe(1);
  });
});

describe('node-redis', () => {
  it('with its offline queue on, sends a call made while disconnected after the reconnect: a token taken late', async () => {
    const { reply, taken } = await takeWhileDisconnected('node-redis', { disableOfflineQueue: false });
    expect(reply).toBeDefined();
    expect(taken).toBe(1);
  });

  it('rejects what it had written even with its offline queue on: it never resends', async () => {
    const { error, taken } = await killInFlight('node-redis', 'server', { disableOfflineQueue: false });
    expect(error).toBeInstanceOf(StoreError);
    expect(taken).toBe(0);
  });
});
