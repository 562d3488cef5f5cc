import type { GlobalStore } from '@tiered-limiter/core';

/**
 * How often an instance that holds no key and owes nothing tells the store it is alive, at most:
 * at a 22 ms period (4 instances) an idle limiter's heartbeats were 45 Redis calls and about 40 ms
 * of CPU a second. Its registration lives three periods and a second, longer than this and a period.
 */
export const IDLE_BEAT_MS = 250;

/**
 * This instance's place in the store's fleet registry: its heartbeats, the live count they read,
 * how long that count holds, and its leave on `close()`. The periodic sync sizes its period and
 * fair shares by `instances`; optimistic cold start gives credit only `withinDeclared`.
 */
export class FleetRegistry {
  readonly #store: GlobalStore;
  readonly #instanceId: string;
  readonly #declared: number | undefined;
  #live: number | undefined;
  #lastBeatAtMs = Number.NEGATIVE_INFINITY;
  /** Until when the live count holds: the last answered beat's send time plus the registration's life. */
  #liveUntilMs = Number.NEGATIVE_INFINITY;

  constructor(store: GlobalStore, instanceId: string, declared: number | undefined) {
    this.#store = store;
    this.#instanceId = instanceId;
    this.#declared = declared;
  }

  /** The fleet size in force: the live count the store reports, never below the declared one. */
  get instances(): number {
    return Math.max(this.#live ?? 1, this.#declared ?? 1);
  }

  /**
   * Whether the fleet is known to be no larger than the declared `instances` at `nowMs`: the last
   * answered heartbeat counted no more, and this instance's registration from it still holds (a
   * process stalled past it may have been replaced meanwhile). Optimistic cold start's bound counts
   * the declared instances, so it gives credit only then. True when there is nothing to learn: no
   * declared size, or a store that keeps no registry.
   */
  withinDeclared(nowMs: number): boolean {
    const declared = this.#declared;
    if (declared === undefined || this.#store.heartbeat === undefined) return true;
    return this.#live !== undefined && this.#live <= declared && nowMs < this.#liveUntilMs;
  }

  /**
   * Tells the store this instance is alive for `ttlMs` and reads the live count, at `nowMs`; an
   * `idle` instance (no key held, nothing owed) does so once per `IDLE_BEAT_MS` at most. Resolves
   * the count when it changed, else `undefined`; never rejects.
   */
  async beat(nowMs: number, idle: boolean, ttlMs: number): Promise<number | undefined> {
    const heartbeat = this.#store.heartbeat;
    if (heartbeat === undefined) return undefined;
    if (idle && nowMs - this.#lastBeatAtMs < IDLE_BEAT_MS) return undefined;
    this.#lastBeatAtMs = nowMs;
    let live: number;
    try {
      live = await heartbeat.call(this.#store, this.#instanceId, ttlMs);
    } catch {
      return undefined;
    }
    // From the send, not the answer: the store registered this instance no earlier.
    this.#liveUntilMs = nowMs + ttlMs;
    if (live === this.#live) return undefined;
    this.#live = live;
    return live;
  }

  /**
   * Takes this instance out of the registry (`close()`), so the others count it no longer at their
   * next beat; `undefined` for a store without a registry. Never rejects: a leave that fails lets
   * the registration lapse, as it would have.
   */
  leave(): Promise<void> | undefined {
    const leave = this.#store.leave;
    if (leave === undefined) return undefined;
    this.#liveUntilMs = Number.NEGATIVE_INFINITY;
    return leave.call(this.#store, this.#instanceId).catch(() => {});
  }
}
