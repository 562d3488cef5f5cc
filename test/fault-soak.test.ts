/**
 * Faults at random on a real Redis, with every limiter and every failure policy under load at
 * once: pauses, frozen and killed servers, flushed scripts and dropped connections, one after
 * another in an order each run draws afresh, while decisions, management calls, `acquire`s and
 * closes go on. The scripted fault tests (`faults.test.ts`) take one fault at a time; this one
 * takes them as they come, a fault on the heels of the recovery from the last one. Every run has
 * a new seed, printed on failure; `SOAK_SEED` replays one and `SOAK_MS` runs longer.
 */
import { defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import {
  CLIENT_KINDS,
  type ClientKind,
  connectServer,
  type KindClient,
  msUntilStoreAnswers,
  type SoakLimiter,
  type SoakSubject,
  seededRandom,
  serverFault,
  soak,
  uniquePrefix,
  whenReady,
} from '@tiered-limiter/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { redisForFile } from './src/redis-for-file.js';

const TIMEOUT_MS = 20;
/** The README's promise, with the margin the other fault tests keep on a loaded 2-core machine. */
const CALL_BUDGET_MS = TIMEOUT_MS + 80;
const CLOSE_BUDGET_MS = 1000 + 250;
/** Back on Redis: a breaker cooldown and the client's reconnect delay, plus the margin. */
const RECOVERY_MS = 250 + 1000 + 250;
const RUN_MS = Number(process.env.SOAK_MS ?? 12_000);
const SEED = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
/** The limiters' client library: `SOAK_CLIENT`, else drawn by the seed, so a seed replays it too. */
const KIND = (process.env.SOAK_CLIENT ?? CLIENT_KINDS[SEED % CLIENT_KINDS.length]) as ClientKind;
const INSTANCES = 2;
const LIMITS = [
  defineLimit({ capacity: 50, refillPerSecond: 25, name: 'soak' }),
  defineLimit({ capacity: 40, refillPerSecond: 20, name: 'soak' }),
];

const server = redisForFile();
let admin: Redis;
const clients: KindClient[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  admin = server.client({ maxRetriesPerRequest: 1 });
  admin.on('error', () => {});
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
  { kind: 'tiered', policy: 'local' },
  { kind: 'optimistic', policy: 'open' },
  { kind: 'optimistic', policy: 'local' },
  { kind: 'request', policy: 'open' },
  { kind: 'request', policy: 'closed' },
  { kind: 'request', policy: 'local' },
];

async function connect(): Promise<object> {
  const client = await connectServer(KIND, server);
  clients.push(client);
  return client.client;
}

async function limiterOf(config: (typeof CONFIGS)[number], prefix: string): Promise<SoakLimiter> {
  const common = {
    redis: await connect(),
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

it(
  'decides every request by its policy within budget, recovers, and leaks nothing',
  async () => {
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    // A replacement limiter is another instance of the same limit: same options, same prefix.
    const makers = new Map<SoakSubject, () => Promise<SoakLimiter>>();
    const subjects: SoakSubject[] = [];
    for (const config of CONFIGS) {
      const prefix = uniquePrefix(`soak-${config.kind}-${config.policy}`);
      const make = () => limiterOf(config, prefix);
      const subject = {
        name: `${config.kind} ${config.policy}`,
        policy: config.policy,
        tiered: config.kind !== 'request',
        limiters: await Promise.all(Array.from({ length: INSTANCES }, make)),
      };
      makers.set(subject, make);
      subjects.push(subject);
    }
    const restartable = server.source === 'process';
    const target = {
      server,
      admin,
      restartable,
      pid: async () => {
        if (!restartable) return undefined;
        const info = await admin.info('server');
        return Number(/process_id:(\d+)/.exec(info)?.[1]);
      },
    };
    // Faults draw from a stream of their own, so a seed replays the same faults whatever the load.
    const faultRandom = seededRandom(SEED + 1);
    const report = await soak(subjects, {
      fault: () => serverFault(target, faultRandom),
      random: seededRandom(SEED),
      runMs: RUN_MS,
      budgets: { callMs: CALL_BUDGET_MS, closeMs: CLOSE_BUDGET_MS },
      limits: LIMITS,
      replace: (subject) => makers.get(subject)!(),
    });
    const seen = `seed ${SEED}, ${KIND}; faults: ${report.faults.map((f) => `${f.fromMs.toFixed(0)} ${f.what}`).join(', ')}`;

    // Faults happened (one at least every 4 s: a wait of at most 1.8 s, then the fault), and the
    // policies had work to do.
    expect(report.faults.length, seen).toBeGreaterThanOrEqual(Math.floor((RUN_MS - 2500) / 4000));
    expect(
      report.faults.filter((f) => f.what.includes('failed')),
      seen,
    ).toEqual([]);
    expect(report.byPolicy, seen).toBeGreaterThan(0);
    // Every decision by its declared policy and within the timeout plus tens of ms, beyond any stall
    // of this process (which lengthens a request's budget by as long); every management call and
    // close() within its budget so counted, never rejected.
    expect(report.wrongPolicy, seen).toEqual([]);
    expect(
      report.slowest.ms - report.slowest.stalledMs,
      `${seen}; slowest: ${report.slowest.what}, ${report.slowest.ms.toFixed(1)} ms of which ${report.slowest.stalledMs.toFixed(1)} the loop stalled`,
    ).toBeLessThanOrEqual(CALL_BUDGET_MS);
    expect(report.overruns, seen).toEqual([]);

    // Recovery by itself: every limiter is back on Redis once the faults stop.
    for (const subject of subjects) {
      for (const [i, limiter] of subject.limiters.entries()) {
        const ms = await msUntilStoreAnswers(limiter, `back-${i}`, RECOVERY_MS);
        expect(ms, `${seen}; ${subject.name} #${i} back on Redis`).toBeLessThanOrEqual(RECOVERY_MS);
      }
    }

    const closing = subjects.flatMap((s) => s.limiters.map((l) => l.close()));
    await Promise.all(closing);
    for (const client of clients.splice(0)) client.close();
    expect(unhandled, seen).toEqual([]);
    // Closed limiters hold no timers: the process may exit.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const timersAfter = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    expect(timersAfter, seen).toBeLessThanOrEqual(timersBefore);
  },
  RUN_MS + 60_000,
);
