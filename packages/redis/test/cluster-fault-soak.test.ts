/**
 * `test/fault-soak.test.ts` on a real 3-master Cluster: limiters of each kind and policy under load
 * while one master after another is paused, frozen (`SIGSTOP`, shorter than the node timeout, so no
 * failover), has its scripts flushed or its connections dropped, or gives the slot of a key in use
 * to another master (keys moved in rounds, as redis-cli does). Each run draws a new seed, printed
 * on failure; `SOAK_SEED` replays the faults and `SOAK_MS` runs longer.
 */
import { defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import {
  type ClusterNode,
  type KindClient,
  msUntilStoreAnswers,
  type SoakLimiter,
  type SoakSubject,
  seededRandom,
  soak,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bucketKeys, createRedisLimiter, createTieredLimiter } from '../src/index.js';
import { clusterForFile } from './cluster-file.js';

const TIMEOUT_MS = 20;
const CALL_BUDGET_MS = TIMEOUT_MS + 80;
const CLOSE_BUDGET_MS = 1000 + 250;
/** Back on Redis once asked: a cooldown, the client's reconnect and slot refresh, and the margin. */
const RECOVERY_MS = 250 + 1000 + 250;
const RUN_MS = Number(process.env.SOAK_MS ?? 12_000);
const SEED = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
const INSTANCES = 2;
const LIMITS = [
  defineLimit({ capacity: 50, refillPerSecond: 25, name: 'soak' }),
  defineLimit({ capacity: 40, refillPerSecond: 20, name: 'soak' }),
];
/** The keys the soak's load asks for (`fault-soak.ts`), whose slots a fault may move. */
const LOADED_KEYS = ['hot', 'warm-0', 'warm-1', 'warm-2', 'warm-3', 'warm-4'];

const { cluster, connect, ownerOf, startMigration, finishMigration } = clusterForFile();
const clients: KindClient[] = [];
let admin: Redis;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  admin = cluster().nodeClient(cluster().nodes[0]!);
  await whenReady(admin);
  process.on('unhandledRejection', onUnhandled);
});
afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
  for (const client of clients.splice(0)) client.close();
});

const CONFIGS: { kind: 'tiered' | 'optimistic' | 'request'; policy: FailurePolicy }[] = [
  { kind: 'tiered', policy: 'open' },
  { kind: 'tiered', policy: 'closed' },
  { kind: 'optimistic', policy: 'local' },
  { kind: 'request', policy: 'closed' },
  { kind: 'request', policy: 'local' },
];

async function limiterOf(config: (typeof CONFIGS)[number], prefix: string): Promise<SoakLimiter> {
  // A client of its own per instance, as a fleet has; connect() closes it after the test.
  const client = await connect('ioredis');
  clients.push(client);
  const common = {
    redis: client.client,
    prefix,
    limits: LIMITS[0]!,
    failurePolicy: config.policy,
    timeoutMs: TIMEOUT_MS,
  };
  if (config.kind === 'request') return createRedisLimiter({ ...common, fallback: { instances: INSTANCES } });
  return createTieredLimiter({
    ...common,
    instances: INSTANCES,
    ...(config.kind === 'optimistic' ? { coldStart: { mode: 'optimistic' as const } } : {}),
  });
}

/** One fault on one master, drawn with `random`; says what it was once it is over. */
async function clusterFault(prefixes: readonly string[], random: () => number): Promise<string> {
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
    const key = LOADED_KEYS[Math.floor(random() * LOADED_KEYS.length)]!;
    const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', bucketKeys(prefix, key, LIMITS)[0]!));
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
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const makers = new Map<SoakSubject, () => Promise<SoakLimiter>>();
    const subjects: SoakSubject[] = [];
    const prefixes: string[] = [];
    for (const config of CONFIGS) {
      const prefix = uniquePrefix(`csoak-${config.kind}-${config.policy}`);
      const make = () => limiterOf(config, prefix);
      const subject = {
        name: `${config.kind} ${config.policy}`,
        policy: config.policy,
        tiered: config.kind !== 'request',
        limiters: await Promise.all(Array.from({ length: INSTANCES }, make)),
      };
      makers.set(subject, make);
      subjects.push(subject);
      prefixes.push(prefix);
    }
    const faultRandom = seededRandom(SEED + 1);
    const report = await soak(subjects, {
      fault: () => clusterFault(prefixes, faultRandom),
      random: seededRandom(SEED),
      runMs: RUN_MS,
      budgets: { callMs: CALL_BUDGET_MS, closeMs: CLOSE_BUDGET_MS },
      limits: LIMITS,
      replace: (subject) => makers.get(subject)!(),
    });
    const seen = `seed ${SEED}; faults: ${report.faults.map((f) => `${f.fromMs.toFixed(0)} ${f.what}`).join(', ')}`;

    expect(report.faults.length, seen).toBeGreaterThanOrEqual(Math.floor((RUN_MS - 2500) / 4000));
    expect(
      report.faults.filter((f) => f.what.includes('failed')),
      seen,
    ).toEqual([]);
    expect(report.byPolicy, seen).toBeGreaterThan(0);
    expect(report.wrongPolicy, seen).toEqual([]);
    expect(
      report.slowest.ms - report.slowest.stalledMs,
      `${seen}; slowest: ${report.slowest.what}, ${report.slowest.ms.toFixed(1)} ms of which ${report.slowest.stalledMs.toFixed(1)} the loop stalled`,
    ).toBeLessThanOrEqual(CALL_BUDGET_MS);
    expect(report.overruns, seen).toEqual([]);

    for (const subject of subjects) {
      for (const [i, limiter] of subject.limiters.entries()) {
        const ms = await msUntilStoreAnswers(limiter, `back-${i}`, RECOVERY_MS);
        expect(ms, `${seen}; ${subject.name} #${i} back on Redis`).toBeLessThanOrEqual(RECOVERY_MS);
      }
    }

    await Promise.all(subjects.flatMap((s) => s.limiters.map((l) => l.close())));
    for (const client of clients.splice(0)) client.close();
    expect(unhandled, seen).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const timersAfter = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    expect(timersAfter, seen).toBeLessThanOrEqual(timersBefore);
  },
  RUN_MS + 90_000,
);
