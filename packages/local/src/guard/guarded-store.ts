import {
  allowDecision,
  type BucketOp,
  type BucketReply,
  type Clock,
  type Decision,
  type DecisionTier,
  denyDecision,
  type GlobalStore,
  internal,
  type LimitSpec,
  type StoreError,
  shadowOf,
} from '@tiered-limiter/core';
import type { Listened } from '../emit-safely.js';
import { FailurePolicyDecider, type FailurePolicyOptions } from './failure-policy.js';
import { onLandedLate } from './landed-late.js';
import { type GuardResult, StoreGuard, type StoreGuardOptions } from './store-guard.js';

const { assertBoolean, assertStore, refusedReply } = internal;

/** Options every limiter over a `GlobalStore` shares. */
export interface StoreLimiterOptions extends StoreGuardOptions, FailurePolicyOptions {
  /** The shared store every instance uses, e.g. a `RedisStore`. */
  store: GlobalStore;
  /** The limit, or several limits checked all-or-nothing (e.g. 10 per second and 1,000 per hour). */
  limits: LimitSpec | readonly LimitSpec[];
  /**
   * Shadow mode: decide and report, but admit everything (`decision.shadowDenied` tells what
   * would have been denied), to watch a new limit before enforcing it.
   * @default false
   */
  shadow?: boolean;
}

/** Every option of `StoreLimiterOptions`: each limiter over a store refuses names beyond its own. */
export const STORE_LIMITER_OPTION_NAMES: readonly string[] = [
  'store',
  'limits',
  'shadow',
  'timeoutMs',
  'breaker',
  'clock',
  'failurePolicy',
  'fallback',
  'closedRetryAfterMs',
];

/** Decisions counted by the tier that made them, and by outcome. */
export type DecisionCounts = Record<DecisionTier | 'allowed' | 'denied', number>;

/**
 * What every limiter over a store shares, wired once: the store behind its guard (timeout and
 * breaker, the one way to reach it), the failure policy, shadow mode, the guard's events relayed
 * to the limiter, and decision counters. The per-request and two-tier limiters each hold one.
 */
export class GuardedStore {
  readonly store: GlobalStore;
  readonly guard: StoreGuard;
  readonly shadow: boolean;
  readonly counts: DecisionCounts = { lease: 0, global: 0, fallback: 0, local: 0, allowed: 0, denied: 0 };
  readonly #policy: FailurePolicyDecider;

  constructor(options: StoreLimiterOptions, limits: readonly LimitSpec[], clock: Clock, events: Listened) {
    this.store = assertStore(options.store);
    this.shadow = options.shadow === undefined ? false : assertBoolean('shadow', options.shadow);
    this.#policy = new FailurePolicyDecider(options, limits, clock);
    // The guard's own options only: it refuses names it does not know.
    this.guard = new StoreGuard({ timeoutMs: options.timeoutMs, breaker: options.breaker, clock });
    this.guard.relayTo(events);
  }

  /** The failure policy in force. */
  get policy(): FailurePolicyDecider {
    return this.#policy;
  }

  /** Gives the failure policy new limits (its local fallback is sized from them; keys keep their tokens). */
  setLimits(limits: readonly LimitSpec[]): void {
    this.#policy.setLimits(limits);
  }

  /** The live fleet's size, for a `local` policy that divides the limits (`FailurePolicyDecider.fleetSize`). */
  fleetSize(live: number): void {
    this.#policy.fleetSize(live);
  }

  /**
   * Sends the op `build` makes, under the guard; `build` runs only if the op is sent. `landedLate`
   * is called if the op lands after the guard gave up on it (`onLandedLate`).
   */
  send(build: () => BucketOp, landedLate?: () => void): Promise<GuardResult<BucketReply>> {
    return this.guard.run((wait) => {
      const applied = this.store.apply(build(), wait);
      onLandedLate(applied, wait, landedLate);
      return applied;
    }, refusedReply);
  }

  /** Counts `decision` and returns what the caller gets (admitted, in shadow mode). */
  count(decision: Decision): Decision {
    const counts = this.counts;
    // Named increments: a keyed one was a sixth of a remembered denial's cost on a hot key.
    switch (decision.tier) {
      case 'lease':
        counts.lease++;
        break;
      case 'global':
        counts.global++;
        break;
      case 'fallback':
        counts.fallback++;
        break;
      case 'local':
        counts.local++;
        break;
    }
    if (decision.allowed) counts.allowed++;
    else counts.denied++;
    return this.shadow ? shadowOf(decision) : decision;
  }

  /** What `peek` returns for `decision`: what a request would get (admitted, in shadow mode), uncounted. */
  looked(decision: Decision): Decision {
    return this.shadow ? shadowOf(decision) : decision;
  }

  /** The failure policy's decision for `cost` tokens of `key`, counted. */
  byPolicy(key: string, cost: number, error: StoreError): Decision {
    return this.count(this.#policy.decide(key, cost, error));
  }
}

/**
 * `reply`, if it is a `BucketReply`; else throws the `StoreError` that says why (core's
 * `refusedReply`), so that a custom store's malformed reply is a store failure, decided by the
 * policy and reported on `failure`.
 */
export function checkedReply(reply: BucketReply): BucketReply {
  const refused = refusedReply(reply);
  if (refused !== undefined) throw refused;
  return reply;
}

/** The `Decision` a store's reply makes, speaking of the limit the reply names. */
export function decisionOf(reply: BucketReply, limits: readonly LimitSpec[], tier: DecisionTier): Decision {
  const spec = limits[reply.limitIndex] ?? limits[0]!;
  return reply.ok
    ? allowDecision(reply.remaining, reply.resetMs, spec, tier)
    : denyDecision(reply.retryAfterMs, reply.remaining, reply.resetMs, spec, tier);
}
