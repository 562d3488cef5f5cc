import type { Decision, FailurePolicy, LimitSpec } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import type { Redis } from 'ioredis';
import { LoopStalls, type Span } from './loop-stalls.js';
import type { RedisServer } from './redis-server.js';

/** A limiter under soak, through the methods every store-backed limiter has. */
export type SoakLimiter = TieredLimiter | RequestLimiter;

/** One limit's configuration under soak: its limiters (one per instance) share a prefix. */
export interface SoakSubject {
  readonly name: string;
  readonly policy: FailurePolicy;
  /** Whether it has `tryConsume` and `acquire` (the two-tier limiter). */
  readonly tiered: boolean;
  readonly limiters: SoakLimiter[];
}

/** A fault the soak put on the server, in ms from the soak's start. */
export interface SoakFault {
  readonly what: string;
  readonly fromMs: number;
  readonly toMs: number;
}

/** What a soak saw; every list holds what broke a promise, with when. */
export interface SoakReport {
  readonly faults: SoakFault[];
  readonly decisions: number;
  readonly byPolicy: number;
  /**
   * The decision that took longest beyond the stalls of this process's event loop while it waited
   * (a stall lengthens a request's budget by as long: README, When Redis fails): its time, the
   * stalls in it, and what it was.
   */
  readonly slowest: { readonly ms: number; readonly stalledMs: number; readonly what: string };
  /** Policy decisions that were not what the subject's policy says. */
  readonly wrongPolicy: string[];
  /** Management calls that rejected or outran their budget, and `close()`s that did. */
  readonly overruns: string[];
}

/** What the soak may do to the server. */
export interface SoakServer {
  readonly server: RedisServer;
  readonly admin: Redis;
  /** The server's pid, when it is a process of this machine (`SIGSTOP` works on it). */
  readonly pid: () => Promise<number | undefined>;
  /** Whether it can be killed and restarted (not a `REDIS_URL` server). */
  readonly restartable: boolean;
}

/** The soak's budgets, from the limiters' options. */
export interface SoakBudgets {
  /** The limiters' store timeout: a decision that took longer is weighed against the loop's stalls. */
  readonly timeoutMs: number;
  /** A decision's or a management call's: the store timeout plus the margin a loaded machine keeps. */
  readonly callMs: number;
  /** `close()`'s: its wait plus the margin. */
  readonly closeMs: number;
}

/** The keys the load asks for besides sparse ones. */
export const SOAK_KEYS = ['hot', 'warm-0', 'warm-1', 'warm-2', 'warm-3', 'warm-4'];

/**
 * Runs load on every subject's limiters and random faults on the server for `runMs`: decisions
 * (`tryConsume` first where there is one), and now and then a `peek`, `reward`, `penalty`, `reset`,
 * `block`, `setLimits`, `acquire`, or a limiter closed and replaced by `replace`; and `fault` one
 * fault after another (`serverFault` for one server). Every loop is bounded in time.
 */
export async function soak(
  subjects: readonly SoakSubject[],
  options: {
    /** Puts one fault on the server, drawn with `random`, resolves once it is over, says what it was. */
    readonly fault: (random: () => number) => Promise<string>;
    /** The faults' own stream, for them and the gaps between them (the load has `random`). */
    readonly faultRandom: () => number;
    readonly random: () => number;
    readonly runMs: number;
    readonly budgets: SoakBudgets;
    readonly limits: readonly LimitSpec[];
    readonly replace: (subject: SoakSubject) => Promise<SoakLimiter>;
    /** Called once a replaced limiter has closed: its instance leaves, and takes its client with it. */
    readonly retire: (limiter: SoakLimiter) => void;
  },
): Promise<SoakReport> {
  const { random, runMs, budgets, limits, replace, retire, fault, faultRandom } = options;
  const start = performance.now();
  const at = () => performance.now() - start;
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const report = {
    faults: [] as SoakFault[],
    decisions: 0,
    byPolicy: 0,
    slowest: { ms: 0, stalledMs: 0, what: '' },
    wrongPolicy: [] as string[],
    overruns: [] as string[],
  };

  const replacing = new Set<SoakSubject>();
  const background: Promise<void>[] = [];
  // Weighed against the loop's stalls once the run is over (`LoopStalls`): the calls that took
  // longer than their budget, and the decisions that took longer than the timeout.
  const slowCalls: (Span & { what: string; budgetMs: number; atMs: number })[] = [];
  const slowDecisions: (Span & { subject: SoakSubject; key: string; atMs: number })[] = [];
  const timed = async <T>(what: string, budgetMs: number, call: () => Promise<T>): Promise<T | undefined> => {
    const fromMs = performance.now();
    try {
      const value = await call();
      const toMs = performance.now();
      if (toMs - fromMs > budgetMs) slowCalls.push({ fromMs, toMs, what, budgetMs, atMs: at() });
      return value;
    } catch (error) {
      report.overruns.push(`${what}: rejected at ${at().toFixed(0)}: ${(error as Error).message}`);
      return undefined;
    }
  };

  const decide = async (subject: SoakSubject, limiter: SoakLimiter, key: string): Promise<void> => {
    const fromMs = performance.now();
    const decision: Decision =
      (subject.tiered ? (limiter as TieredLimiter).tryConsume(key) : undefined) ??
      (await limiter.consume(key));
    const toMs = performance.now();
    const ms = toMs - fromMs;
    report.decisions++;
    if (ms > budgets.timeoutMs) slowDecisions.push({ fromMs, toMs, subject, key, atMs: at() });
    else if (ms > report.slowest.ms)
      report.slowest = { ms, stalledMs: 0, what: `${subject.name} ${key} at ${at().toFixed(0)}` };
    if (decision.tier !== 'fallback') return;
    report.byPolicy++;
    const wrong =
      decision.policy !== subject.policy ||
      (subject.policy === 'open' && !decision.allowed) ||
      (subject.policy === 'closed' && decision.allowed);
    if (wrong && report.wrongPolicy.length < 20) {
      report.wrongPolicy.push(
        `${subject.name} ${key}: ${JSON.stringify({ ...decision, error: decision.error?.code })}`,
      );
    }
  };

  const manage = async (subject: SoakSubject, index: number): Promise<void> => {
    const limiter = subject.limiters[index]!;
    const key = pick(SOAK_KEYS);
    const what = `${subject.name}#${index} ${key}`;
    const op = Math.floor(random() * 9);
    if (op === 0) await timed(`${what} peek`, budgets.callMs, () => limiter.peek(key));
    else if (op === 1) await timed(`${what} reward`, budgets.callMs, () => limiter.reward(key, 2));
    else if (op === 2) await timed(`${what} penalty`, budgets.callMs, () => limiter.penalty(key, 2));
    else if (op === 3) await timed(`${what} reset`, budgets.callMs, () => limiter.reset(key));
    else if (op === 4) limiter.block(key, 50);
    else if (op === 5) limiter.setLimits(pick(limits));
    else if (op === 6) {
      // In the background: a new instance's connection may wait out a fault before it is ready.
      if (replacing.has(subject)) return;
      replacing.add(subject);
      background.push(
        (async () => {
          subject.limiters[index] = await replace(subject);
          replacing.delete(subject);
          await timed(`${what} close`, budgets.closeMs, () => limiter.close());
          retire(limiter);
        })().catch((error: unknown) => {
          // Heard at once: a rejection left for the end is an unhandled one meanwhile.
          report.overruns.push(
            `${what} replace: rejected at ${at().toFixed(0)}: ${(error as Error).message}`,
          );
        }),
      );
    } else if (subject.tiered) {
      const maxWaitMs = Math.floor(random() * 300);
      const result = await timed(`${what} acquire ${maxWaitMs}`, maxWaitMs + budgets.callMs, () =>
        (limiter as TieredLimiter).acquire(key, 1, { maxWaitMs }),
      );
      if (result?.acquired && result.decision?.tier === 'fallback' && subject.policy === 'closed') {
        report.wrongPolicy.push(`${what}: acquired by the closed policy`);
      }
    }
  };

  const load = async (): Promise<void> => {
    for (let sparse = 0; at() < runMs; ) {
      const calls: Promise<void>[] = [];
      for (const subject of subjects) {
        for (const limiter of subject.limiters) {
          for (let i = 0; i < 3; i++) {
            const key = random() < 0.9 ? pick(SOAK_KEYS) : `sparse-${sparse++}`;
            calls.push(decide(subject, limiter, key));
          }
        }
      }
      if (random() < 0.2) {
        const subject = pick(subjects);
        calls.push(manage(subject, Math.floor(random() * subject.limiters.length)));
      }
      await Promise.all(calls);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  };

  const faults = async (): Promise<void> => {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 300 + faultRandom() * 1500));
      // None starts in the load's last 2.5 s, so the last is over before the load is (a restart
      // takes a second at most) and the caller can ask for recovery.
      if (at() > runMs - 2500) return;
      const fromMs = at();
      const what = await fault(faultRandom);
      report.faults.push({ what, fromMs, toMs: at() });
    }
  };

  const stalls = new LoopStalls();
  try {
    await Promise.all([load(), faults()]);
    await Promise.all(background);
    await stalls.settle();
  } finally {
    stalls.stop();
  }
  for (const call of slowCalls) {
    const stalledMs = stalls.during(call);
    const ms = call.toMs - call.fromMs;
    if (ms - stalledMs > call.budgetMs) {
      report.overruns.push(
        `${call.what}: ${ms.toFixed(0)} ms, ${stalledMs.toFixed(0)} of them stalled, at ${call.atMs.toFixed(0)} (budget ${call.budgetMs})`,
      );
    }
  }
  for (const slow of slowDecisions) {
    const stalledMs = stalls.during(slow);
    const ms = slow.toMs - slow.fromMs;
    if (ms - stalledMs > report.slowest.ms - report.slowest.stalledMs) {
      report.slowest = { ms, stalledMs, what: `${slow.subject.name} ${slow.key} at ${slow.atMs.toFixed(0)}` };
    }
  }
  return report;
}

/**
 * Puts one fault on a server, drawn with `random`, and resolves once it is over; says what it was:
 * `CLIENT PAUSE` (all or writes), `SCRIPT FLUSH`, `CLIENT KILL` of every other connection, and on a
 * server of this machine `SIGSTOP`/`SIGCONT` and a kill and restart.
 */
export async function serverFault(target: SoakServer, random: () => number): Promise<string> {
  const { admin, server } = target;
  const kinds = target.restartable ? 6 : 4;
  const kind = Math.floor(random() * kinds);
  const ms = 50 + Math.floor(random() * 700);
  const sleep = () => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    if (kind === 0 || kind === 1) {
      const mode = kind === 0 ? 'ALL' : 'WRITE';
      await admin.call('CLIENT', 'PAUSE', String(ms), mode);
      await sleep();
      return `CLIENT PAUSE ${ms} ${mode}`;
    }
    if (kind === 2) {
      await admin.script('FLUSH');
      return 'SCRIPT FLUSH';
    }
    if (kind === 3) {
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      return 'CLIENT KILL TYPE normal';
    }
    if (kind === 4) {
      const pid = await target.pid();
      if (pid === undefined) return 'none (no pid)';
      process.kill(pid, 'SIGSTOP');
      await sleep();
      process.kill(pid, 'SIGCONT');
      return `SIGSTOP ${ms}`;
    }
    await server.kill();
    await sleep();
    await server.restart();
    return `killed, restarted after ${ms}`;
  } catch (error) {
    return `fault ${kind} failed: ${(error as Error).message}`;
  }
}
