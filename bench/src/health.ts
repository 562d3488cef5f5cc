import { type ChildProcess, fork } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { DEFAULT_TIMEOUT_MS } from '@tiered-limiter/local';

/**
 * What the machine and Redis were like while a row ran. A failure-policy decision while Redis
 * answered every probe is marked (`policyMark`): as the deciding process's own fault when every
 * PING came within the store timeout, else as Redis being slow at times, which on 2 shared cores
 * it was (the 8-process rows' breaker openings, traced: Redis waiting 94–271 ms for a core; docs/DECISIONS.md).
 */
export interface Health {
  /** Every probe PING answered, without error, within `PROBE_TIMEOUT_MS`; null when not probed. */
  readonly redisHealthy: boolean | null;
  /** What the probe, another client in another process, saw: PINGs sent, failed or late, latency. */
  readonly probe: ProbeReport | null;
  /** Event-loop delay of this process (`monitorEventLoopDelay`, 10 ms resolution), in ms. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

export interface ProbeReport {
  readonly sent: number;
  readonly failed: number;
  /**
   * PINGs answered, but slower than `PROBE_SLOW_MS`: moments when a limiter's call would have
   * timed out on Redis's side, not its own. Absent in results written before it was counted.
   */
  readonly slow?: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export const PROBE_EVERY_MS = 10;
/** A PING unanswered this long counts as Redis not healthy. */
export const PROBE_TIMEOUT_MS = 1000;
/** A PING answered slower than this, the limiters' default store timeout, counts as slow. */
export const PROBE_SLOW_MS = DEFAULT_TIMEOUT_MS;
const PROBE_WORKER = fileURLToPath(new URL('./probe-worker.mjs', import.meta.url));

/** Windows of a probe: `window()` starts one, its `stop()` resolves what the probe saw in it. */
export interface ProbeWindows {
  window(): { stop(): Promise<ProbeReport> };
}

type ProbeMessage = { readonly type: 'ready' } | { readonly type: 'report'; readonly report: ProbeReport };

/**
 * An independent Redis client in a process of its own (`probe-worker.mjs`): neither its verdict
 * nor its latencies depend on the bench's event loop, so it tells a slow Redis from a stalled
 * bench, and its PING latency is what another user of the server sees meanwhile.
 */
export class Probe implements ProbeWindows {
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess) {
    this.#child = child;
  }

  static async start(url: string): Promise<Probe> {
    const options = { url, everyMs: PROBE_EVERY_MS, timeoutMs: PROBE_TIMEOUT_MS, slowMs: PROBE_SLOW_MS };
    const child = fork(PROBE_WORKER, [JSON.stringify(options)], { execArgv: [], stdio: 'inherit' });
    const probe = new Probe(child);
    await probe.#next('ready');
    return probe;
  }

  #next<T extends ProbeMessage['type']>(type: T): Promise<Extract<ProbeMessage, { type: T }>> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the Redis probe exited (${code})`));
      const onMessage = (message: ProbeMessage) => {
        if (message.type !== type) return;
        this.#child.off('message', onMessage).off('exit', onExit);
        resolve(message as Extract<ProbeMessage, { type: T }>);
      };
      this.#child.on('message', onMessage).once('exit', onExit);
    });
  }

  /** Starts a window; its `stop()` resolves what the probe saw in it. */
  window(): { stop(): Promise<ProbeReport> } {
    this.#child.send({ type: 'start' });
    return {
      stop: async () => {
        const report = this.#next('report');
        this.#child.send({ type: 'stop' });
        return (await report).report;
      },
    };
  }

  close(): void {
    if (this.#child.connected) this.#child.disconnect();
  }
}

/** Watches the event loop, and Redis through `probe` when given, until `stop()`. */
export function watchHealth(probe: ProbeWindows | undefined): { stop(): Promise<Health> } {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const window = probe?.window();
  return {
    async stop() {
      loop.disable();
      const report = window === undefined ? null : await window.stop();
      return {
        redisHealthy: report === null ? null : report.sent > 0 && report.failed === 0,
        probe: report,
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

/**
 * How a row's policy decisions read against the probe: `'own'` (⚠) when Redis answered every
 * probe within the store timeout, so the timeouts were the deciding process's (the target that a
 * stall of its own never opens the breaker, missed); `'slow'` (⧗) when it answered every probe
 * but some slower than the store timeout, so the policy did as declared for a slow Redis;
 * `undefined` when there were none, or Redis failed probes. A row with no probe (a Cluster row,
 * on a Cluster of its own) had no fault injected either: `'own'`.
 */
export function policyMark(policy: PolicyCount | null, health: Health): 'own' | 'slow' | undefined {
  if (policy === null || policy.allowed + policy.denied === 0 || health.redisHealthy === false)
    return undefined;
  return (health.probe?.slow ?? 0) > 0 ? 'slow' : 'own';
}

/** The sign of `policyMark` in a table. */
export const MARK_SIGN = { own: '⚠', slow: '⧗' } as const;

/** The policy cell of a table: `—` unknown, `0`, or the count, marked as `policyMark` says. */
export function policyCell(policy: PolicyCount | null, health: Health): string {
  if (policy === null) return '—';
  const total = policy.allowed + policy.denied;
  if (total === 0) return '0';
  const mark = policyMark(policy, health);
  return mark === undefined
    ? total.toLocaleString('en-US')
    : `${total.toLocaleString('en-US')} ${MARK_SIGN[mark]}`;
}

/** `p99 / max` of the event-loop delay, in ms. */
export function loopCell(health: Pick<Health, 'loopDelayP99Ms' | 'loopDelayMaxMs'>): string {
  const ms = (n: number) => (n < 10 ? n.toFixed(1) : n.toFixed(0));
  return `${ms(health.loopDelayP99Ms)} / ${ms(health.loopDelayMaxMs)} ms`;
}

/** The note under every table with a policy column. */
export const POLICY_NOTE =
  '**policy**: decisions made by the failure policy (a store call failed or timed out), not by the limit: ' +
  'counted apart, never as admitted or denied by the limit. The probe is a client in a process of its own ' +
  `(a PING every ${PROBE_EVERY_MS} ms; late past ${PROBE_TIMEOUT_MS} ms counted as failed). **⚠**: policy ` +
  `decisions while the probe saw Redis answer every PING within the ${PROBE_SLOW_MS} ms store timeout: the ` +
  "timeouts were the deciding process's own, as **loop p99 / max** (`monitorEventLoopDelay`) shows. **⧗**: " +
  `policy decisions while Redis answered every PING, but some slower than ${PROBE_SLOW_MS} ms (Redis waited ` +
  'for a core on 2 shared cores): the policy did as declared for a slow store. **other client p99**: that ' +
  "probe's PING latency, what another user of the server saw meanwhile. `—`: the limiter cannot tell " +
  "(rate-limiter-flexible's insurance limiter decides silently).";
