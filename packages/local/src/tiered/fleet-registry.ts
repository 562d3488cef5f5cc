import type { Clock, GlobalStore } from '@tiered-limiter/core';

/**
 * How often an instance that holds no key and owes nothing tells the store it is alive, at most:
 * at a 22 ms period (4 instances) an idle limiter's heartbeats were 45 Redis calls and about 40 ms
 * of CPU a second. Its registration lives three periods and a second, longer than this and a period.
 */
export const IDLE_BEAT_MS = 250;

/**
 * This instance's place in the store's fleet registry: its heartbeats, the live count they read,
 * how long that count holds, and its leave on `close()`. The periodic sync sizes its period and
 * fair shares by `instances`; optimistic cold start gives credit only a spacing into a run of
 * `creditSince`.
 */
export class FleetRegistry {
  readonly #store: GlobalStore;
  readonly #instanceId: string;
  readonly #declared: number | undefined;
  readonly #clock: Clock;
  readonly #madeAtMs: number;
  #live: number | undefined;
  /** When the current unbroken stretch within the declared fleet began (an answer's arrival). */
  #withinFromMs: number | undefined;
  #lastBeatAtMs = Number.NEGATIVE_INFINITY;
  /** When the beat not yet answered was sent; `undefined` when none is out (see `beat`). */
  #unansweredSinceMs: number | undefined;
  /** Until when the live count holds: the last answered beat's send time plus the registration's life. */
  #liveUntilMs = Number.NEGATIVE_INFINITY;
  /** Whether `leave()` took this instance out: a beat answered since speaks of a fleet it has left. */
  #left = false;

  constructor(store: GlobalStore, instanceId: string, declared: number | undefined, clock: Clock) {
    this.#store = store;
    this.#instanceId = instanceId;
    this.#declared = declared;
    this.#clock = clock;
    this.#madeAtMs = clock.now();
  }

  /** The fleet size in force: the live count the store reports, never below the declared one. */
  get instances(): number {
    return Math.max(this.#live ?? 1, this.#declared ?? 1);
  }

  /** The live count of the last heartbeat the store answered; `undefined` before one, or without a registry. */
  get live(): number | undefined {
    return this.#live;
  }

  /**
   * Since when, unbroken, the fleet has been known to be no larger than the declared `instances`,
   * as of `nowMs`; `undefined` when it is not now. Known means: the last answered heartbeat counted
   * no more, and this instance's registration from it still holds (a process stalled past it may
   * have been replaced meanwhile); unbroken means every answer since came while the one before
   * still held and counted no more. With nothing to learn (no declared size, a store that keeps no
   * registry) it is since the limiter was made. Optimistic cold start gives credit only a spacing
   * into such a stretch: at most `N` instances are in one at any moment, so a chain of them that
   * replace one another (a restart, a rolling deploy) credits a key at most once a spacing, as one
   * instance would (docs/ACCURACY.md).
   */
  creditSince(nowMs: number): number | undefined {
    const declared = this.#declared;
    if (declared === undefined || this.#store.heartbeat === undefined) return this.#madeAtMs;
    return this.#within(nowMs) ? this.#withinFromMs : undefined;
  }

  #within(nowMs: number): boolean {
    const declared = this.#declared;
    return (
      declared !== undefined &&
      this.#live !== undefined &&
      this.#live <= declared &&
      nowMs < this.#liveUntilMs
    );
  }

  /**
   * Tells the store this instance is alive for `ttlMs` and reads the live count, at `nowMs`; an
   * `idle` instance (no key held, nothing owed) does so once per `IDLE_BEAT_MS` at most. Resolves
   * the count when it changed, else `undefined`; never rejects. No beat is sent while the last one
   * is unanswered, for up to the registration's life: heartbeats go outside the guard, so behind a
   * paused server they queued one a tick (12 in 1.1 s at a 50 ms period), each to read the same
   * count later. Past that life the registration has lapsed anyway, and a new beat may find a
   * connection the old one was lost on. After `leave()`, none is sent, and the answer of one sent
   * before is dropped: a tick's beat answered in the round trip `close()` began in emitted `fleet`
   * and resized the `local` fallback of a limiter already closed.
   */
  async beat(nowMs: number, idle: boolean, ttlMs: number): Promise<number | undefined> {
    const heartbeat = this.#store.heartbeat;
    if (heartbeat === undefined || this.#left) return undefined;
    const unanswered = this.#unansweredSinceMs;
    if (unanswered !== undefined && nowMs - unanswered < ttlMs) return undefined;
    if (idle && nowMs - this.#lastBeatAtMs < IDLE_BEAT_MS) return undefined;
    this.#lastBeatAtMs = nowMs;
    this.#unansweredSinceMs = nowMs;
    let live: number;
    try {
      live = await heartbeat.call(this.#store, this.#instanceId, ttlMs);
    } catch {
      return undefined;
    } finally {
      if (this.#unansweredSinceMs === nowMs) this.#unansweredSinceMs = undefined;
    }
    // A custom store's count that is not one (NaN sized the `local` fallback's limits as NaN, a
    // `ConfigError` thrown out of the tick) is no answer. This instance is alive, so at least 1.
    if (this.#left || !Number.isSafeInteger(live) || live < 1) return undefined;
    // A stretch within the declared fleet goes on only if the last answer still held when this
    // one came (the registration never lapsed in between) and counted no more; it begins anew at
    // an answer that ends a gap, and ends at one that counts more.
    const answeredAtMs = this.#clock.now();
    const unbroken = this.#within(answeredAtMs);
    // From the send, not the answer: the store registered this instance no earlier.
    this.#liveUntilMs = nowMs + ttlMs;
    if (this.#declared !== undefined && live > this.#declared) this.#withinFromMs = undefined;
    else if (!unbroken || this.#withinFromMs === undefined) this.#withinFromMs = answeredAtMs;
    if (live === this.#live) return undefined;
    this.#live = live;
    return live;
  }

  /**
   * Takes this instance out of the registry (`close()`), so the others count it no longer at their
   * next beat; `undefined` for a store without a registry. Never rejects: a leave that fails lets
   * the registration lapse, as it would have. No beat counts after it (`beat`).
   */
  leave(): Promise<void> | undefined {
    this.#left = true;
    const leave = this.#store.leave;
    if (leave === undefined) return undefined;
    this.#liveUntilMs = Number.NEGATIVE_INFINITY;
    try {
      return leave.call(this.#store, this.#instanceId).catch(() => {});
    } catch {
      // A `leave` that throws rather than rejects (or returns no promise) rejected `close()`.
      return undefined;
    }
  }
}
