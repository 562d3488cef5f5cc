import {
  allowDecision,
  type Clock,
  ConfigError,
  type Decision,
  defineLimit,
  denyDecision,
  type FailurePolicy,
  internal,
  type LimitSpec,
  MIN_REFILL_PER_SECOND,
  type StoreError,
} from '@tiered-limiter/core';
import { DEFAULT_CLOSED_RETRY_AFTER_MS, MAX_MAX_KEYS } from '../defaults.js';
import { LocalLimiter } from '../local-limiter.js';

const {
  assertInteger,
  assertKnownOptions,
  assertLimits,
  assertObject,
  assertOneOf,
  smallestCapacity,
  tightestWhenFull,
} = internal;

const POLICIES: readonly FailurePolicy[] = ['open', 'closed', 'local'];

/** How the `local` failure policy sizes its in-process bucket. */
export interface LocalFallbackOptions {
  /**
   * Instances expected to share the limit. Each falls back to the global capacity and rate
   * divided by this number (capacity rounded down, at least 1), so the fleet as a whole stays
   * near the global limit while the store is away. Required by `local` unless `limits` is given.
   * A two-tier limiter with the periodic sync divides by the live count instead when it is larger.
   */
  instances?: number;
  /** The fallback bucket's own limits, replacing the divided ones. */
  limits?: LimitSpec | readonly LimitSpec[];
  /**
   * Keys the fallback bucket tracks at most.
   * @default 100_000
   */
  maxKeys?: number;
}

/** What `FailurePolicyDecider` needs: the declared policy and how to carry it out. */
export interface FailurePolicyOptions {
  /** What the limit does while its store fails: `open`, `closed` or `local`. Required. */
  failurePolicy: FailurePolicy;
  /** Sizing of the `local` policy's bucket. */
  fallback?: LocalFallbackOptions;
  /**
   * `retryAfterMs` of a denial by the `closed` policy (or by `local` for a cost it can't hold).
   * @default 1000
   */
  closedRetryAfterMs?: number;
}

/**
 * Turns a store failure into the decision the limit declared: admit (`open`), deny
 * (`closed`), or ask a conservative in-process bucket (`local`). Every decision it makes
 * has tier `fallback` and carries the policy and the error, so a caller can alert on it.
 */
export class FailurePolicyDecider {
  /** The declared policy. */
  readonly policy: FailurePolicy;
  #limit: LimitSpec;
  readonly #closedRetryAfterMs: number;
  readonly #local: LocalLimiter | undefined;
  #localMaxCost: number;
  /** What a denial of a cost the local buckets can never hold names: the local limit that refuses it. */
  #localLimit: LimitSpec | undefined;
  /** The global limits, which the `local` policy divides (kept to divide them again). */
  #limits: readonly LimitSpec[];
  /** The declared divisor of the `local` policy, `undefined` when it has limits of its own. */
  readonly #declaredInstances: number | undefined;
  /** What the local limits are divided by now: the declared instances, or more live ones. */
  #instances: number | undefined;

  constructor(options: FailurePolicyOptions, limits: readonly LimitSpec[], clock: Clock) {
    this.policy = assertOneOf('failurePolicy', options.failurePolicy, POLICIES);
    this.#limit = tightestWhenFull(limits);
    this.#closedRetryAfterMs = assertInteger(
      'closedRetryAfterMs',
      options.closedRetryAfterMs ?? DEFAULT_CLOSED_RETRY_AFTER_MS,
      1,
      86_400_000,
    );
    // Checked whatever the policy: a bad value is refused even where it would go unused.
    const fallback =
      options.fallback === undefined
        ? undefined
        : assertObject<LocalFallbackOptions>('fallback', options.fallback);
    if (fallback !== undefined) assertKnownOptions('fallback', fallback, ['instances', 'limits', 'maxKeys']);
    this.#limits = limits;
    const local = this.policy === 'local' ? localFallback(fallback, limits, clock) : undefined;
    this.#local = local?.limiter;
    this.#declaredInstances = local?.instances;
    this.#instances = local?.instances;
    this.#localMaxCost = 0;
    this.#sized();
  }

  /**
   * Tells the `local` policy how many instances are alive (the fleet registry's count): limits it
   * divides are divided by that count when it is above the declared one, never by less, so a fleet
   * scaled past its declaration still admits about the global limit while the store is away. Keys
   * keep their tokens, cut to the new capacity. Nothing changes under `open`, `closed`, or a
   * `local` policy with `fallback.limits` of its own.
   */
  fleetSize(live: number): void {
    const declared = this.#declaredInstances;
    if (declared === undefined) return;
    const instances = Math.max(declared, live);
    if (instances === this.#instances) return;
    this.#instances = instances;
    this.#local!.setLimits(divideLimits(this.#limits, instances));
    this.#sized();
  }

  /**
   * The limiter's new limits (`setLimits`): the `local` policy divides them as it divided the old
   * ones, and its keys keep their tokens (a limit of the same name, cut to a lower capacity), so a
   * configuration reloaded during an outage does not hand every key a full local bucket again.
   */
  setLimits(limits: readonly LimitSpec[]): void {
    this.#limits = limits;
    this.#limit = tightestWhenFull(limits);
    if (this.#instances === undefined) return;
    this.#local!.setLimits(divideLimits(limits, this.#instances));
    this.#sized();
  }

  /** What the local limits in force refuse outright, and which of them a refusal names. */
  #sized(): void {
    if (this.#local === undefined) return;
    this.#localMaxCost = smallestCapacity(this.#local.limits);
    this.#localLimit = tightestWhenFull(this.#local.limits);
  }

  /** The limits the `local` policy admits by, or `undefined` for the other policies. */
  get localLimits(): readonly LimitSpec[] | undefined {
    return this.#local?.limits;
  }

  /**
   * What a request of cost 1 for `key` would get from the policy now, taking nothing: `peek` while
   * the store fails. Under `local` it reads the local bucket; deciding instead took a token from it
   * per peek, so a key polled through an outage was turned away with its requests never made.
   */
  peek(key: string, error: StoreError): Promise<Decision> {
    const local = this.#local;
    if (local === undefined) return Promise.resolve(this.decide(key, 1, error));
    return local.peek(key).then((d) => ({ ...d, tier: 'fallback', policy: 'local', error }));
  }

  /** The decision for `cost` tokens of `key` while the store fails with `error`. */
  decide(key: string, cost: number, error: StoreError): Decision {
    switch (this.policy) {
      case 'open':
        return allowDecision(0, 0, this.#limit, 'fallback', 'open', error);
      case 'closed':
        return denyDecision(this.#closedRetryAfterMs, 0, 0, this.#limit, 'fallback', 'closed', error);
      default: {
        // More than a local bucket can ever hold (yet within the global limits): refused until the
        // store is back, in the local limit's terms, which are what the request met.
        if (cost > this.#localMaxCost) {
          return denyDecision(this.#closedRetryAfterMs, 0, 0, this.#localLimit!, 'fallback', 'local', error);
        }
        const d = this.#local!.tryConsume(key, cost);
        return { ...d, tier: 'fallback', policy: 'local', error };
      }
    }
  }
}

/**
 * The global limits divided among `instances`: capacity rounded down and rate divided, so
 * `instances` processes falling back at once admit no more than the global limit, but for a
 * capacity below `instances`: each keeps one token, the least that admits anything (README).
 * A rate that division would take below `MIN_REFILL_PER_SECOND` stays there (one token in about
 * 11.6 days per instance): every valid limit divides into a working fallback.
 */
export function divideLimits(limits: readonly LimitSpec[], instances: number): LimitSpec[] {
  return limits.map((spec) =>
    defineLimit({
      name: spec.name,
      capacity: Math.max(1, Math.floor(spec.capacity / instances)),
      refillPerSecond: Math.max(MIN_REFILL_PER_SECOND, spec.refillPerSecond / instances),
    }),
  );
}

function localFallback(
  fallback: LocalFallbackOptions | undefined,
  limits: readonly LimitSpec[],
  clock: Clock,
) {
  const options = fallback ?? {};
  let local: readonly LimitSpec[];
  let instances: number | undefined;
  if (options.limits !== undefined) {
    local = assertLimits('fallback.limits', options.limits);
  } else if (options.instances !== undefined) {
    instances = assertInteger('fallback.instances', options.instances, 1, 1_000_000);
    local = divideLimits(limits, instances);
  } else {
    throw new ConfigError(
      'fallback.instances',
      undefined,
      "the number of instances sharing the limit (failurePolicy 'local' divides the limit among them), or give fallback.limits",
    );
  }
  const maxKeys =
    options.maxKeys === undefined
      ? undefined
      : assertInteger('fallback.maxKeys', options.maxKeys, 1, MAX_MAX_KEYS);
  const limiter = new LocalLimiter(
    maxKeys === undefined ? { limits: local, clock } : { limits: local, clock, maxKeys },
  );
  return { limiter, instances };
}
