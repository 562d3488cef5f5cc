import { MAX_WAIT_MS } from './bucket.js';
import { ArgumentError, ConfigError, StoreError } from './errors.js';
import type { LimitSpec } from './limit.js';

/**
 * What a leaseholder says of one generation of tokens it was granted: how many it spent since
 * it last said, and how many it hands back unspent. Spent tokens free the bucket's room at
 * once instead of at the generation's release; returned ones go back into the bucket. A
 * report on a generation the store has already released changes nothing.
 */
export interface LeaseReport {
  /** The generation, as a `reserve` reply gave it. */
  readonly generation: number;
  /** Tokens of it spent since the last report. */
  readonly spent: number;
  /** Tokens of it handed back unspent. */
  readonly returned: number;
}

/** The lease part of a `BucketOp`: take between `min` and `want` tokens and hold them for `holdMs`. */
export interface ReserveRequest {
  /** Most tokens to take. */
  readonly want: number;
  /** Fewest tokens worth taking; below it nothing is taken. */
  readonly min: number;
  /**
   * Milliseconds, on the store's clock, the store holds the granted tokens against the bucket's
   * room before releasing them as spent. Longer than the lease lives at its holder, so that a
   * token is always spent (or handed back) before the store lets the bucket refill its room.
   * At most `MAX_WAIT_MS`; a store refuses a longer hold.
   */
  readonly holdMs: number;
}

/**
 * One atomic step on the buckets of one key, every limit all-or-nothing, in this order: bring
 * the buckets to the store's clock (releasing due generations), apply `reports`, add `credit`,
 * take `debit` regardless (the bucket may go into debt, at most its capacity deep; one already
 * deeper, from a take or lease that borrowed `aheadMs`, stays where it is: a debit never lifts it), then
 * `take` (all or nothing) or `reserve` (a lease). An op with none of them is a peek.
 * `cost`-like numbers are whole and already checked by the caller.
 */
export interface BucketOp {
  /** The user's key. */
  readonly key: string;
  /** The limits, made by `defineLimit`, names unique. */
  readonly limits: readonly LimitSpec[];
  /** Accounts for tokens leased earlier. */
  readonly reports?: readonly LeaseReport[] | undefined;
  /** Tokens to give back (never past the room: capacity less what is on lease). */
  readonly credit?: number | undefined;
  /** Tokens to take regardless of what is there (into debt at most a capacity deep; never lifting a deeper debt). */
  readonly debit?: number | undefined;
  /** Tokens to take from every limit if all have them, else none. 0 or fewer: a peek. */
  readonly take?: number | undefined;
  /** A lease to grant. Not together with `take`. A `want` of 0 or fewer: a peek. */
  readonly reserve?: ReserveRequest | undefined;
  /**
   * Milliseconds of refill the `take` or `reserve` may borrow: it may take up to `rate × aheadMs`
   * tokens the bucket does not have yet, leaving it that deep in debt. A fleet that syncs every
   * `T` ms borrows `T`, so that its leases may hold the capacity plus a period of refill; what it
   * can admit in a window of `W` ms is then `capacity + rate × (W + aheadMs)`. Whole, from 0.
   * @default 0
   */
  readonly aheadMs?: number | undefined;
  /**
   * No request waits on this op (a periodic sync, a hand-back, a heartbeat): a store that queues
   * ops may send the ones requests wait on ahead of it. A store may ignore it.
   * @default false
   */
  readonly background?: boolean | undefined;
}

/** The reply to one `BucketOp`. It speaks of one limit, `limitIndex`, chosen by core's `isTighter`. */
export interface BucketReply {
  /** `take`: admitted; `reserve`: something granted; otherwise whether a cost of 1 would pass now. */
  readonly ok: boolean;
  /** Tokens taken by `take` or leased by `reserve`; else 0. */
  readonly granted: number;
  /** The generation the granted lease joined (0 when nothing was leased). */
  readonly generation: number;
  /** Whole tokens left in that limit (never negative). */
  readonly remaining: number;
  /** 0 when `ok`; else milliseconds until what was asked (`take`, `reserve.min`, or 1) could pass. */
  readonly retryAfterMs: number;
  /** Milliseconds until that limit is full again with nothing on lease. */
  readonly resetMs: number;
  /** Index, in the op's `limits`, of the limit this reply speaks of. */
  readonly limitIndex: number;
}

/**
 * Whether the caller of a store op has stopped waiting for its reply (the limiters' guard sets it
 * when its timeout fires). A store reads it before it sends a queued op.
 */
export interface CallerWait {
  /** `true` once the caller stopped waiting: an op not yet sent should not be. */
  readonly gaveUp: boolean;
}

/**
 * The contract a shared store fulfils: token buckets per `(key, limit)` that every instance of
 * a service sees alike, each op atomic across its limits, timed by the store's own clock
 * (Redis's `TIME`), never a caller's. The store tracks tokens out on lease per generation
 * (see `SharedBucketState`), and nothing else of the limiters: policies, timeouts and leases
 * live in `@tiered-limiter/local`. A store rejects on failure; the limiters turn that into a
 * policy decision. A store may gather ops from one tick into one round trip.
 */
export interface GlobalStore {
  /**
   * Applies one op atomically and replies for it. Rejects, never throws, with an `ArgumentError`
   * for an op that is not an object, a key that is not a string, `limits` that are not a
   * non-empty array, or a number that is not finite or a hold past `MAX_WAIT_MS` (`refusedOp`). `wait` says whether the caller still waits for
   * the reply: a store that queues ops may drop one its caller gave up on before it was sent, and
   * reject it with `StoreWithdrawnError`, since sent then it could only count its tokens after the
   * caller's failure policy decided the request (twice, under `local`).
   */
  apply(op: BucketOp, wait?: CallerWait): Promise<BucketReply>;
  /**
   * Forgets `key`'s buckets (and what is on lease from them): its next op finds them full. Rejects
   * with an `ArgumentError` for a key or `limits` that `apply` would refuse.
   */
  reset(key: string, limits: readonly LimitSpec[]): Promise<void>;
  /**
   * Records that `instance` is alive for `ttlMs` (on the store's clock) and resolves how many
   * instances are alive now: the two-tier limiter's periodic sync calls it to size its fleet. A
   * store without it leaves the fleet at its declared size.
   */
  heartbeat?(instance: string, ttlMs: number): Promise<number>;
  /**
   * Forgets `instance` in the fleet's registry at once (a limiter closing): the others stop
   * counting it at their next heartbeat instead of when its registration would lapse. A store
   * without it lets the registration lapse.
   */
  leave?(instance: string): Promise<void>;
  /**
   * How many ops one of the store's round trips carries at most: the two-tier limiter's sync
   * sizes its period by what a round over its keys costs. A store without it counts as 32.
   */
  readonly opsPerCall?: number;
  /**
   * The store's call group of `key`, a whole number below 16,384: ops of keys in one group can
   * share a call (on a Redis Cluster, the key's slot). The periodic sync sends its round in group
   * order, so that the ops leaving together share calls. A store without it is one group.
   */
  groupOf?(key: string): number;
}

/**
 * Checks that `store` fulfils `GlobalStore`, so a limiter given something else fails at
 * construction, naming the option, rather than on its first request.
 */
export function assertStore(store: unknown): GlobalStore {
  const s = store as Partial<GlobalStore> | null;
  if (s === null || typeof s !== 'object' || typeof s.apply !== 'function' || typeof s.reset !== 'function') {
    throw new ConfigError('store', store, 'a GlobalStore (an object with apply and reset)');
  }
  return store as GlobalStore;
}

/**
 * Why a store refuses `op` before it reaches a bucket, or `undefined`: not an object, a `key` that
 * is not a string, `limits` that are not a non-empty array, or a number (of `take`, `credit`,
 * `debit`, `aheadMs`, `reserve` or `reports`) that is not finite. A store rejects with it, never
 * throws: a store method is called on a request's path, where a synchronous throw escapes the
 * caller's `.catch` (on a Cluster, empty `limits` threw a `TypeError` so; on one server a take on
 * no limit was admitted). The limits themselves are `defineLimit`'s, checked by the limiters.
 */
export function refusedOp(op: unknown): ArgumentError | undefined {
  if (op === null || typeof op !== 'object') return new ArgumentError('op', op, 'a BucketOp object');
  const { key, limits } = op as BucketOp;
  return refusedKeyLimits(key, limits) ?? refusedNumbers(op as BucketOp);
}

/**
 * Why a store refuses the numbers of `op`, or `undefined`. JSON carries NaN and Infinity to
 * `apply.lua` (its `cjson` reads both): a lease held for `Infinity` ms looped for ever there, Redis
 * answering every client BUSY until a `SCRIPT KILL`, and in `MemoryStore` it hung the process; a
 * report of NaN tokens failed the call on Redis, every op coalesced into it with it, and was taken
 * as a hand-back of the whole lease by `MemoryStore`. A lease held longer than `MAX_WAIT_MS` (a
 * finite 1e300 ms) made a TTL Redis refuses, which failed the call too, after the script had written
 * the keys of the ops before it: a take coalesced with it was taken, and its caller told it failed.
 */
function refusedNumbers(op: BucketOp): ArgumentError | undefined {
  const { take, credit, debit, aheadMs, reserve, reports } = op;
  if (!finiteOrAbsent(take)) return notFinite('take', take);
  if (!finiteOrAbsent(credit)) return notFinite('credit', credit);
  if (!finiteOrAbsent(debit)) return notFinite('debit', debit);
  if (!finiteOrAbsent(aheadMs)) return notFinite('aheadMs', aheadMs);
  if (
    reserve !== undefined &&
    (reserve === null ||
      typeof reserve !== 'object' ||
      !finite(reserve.want) ||
      !finite(reserve.min) ||
      !finite(reserve.holdMs) ||
      reserve.holdMs > MAX_WAIT_MS)
  ) {
    return new ArgumentError(
      'reserve',
      reserve,
      `an object of finite want, min and holdMs (at most ${MAX_WAIT_MS})`,
    );
  }
  if (reports !== undefined) {
    if (!Array.isArray(reports)) return new ArgumentError('reports', reports, 'an array of lease reports');
    for (const r of reports) {
      if (
        r === null ||
        typeof r !== 'object' ||
        !finite(r.generation) ||
        !finite(r.spent) ||
        !finite(r.returned)
      ) {
        return new ArgumentError('reports', r, 'reports of finite generation, spent and returned');
      }
    }
  }
  return undefined;
}

/**
 * Why `reply` is not a `BucketReply`, as a `StoreError` (a store failure), or `undefined`: not an
 * object, an `ok` that is not a boolean, or a number that is not finite. The limiters check what a
 * custom store resolves: `undefined` rejected a `RequestLimiter`'s `consume` with a `TypeError`, and
 * `{ ok: true }` admitted with a `resetMs` of `undefined`, read as a decision of the store.
 */
export function refusedReply(reply: unknown): StoreError | undefined {
  if (reply === null || typeof reply !== 'object') return malformed(String(reply));
  const r = reply as Record<string, unknown>;
  if (typeof r.ok !== 'boolean') return malformed(`ok: ${String(r.ok)}`);
  for (const field of REPLY_NUMBERS) if (!finite(r[field])) return malformed(`${field}: ${String(r[field])}`);
  return undefined;
}

/** The fields of a `BucketReply` that are finite numbers. */
const REPLY_NUMBERS = [
  'granted',
  'generation',
  'remaining',
  'retryAfterMs',
  'resetMs',
  'limitIndex',
] as const;

const malformed = (what: string) => new StoreError(`the store resolved a malformed reply (${what})`);

const finite = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);
const finiteOrAbsent = (value: unknown): boolean => value === undefined || finite(value);
const notFinite = (field: string, value: unknown) => new ArgumentError(field, value, 'a finite number');

/** Why a store refuses `key` and `limits` (`refusedOp`), or `undefined`. */
export function refusedKeyLimits(key: unknown, limits: unknown): ArgumentError | undefined {
  if (typeof key !== 'string') return new ArgumentError('key', key, 'a string');
  if (!Array.isArray(limits) || limits.length === 0) {
    return new ArgumentError('limits', limits, 'a non-empty array of limits');
  }
  return undefined;
}
