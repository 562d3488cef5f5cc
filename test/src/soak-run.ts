import { defineLimit, type FailurePolicy } from '@tiered-limiter/core';
import { createRedisLimiter, createTieredLimiter } from '@tiered-limiter/redis';
import { expect } from 'vitest';
import { CLIENT_KINDS, type ClientKind } from './client-kinds.js';
import { type SoakLimiter, type SoakSubject, soak } from './fault-soak.js';
import { msUntilStoreAnswers } from './redis-answers.js';
import { seededRandom } from './seeded-random.js';
import { uniquePrefix } from './unique-prefix.js';

/** What a soak file runs with, from its environment. */
export interface SoakSettings {
  /** `SOAK_MS`, else 12 s. */
  readonly runMs: number;
  /** `SOAK_SEED` to replay a run, else a fresh one. */
  readonly seed: number;
  /** The limiters' client library: `SOAK_CLIENT`, else drawn by the seed, so a seed replays it too. */
  readonly kind: ClientKind;
}

/** A soak file's settings, read from `SOAK_MS`, `SOAK_SEED` and `SOAK_CLIENT`. */
export function soakSettings(): SoakSettings {
  const seed = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
  return {
    runMs: Number(process.env.SOAK_MS ?? 12_000),
    seed,
    kind: (process.env.SOAK_CLIENT ?? CLIENT_KINDS[seed % CLIENT_KINDS.length]) as ClientKind,
  };
}

/** One limiter configuration a soak runs, two instances of it. */
export interface SoakConfig {
  readonly kind: 'tiered' | 'optimistic' | 'request';
  readonly policy: FailurePolicy;
}

/** What a soak test file gives `runSoak`. */
export interface SoakRunOptions {
  readonly configs: readonly SoakConfig[];
  /** A new client for one instance: the soak closes it as the instance leaves, or when the soak ends. */
  readonly connect: () => Promise<{ readonly client: object; close(): void }>;
  /**
   * One fault, drawn with `random` (`serverFault`, say); `prefixes` are the configurations' key
   * prefixes (a Cluster fault moves the slot of a key in use).
   */
  readonly fault: (random: () => number, prefixes: readonly string[]) => Promise<string>;
  readonly seed: number;
  readonly runMs: number;
  /** Said with the seed in every failure message (the client library, say). */
  readonly label: string;
}

const SOAK_TIMEOUT_MS = 20;
/** A decision's or call's budget: the README's timeout plus the margin a loaded 2-core machine keeps. */
const CALL_BUDGET_MS = SOAK_TIMEOUT_MS + 80;
/** `close()`'s: its default wait plus the margin. */
const CLOSE_BUDGET_MS = 1000 + 250;
/** Back on Redis once asked: a breaker cooldown and the client's reconnect delay, plus the margin. */
const RECOVERY_MS = 250 + 1000 + 250;
const INSTANCES = 2;
/** Two limits of one name, for `setLimits` to switch between. */
export const SOAK_LIMITS = [
  defineLimit({ capacity: 50, refillPerSecond: 25, name: 'soak' }),
  defineLimit({ capacity: 40, refillPerSecond: 20, name: 'soak' }),
];

function limiterOf(config: SoakConfig, redis: object, prefix: string): SoakLimiter {
  const common = {
    redis,
    prefix,
    limits: SOAK_LIMITS[0]!,
    failurePolicy: config.policy,
    timeoutMs: SOAK_TIMEOUT_MS,
  };
  if (config.kind === 'request') return createRedisLimiter({ ...common, fallback: { instances: INSTANCES } });
  return createTieredLimiter({
    ...common,
    instances: INSTANCES,
    ...(config.kind === 'optimistic' ? { coldStart: { mode: 'optimistic' as const } } : {}),
  });
}

/**
 * Two instances of each configuration, each on a client of its own, under `soak` with `fault`, then
 * the promises checked: faults happened and the policies decided; every decision its policy's within
 * the timeout plus 80 ms beyond the loop's own stalls; no management call or `close()` over budget or
 * rejected; every limiter back on Redis within 1.5 s of being asked; no unhandled rejection; and no
 * more timers once everything closed than before the soak began.
 */
export async function runSoak(options: SoakRunOptions): Promise<void> {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  // Each instance's client, closed as the instance leaves: a soak that kept them had 150 Cluster
  // clients in its process after 30 s, each refreshing its slot table after every fault.
  const clientOf = new Map<SoakLimiter, { close(): void }>();
  const closeClients = () => {
    for (const client of clientOf.values()) client.close();
    clientOf.clear();
  };
  process.on('unhandledRejection', onUnhandled);
  try {
    await soakAndCheck(options, clientOf, closeClients, unhandled);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    // A soak that failed half-way leaves no client reconnecting behind it.
    closeClients();
  }
}

async function soakAndCheck(
  options: SoakRunOptions,
  clientOf: Map<SoakLimiter, { close(): void }>,
  closeClients: () => void,
  unhandled: readonly unknown[],
): Promise<void> {
  const { configs, connect, fault, seed, runMs, label } = options;
  const timersBefore = activeTimers();
  // A replacement limiter is another instance of the same limit: same options, same prefix.
  const makers = new Map<SoakSubject, () => Promise<SoakLimiter>>();
  const subjects: SoakSubject[] = [];
  const prefixes: string[] = [];
  for (const config of configs) {
    const prefix = uniquePrefix(`soak-${config.kind}-${config.policy}`);
    prefixes.push(prefix);
    const make = async () => {
      const client = await connectSoon(connect);
      const limiter = limiterOf(config, client.client, prefix);
      clientOf.set(limiter, client);
      return limiter;
    };
    const subject = {
      name: `${config.kind} ${config.policy}`,
      policy: config.policy,
      tiered: config.kind !== 'request',
      limiters: await Promise.all(Array.from({ length: INSTANCES }, make)),
    };
    makers.set(subject, make);
    subjects.push(subject);
  }
  // Faults draw from a stream of their own, so a seed replays the same faults whatever the load.
  const faultRandom = seededRandom(seed + 1);
  const report = await soak(subjects, {
    fault: (random) => fault(random, prefixes),
    faultRandom,
    random: seededRandom(seed),
    runMs,
    budgets: { timeoutMs: SOAK_TIMEOUT_MS, callMs: CALL_BUDGET_MS, closeMs: CLOSE_BUDGET_MS },
    limits: SOAK_LIMITS,
    replace: (subject) => makers.get(subject)!(),
    retire: (limiter) => {
      clientOf.get(limiter)?.close();
      clientOf.delete(limiter);
    },
  });
  const seen = `seed ${seed}, ${label}; faults: ${report.faults.map((f) => `${f.fromMs.toFixed(0)} ${f.what}`).join(', ')}`;
  const { slowest } = report;
  // One line a run, pass or fail: what the soak did, for a closing note or a run to compare with.
  console.info(
    `soak ${label}, seed ${seed}: ${report.faults.length} faults, ${report.decisions} decisions ` +
      `(${report.byPolicy} by policy), slowest ${slowest.ms.toFixed(1)} ms (${slowest.stalledMs.toFixed(1)} of it stalled)`,
  );

  // Faults happened (one at least every 4 s: a wait of at most 1.8 s, then the fault), and the
  // policies had work to do.
  expect(report.faults.length, seen).toBeGreaterThanOrEqual(Math.floor((runMs - 2500) / 4000));
  expect(
    report.faults.filter((f) => f.what.includes('failed')),
    seen,
  ).toEqual([]);
  expect(report.byPolicy, seen).toBeGreaterThan(0);
  // Every decision by its declared policy and within the timeout plus tens of ms, beyond any stall
  // of this process (which lengthens a request's budget by as long); every management call and
  // close() within its budget so counted, never rejected.
  expect(report.wrongPolicy, seen).toEqual([]);
  const { ms, stalledMs, what } = slowest;
  expect(
    ms - stalledMs,
    `${seen}; slowest: ${what}, ${ms.toFixed(1)} ms of which ${stalledMs.toFixed(1)} the loop stalled`,
  ).toBeLessThanOrEqual(CALL_BUDGET_MS);
  expect(report.overruns, seen).toEqual([]);

  // Recovery by itself: every limiter is back on Redis once the faults stop.
  for (const subject of subjects) {
    for (const [i, limiter] of subject.limiters.entries()) {
      const backMs = await msUntilStoreAnswers(limiter, `back-${i}`, RECOVERY_MS);
      expect(backMs, `${seen}; ${subject.name} #${i} back on Redis`).toBeLessThanOrEqual(RECOVERY_MS);
    }
  }

  await Promise.all(subjects.flatMap((s) => s.limiters.map((l) => l.close())));
  closeClients();
  expect(unhandled, seen).toEqual([]);
  // Closed limiters hold no timers: the process may exit.
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(activeTimers(), seen).toBeLessThanOrEqual(timersBefore);
}

/** Tries a new instance's connection this many times: faults last 750 ms at most. */
const CONNECT_TRIES = 5;
const CONNECT_RETRY_MS = 250;

/**
 * `connect()`, again after a failure: a client whose connection a fault dropped while it was
 * getting ready rejects (`whenReady`: "Connection is closed."), and an instance starting during an
 * outage tries again, as a service's start would.
 */
async function connectSoon<C>(connect: () => Promise<C>): Promise<C> {
  for (let tries = 1; ; tries++) {
    try {
      return await connect();
    } catch (error) {
      if (tries === CONNECT_TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, CONNECT_RETRY_MS));
    }
  }
}

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}
