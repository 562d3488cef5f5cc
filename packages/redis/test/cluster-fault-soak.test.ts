/**
 * `test/fault-soak.test.ts` on a real 3-master Cluster: limiters of each kind and policy under load
 * while one master after another is paused, frozen (`SIGSTOP`, shorter than the node timeout, so no
 * failover), has its scripts flushed or its connections dropped, or gives the slot of a key in use
 * to another master (keys moved in rounds, as redis-cli does). Each run draws a new seed, printed
 * on failure; `SOAK_SEED` replays the faults, `SOAK_CLIENT` picks the client library (else the seed
 * draws it) and `SOAK_MS` runs longer.
 */
import {
  type ClusterNode,
  runSoak,
  SOAK_KEYS,
  SOAK_LIMITS,
  type SoakConfig,
  soakSettings,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { beforeAll, it } from 'vitest';
import { bucketKeys } from '../src/index.js';
import { clusterForFile } from './cluster-file.js';

const { runMs: RUN_MS, seed: SEED, kind: KIND } = soakSettings();
const CONFIGS: readonly SoakConfig[] = [
  { kind: 'tiered', policy: 'open' },
  { kind: 'tiered', policy: 'closed' },
  { kind: 'optimistic', policy: 'local' },
  { kind: 'request', policy: 'closed' },
  { kind: 'request', policy: 'local' },
];

const { cluster, connect, ownerOf, startMigration, finishMigration } = clusterForFile();
let admin: Redis;

beforeAll(async () => {
  admin = cluster().nodeClient(cluster().nodes[0]!);
  await whenReady(admin);
});

/** One fault on one master, drawn with `random`; says what it was once it is over. */
async function clusterFault(random: () => number, prefixes: readonly string[]): Promise<string> {
  const nodes = cluster().nodes;
  const node = nodes[Math.floor(random() * nodes.length)]!;
  const on = cluster().nodeClient(node);
  const kind = Math.floor(random() * 5);
  const ms = 50 + Math.floor(random() * 700);
  const sleep = () => new Promise((resolve) => setTimeout(resolve, ms));
  const at = `:${node.port}`;
  try {
    if (kind === 0) {
      await on.call('CLIENT', 'PAUSE', String(ms), 'ALL');
      await sleep();
      return `CLIENT PAUSE ${ms} ${at}`;
    }
    if (kind === 1) {
      await on.script('FLUSH');
      return `SCRIPT FLUSH ${at}`;
    }
    if (kind === 2) {
      await on.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      return `CLIENT KILL TYPE normal ${at}`;
    }
    if (kind === 3) {
      const pid = Number(/process_id:(\d+)/.exec(await on.info('server'))?.[1]);
      process.kill(pid, 'SIGSTOP');
      await sleep();
      process.kill(pid, 'SIGCONT');
      return `SIGSTOP ${ms} ${at}`;
    }
    const prefix = prefixes[Math.floor(random() * prefixes.length)]!;
    const key = SOAK_KEYS[Math.floor(random() * SOAK_KEYS.length)]!;
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', bucketKeys(prefix, key, SOAK_LIMITS)[0]!));
    const from = await ownerOf(admin, slot);
    const to = nodes.find((n: ClusterNode) => n.id !== from.id)!;
    const migration = await startMigration(slot, admin, to);
    await finishMigration(migration, 5);
    return `slot ${slot} (${key}) :${from.port} → :${to.port}`;
  } catch (error) {
    return `fault ${kind} ${at} failed: ${(error as Error).message}`;
  } finally {
    on.disconnect();
  }
}

it(
  'decides every request by its policy within budget, recovers, and leaks nothing',
  async () => {
    await runSoak({
      configs: CONFIGS,
      // A client of its own per instance, as a fleet has.
      connect: () => connect(KIND),
      fault: clusterFault,
      seed: SEED,
      runMs: RUN_MS,
      label: `${KIND} Cluster`,
    });
  },
  RUN_MS + 90_000,
);
