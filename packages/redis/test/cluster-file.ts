import {
  type ClientKind,
  type ClusterNode,
  connectCluster,
  type KindClient,
  type RedisCluster,
  startCluster,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** A slot on its way from one master to another: both nodes, and a client of each. */
export interface Migration {
  readonly slot: number;
  readonly source: ClusterNode;
  readonly target: ClusterNode;
  readonly from: Redis;
  readonly to: Redis;
}

/** A test file's own 3-master Cluster, and what its tests read of it, connect to it and move on it. */
export interface ClusterFile {
  /** The file's Cluster, started before its first test. */
  cluster(): RedisCluster;
  /** A client of `kind` to the Cluster (`options` as `connectCluster` takes them), closed after the test. */
  connect(kind: ClientKind, options?: Parameters<typeof connectCluster>[2]): Promise<KindClient>;
  /** The master serving `slot` now, from `CLUSTER SLOTS` asked of `admin`. */
  ownerOf(admin: Redis, slot: number): Promise<ClusterNode>;
  /**
   * Starts moving `slot` from its owner to `target` (by default another master): the target
   * IMPORTING, then the source MIGRATING (redis-cli's order). Keys stay on the source until
   * `moveKeys` moves them.
   */
  startMigration(slot: number, admin: Redis, target?: ClusterNode): Promise<Migration>;
  /** Moves `keys` (of the migrating slot) from the source to the target. */
  moveKeys(migration: Migration, keys: readonly string[]): Promise<void>;
  /**
   * Moves every key the source still holds in the slot, `pauseMs` between rounds of 50, then
   * gives the slot to the target on every node, the target first: an importing target bumps its
   * config epoch, so the cluster bus never hands the slot back (a slot given with SETSLOT NODE
   * alone was, once in 40 runs: clients then bounced between two masters, "Too many Cluster
   * redirections"). All of them: the source refuses SETSLOT NODE while it holds keys of the slot
   * ("still hold keys") unless the cluster bus told it of the new owner first, a race that a
   * loaded machine loses.
   */
  finishMigration(migration: Migration, pauseMs?: number): Promise<void>;
}

/**
 * Starts a 3-master Cluster before the file's tests and stops it after them; clients a test
 * connects are closed after it. Called at the top of the file.
 */
export function clusterForFile(): ClusterFile {
  let started: RedisCluster | undefined;
  const opened: KindClient[] = [];
  beforeAll(async () => {
    started = await startCluster({ masters: 3 });
  });
  afterEach(() => {
    for (const client of opened.splice(0)) client.close();
  });
  afterAll(() => started?.stop());
  const cluster = () => {
    if (started === undefined) throw new Error('the Cluster starts in beforeAll');
    return started;
  };
  const ownerOf = async (admin: Redis, slot: number) => {
    const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const id = ranges.find(([from, to]) => from <= slot && slot <= to)![2][2];
    return cluster().nodes.find((node) => node.id === id)!;
  };
  const moveKeys = async ({ from, target }: Migration, keys: readonly string[]) => {
    await from.call('MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', ...keys);
  };
  return {
    cluster,
    ownerOf,
    moveKeys,
    async connect(kind, options) {
      const client = await connectCluster(kind, cluster().nodes, options);
      opened.push(client);
      return client;
    },
    async startMigration(slot, admin, target) {
      const source = await ownerOf(admin, slot);
      const to = target ?? cluster().nodes.find((node) => node.id !== source.id)!;
      const fromClient = cluster().nodeClient(source);
      const toClient = cluster().nodeClient(to);
      await toClient.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
      await fromClient.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', to.id);
      return { slot, source, target: to, from: fromClient, to: toClient };
    },
    async finishMigration(migration, pauseMs = 0) {
      const { slot, source, target, from } = migration;
      for (let round = 0; round < 1000; round++) {
        const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 50)) as string[];
        if (keys.length === 0) break;
        await moveKeys(migration, keys);
        if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
      for (const node of [target, source, ...cluster().nodes.filter((n) => n !== target && n !== source)]) {
        await cluster().nodeClient(node).call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
      }
    },
  };
}
