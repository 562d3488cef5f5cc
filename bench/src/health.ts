import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Redis } from 'ioredis';

/**
 * What the machine and Redis were like while a row ran. A failure-policy decision while Redis
 * answered every probe is the process's fault (its own event loop stalled past the store timeout),
 * not the store's: the tables mark such rows, beside the loop delay that explains them.
 */
export interface Health {
  /** Every probe PING answered, without error, within `PROBE_TIMEOUT_MS`; null when not probed. */
  readonly redisHealthy: boolean | null;
  /** PINGs sent, and how many failed or were late. */
  readonly probes: number;
  readonly probesFailed: number;
  /** Event-loop delay of this process (`monitorEventLoopDelay`, 10 ms resolution), in ms. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

export const PROBE_EVERY_MS = 50;
/** A PING unanswered this long counts as Redis not healthy: far past any loop stall seen here. */
export const PROBE_TIMEOUT_MS = 1000;

/** Watches the event loop, and Redis through `probe` (a client of its own) when given, until `stop()`. */
export function watchHealth(probe: Redis | undefined): { stop(): Promise<Health> } {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  let probes = 0;
  let probesFailed = 0;
  const pending = new Set<Promise<void>>();
  const ping = () => {
    probes++;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('late')), PROBE_TIMEOUT_MS);
    });
    const done: Promise<void> = Promise.race([probe!.ping(), late])
      .then(
        () => {},
        () => {
          probesFailed++;
        },
      )
      .finally(() => {
        clearTimeout(timer);
        pending.delete(done);
      });
    pending.add(done);
  };
  const interval = probe === undefined ? undefined : setInterval(ping, PROBE_EVERY_MS);
  return {
    async stop() {
      clearInterval(interval);
      await Promise.all(pending);
      loop.disable();
      return {
        redisHealthy: probe === undefined ? null : probes > 0 && probesFailed === 0,
        probes,
        probesFailed,
        loopDelayP99Ms: loop.percentile(99) / 1e6,
        loopDelayMaxMs: loop.max / 1e6,
      };
    },
  };
}

/** Decisions of the failure policy in a row: `null` when the limiter cannot say. */
export interface PolicyCount {
  readonly allowed: number;
  readonly denied: number;
}

/** The policy cell of a table: `—` unknown, `0`, or the count, marked `⚠` when Redis was healthy. */
export function policyCell(policy: PolicyCount | null, health: Health): string {
  if (policy === null) return '—';
  const total = policy.allowed + policy.denied;
  if (total === 0) return '0';
  return health.redisHealthy ? `${total.toLocaleString('en-US')} ⚠` : total.toLocaleString('en-US');
}

/** `p99 / max` of the event-loop delay, in ms. */
export function loopCell(health: Pick<Health, 'loopDelayP99Ms' | 'loopDelayMaxMs'>): string {
  const ms = (n: number) => (n < 10 ? n.toFixed(1) : n.toFixed(0));
  return `${ms(health.loopDelayP99Ms)} / ${ms(health.loopDelayMaxMs)} ms`;
}

/** The note under every table with a policy column. */
export const POLICY_NOTE =
  '**policy**: decisions made by the failure policy (a store call failed or timed out), not by the limit: ' +
  'counted apart, never as admitted or denied by the limit. **⚠**: policy decisions while Redis answered ' +
  `every probe (a PING every ${PROBE_EVERY_MS} ms from a client of its own): the timeout fired because this ` +
  "process's own event loop stalled, as **loop p99 / max** (`monitorEventLoopDelay`) shows. `—`: the limiter " +
  "cannot tell (rate-limiter-flexible's insurance limiter decides silently).";
