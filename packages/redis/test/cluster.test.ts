/**
 * RedisStore on a real three-master Redis Cluster: one slot per user, several limits per call,
 * a slot migrated under a live client, and a hammer across the cluster.
 */

import { defineLimit } from '@tiered-limiter/core';
import {
  bucketKeys,
  keyTag,
  RedisStore,
  recommendedClusterOptions,
  whenReady as whenClientReady,
} from '@tiered-limiter/redis';
import {
  type ClusterNode,
  connectCluster,
  destroySocket,
  storeOps as ops,
  type RedisCluster,
  startCluster,
  takeWhileCutting,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Cluster, ClusterOptions, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNeverResent, expectResentAndCountedTwice } from './cut-take.js';

let cluster: RedisCluster;
let client: Cluster;
let admin: Redis;

beforeAll(async () => {
  cluster = await startCluster({ masters: 3 });
  client = cluster.cluster(recommendedClusterOptions);
  admin = cluster.nodeClient(cluster.nodes[0]!);
  await Promise.all([whenReady(client), whenReady(admin)]);
});

afterAll(() => cluster.stop());

const perSecond = defineLimit({ capacity: 10, refillPerSecond: 10, name: 'per-second' });
const perHour = defineLimit({ capacity: 15, refillPerSecond: 15 / 3600, name: 'per-hour' });
const slow = defineLimit({ capacity: 10, refillPerSecond: 0.001, name: 'slow' });

async function keySlot(key: string): Promise<number> {
  return Number(await admin.call('CLUSTER', 'KEYSLOT', key));
}

/** The master that serves `slot`, from CLUSTER SLOTS. */
async function ownerOf(slot: number): Promise<ClusterNode> {
  const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
  const range = ranges.find(([from, to]) => from <= slot && slot <= to)!;
  return cluster.nodes.find((node) => node.id === range[2][2])!;
}

describe('keys', () => {
  it('puts every limit of one user in one slot: the slot of the user’s tag', async () => {
    const prefix = uniquePrefix('slot');
    for (const user of ['user:42', '{evil}', 'a}b{c', '', '😀', 'x'.repeat(10_000), 'plain']) {
      const keys = bucketKeys(prefix, user, [perSecond, perHour, slow]);
      const slots = await Promise.all(keys.map(keySlot));
      expect(new Set(slots).size).toBe(1);
      expect(slots[0]).toBe(await keySlot(keyTag(user)));
    }
  });

  it('spreads users over the masters', async () => {
    const prefix = uniquePrefix('spread');
    const owners = new Set<string>();
    for (let i = 0; i < 60; i++) {
      owners.add((await ownerOf(await keySlot(bucketKeys(prefix, `user-${i}`, [slow])[0]!))).id);
    }
    expect(owners.size).toBe(3);
  });
});

describe('calls across the cluster', () => {
  it('takes from several limits all or nothing, for users on every master', async () => {
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('multi') });
    const users = Array.from({ length: 30 }, (_, i) => `user-${i}`);
    for (const user of users) {
      // `slow` (10) is the tighter of the two: it is the one reported.
      for (const remaining of [9, 8, 7]) {
        expect(await ops(store).take(user, [perHour, slow], 1)).toMatchObject({
          ok: true,
          remaining,
          limitIndex: 1,
        });
      }
    }
    const user = users[0]!;
    expect(await ops(store).take(user, [perHour, slow], 7)).toMatchObject({
      ok: true,
      remaining: 0,
      limitIndex: 1,
    });
    expect(await ops(store).take(user, [perHour, slow], 1)).toMatchObject({
      ok: false,
      remaining: 0,
      limitIndex: 1,
    });
    expect(await ops(store).peek(user, [perHour])).toMatchObject({ remaining: 5, limitIndex: 0 });
    expect(await ops(store).reserve(user, [perHour], 8, 1)).toMatchObject({ granted: 5, remaining: 0 });
    // 2 back to each: `slow`, far slower to fill, is the one reported.
    expect(await ops(store).credit(user, [perHour, slow], 2)).toMatchObject({ remaining: 2, limitIndex: 1 });
  });

  it('admits exactly the capacity to 4 cluster clients hammering one bucket', async () => {
    const limit = defineLimit({ capacity: 500, refillPerSecond: 0.001, name: 'hammer' });
    const prefix = uniquePrefix('hammer');
    const clients = Array.from({ length: 4 }, () => cluster.cluster(recommendedClusterOptions));
    await Promise.all(clients.map((c) => whenReady(c)));
    let admitted = 0;
    await Promise.all(
      clients.map(async (redis) => {
        const store = new RedisStore({ redis, prefix });
        for (let sent = 0; sent < 200; sent += 4) {
          const replies = await Promise.all(
            Array.from({ length: 4 }, () => ops(store).take('hot', [limit], 1)),
          );
          admitted += replies.filter((r) => r.ok).length;
        }
      }),
    );
    expect(admitted).toBe(500);
  });
});

describe('virtual shards', () => {
  /** EVALSHA calls summed over the masters (INFO commandstats). */
  async function evalshas(): Promise<number> {
    let sum = 0;
    for (const node of cluster.nodes) {
      const info = await cluster.nodeClient(node).info('commandstats');
      sum += Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0);
    }
    return sum;
  }

  it('gather many users in a few slots: one script per shard instead of one per user', async () => {
    const users = Array.from({ length: 120 }, (_, i) => `user-${i}`);
    const run = async (shards: number | undefined) => {
      const store = new RedisStore({ redis: client, prefix: uniquePrefix('shards'), shards });
      await ops(store).peek('warm', [slow]);
      const before = await evalshas();
      const replies = await Promise.all(users.map((user) => ops(store).take(user, [slow], 2)));
      expect(replies.every((r) => r.ok && r.remaining === 8)).toBe(true);
      return (await evalshas()) - before;
    };
    const perUser = await run(undefined);
    const sharded = await run(6);
    console.info(`120 users in one tick: ${perUser} EVALSHAs one slot per user, ${sharded} with 6 shards`);
    expect(perUser).toBeGreaterThanOrEqual(100);
    expect(sharded).toBeLessThanOrEqual(6 * 2);
  });

  it('name a key’s call group: the slot of its buckets, with shards or without', async () => {
    const prefix = uniquePrefix('group');
    const plain = new RedisStore({ redis: client, prefix });
    const sharded = new RedisStore({ redis: client, prefix, shards: 6 });
    const groups = new Set<number>();
    for (const user of ['user:42', '{evil}', '', 'x'.repeat(500), 'plain']) {
      expect(plain.groupOf(user)).toBe(await keySlot(bucketKeys(prefix, user, [slow])[0]!));
      expect(sharded.groupOf(user)).toBe(await keySlot(bucketKeys(prefix, user, [perHour], 6)[0]!));
      groups.add(sharded.groupOf(user));
    }
    expect(groups.size).toBeLessThanOrEqual(6);
  });
});

describe('a slot migrated while a client holds the old slot map', () => {
  it('follows the MOVED redirection to the new owner, with the bucket’s state moved along', async () => {
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('moved') });
    const user = 'migrating-user';
    const limits = [perHour, slow];
    expect(await ops(store).take(user, limits, 1)).toMatchObject({ ok: true, remaining: 9 });

    const keys = bucketKeys(store.prefix, user, limits);
    const slot = await keySlot(keys[0]!);
    const source = await ownerOf(slot);
    const target = cluster.nodes.find((node) => node.id !== source.id)!;
    expect(client.slots[slot]?.[0]).toBe(`${source.host}:${source.port}`);

    const from = cluster.nodeClient(source);
    const to = cluster.nodeClient(target);
    await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
    await from.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
    const moving = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    expect([...moving].sort()).toEqual([...keys].sort());
    await from.call('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...moving);
    for (const node of [target, source, ...cluster.nodes.filter((n) => n !== target && n !== source)]) {
      await cluster.nodeClient(node).call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    }
    const movedBefore = await movedErrors(from);

    // The client still maps the slot to the source: the source answers MOVED, ioredis follows.
    expect(await ops(store).take(user, limits, 1)).toMatchObject({ ok: true, remaining: 8 });
    expect(await movedErrors(from)).toBeGreaterThan(movedBefore);
    expect(client.slots[slot]?.[0]).toBe(`${target.host}:${target.port}`);
    expect(await to.exists(...keys)).toBe(2);
    expect(await from.call('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0);
    expect(await ops(store).peek(user, limits)).toMatchObject({ remaining: 8, limitIndex: 1 });
  });
});

describe('a node connection that drops with a take in flight', () => {
  /** Sends a take, cuts its node's socket under it at once; reports the outcome and tokens taken. */
  async function cutDuringTake(options: ClusterOptions) {
    const redis = cluster.cluster(options);
    await whenReady(redis);
    const store = new RedisStore({ redis, prefix: uniquePrefix('cut') });
    await ops(store).peek('k', [slow]); // loads the script on the node's connection
    const owner = await ownerOf(await keySlot(bucketKeys(store.prefix, 'k', [slow])[0]!));
    const node = redis.nodes('master').find((n) => n.options.port === owner.port)!;
    const outcome = await takeWhileCutting(store, 'k', [slow], () => destroySocket(node));
    await new Promise((resolve) => setTimeout(resolve, 300)); // past any retry ioredis would make
    const taken = 10 - (await ops(store).peek('k', [slow])).remaining;
    redis.disconnect();
    return { ...outcome, taken };
  }

  it('is never sent again with recommendedClusterOptions (it fails and the limiter decides)', () =>
    expectNeverResent(() => cutDuringTake(recommendedClusterOptions)));

  it('is sent again, and counted twice, with ioredis’ default retryDelayOnFailover (100 ms)', () =>
    expectResentAndCountedTwice(() =>
      cutDuringTake({ ...recommendedClusterOptions, retryDelayOnFailover: 100 }),
    ));
});

/** `errorstat_MOVED:count` of a node (Redis 7 keeps error statistics). */
async function movedErrors(node: Redis): Promise<number> {
  const info = await node.info('errorstats');
  const match = /errorstat_MOVED:count=(\d+)/.exec(info);
  return match ? Number(match[1]) : 0;
}

describe('whenReady', () => {
  it('resolves for a Cluster once the client has a connection open to every master', async () => {
    const name = uniquePrefix('ready').replaceAll('-', '_');
    const named = cluster.cluster({
      ...recommendedClusterOptions,
      redisOptions: { ...recommendedClusterOptions.redisOptions, connectionName: name },
    });
    try {
      await whenClientReady(named);
      const lists = await Promise.all(
        cluster.nodes.map(async (node) => String(await cluster.nodeClient(node).call('CLIENT', 'LIST'))),
      );
      expect(lists.map((list) => list.includes(` name=${name} `))).toEqual(cluster.nodes.map(() => true));
    } finally {
      named.disconnect();
    }
  });
});

describe.each(['ioredis', 'iovalkey'] as const)('whenReady on an %s Cluster, a master in trouble', (kind) => {
  it('gives up at its timeout when a master does not answer', async () => {
    const late = await connectCluster(kind, cluster.nodes);
    const paused = cluster.nodeClient(cluster.nodes[2]!);
    try {
      await paused.call('CLIENT', 'PAUSE', '1000', 'ALL');
      const startedAt = performance.now();
      await expect(whenClientReady(late.client, 300)).rejects.toThrow(
        'client not ready in 300 ms: a Cluster master did not answer PING',
      );
      // Before: the pause's end (1,569 ms behind one of 1.5 s).
      expect(performance.now() - startedAt).toBeLessThan(300 + 200);
    } finally {
      await paused.call('CLIENT', 'UNPAUSE');
      late.close();
    }
  });

  it('tries again when a master connection drops while it waits', async () => {
    const dropped = await connectCluster(kind, cluster.nodes);
    const masters = () => (dropped.client as Cluster).nodes('master');
    try {
      const ready = whenClientReady(dropped.client, 2000);
      // Before: the PING on it failed with "Connection is closed." and whenReady with it; then, tried
      // again without the slot table read anew, it answered for the two masters left in the pool.
      destroySocket(masters()[1]!);
      await expect(ready).resolves.toBeUndefined();
      expect(await Promise.all(masters().map((node) => node.ping()))).toEqual(['PONG', 'PONG', 'PONG']);
    } finally {
      dropped.close();
    }
  });
});
