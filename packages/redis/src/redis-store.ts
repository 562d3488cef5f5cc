import {
  type BucketReply,
  ConfigError,
  type GlobalStore,
  type LimitSpec,
  type ReserveReply,
  StoreError,
  type TakeReply,
} from '@tiered-limiter/core';
import type { Cluster, Redis } from 'ioredis';
import { assertPrefix, bucketKeys, DEFAULT_PREFIX } from './keys.js';
import { SCRIPTS } from './scripts.js';

/** Options of `RedisStore`. */
export interface RedisStoreOptions {
  /**
   * The ioredis client: a `Redis` or a `Cluster`, best made with `recommendedRedisOptions`
   * (or `recommendedClusterOptions`). The store defines its four scripts on it with
   * `defineCommand` (as `tieredLimiterTake`, `…Reserve`, `…Refund`, `…Peek`); it never
   * connects, disconnects or reconfigures the client, which may be shared.
   */
  redis: Redis | Cluster;
  /**
   * Starts every key: `prefix:{tag}:limitName`. 1 to 64 of `A-Z a-z 0-9 _ . : / -`.
   * @default 'tl'
   */
  prefix?: string;
}

const TAKE = 'tieredLimiterTake';
const RESERVE = 'tieredLimiterReserve';
const REFUND = 'tieredLimiterRefund';
const PEEK = 'tieredLimiterPeek';

type ScriptArg = string | number;
type ScriptCommand = (...args: ScriptArg[]) => Promise<unknown>;
/** The client once the scripts are defined: ioredis adds each as a method. */
type ScriptedClient = Record<typeof TAKE | typeof RESERVE | typeof REFUND | typeof PEEK, ScriptCommand>;

/**
 * The `GlobalStore` on Redis: one Lua script call (EVALSHA) per operation, atomic across all the
 * limits of a key, timed by the server's own `TIME`. Works alike on an ioredis `Redis` and
 * `Cluster`: the limits of one key share a hash tag, so they sit in one slot. A failed call
 * rejects with a `StoreError` whose `cause` is the ioredis error; it never retries or resends.
 *
 * @example
 * import { Redis } from 'ioredis';
 * import { perSecond } from '@tiered-limiter/core';
 * import { RedisStore, recommendedRedisOptions } from '@tiered-limiter/redis';
 *
 * const redis = new Redis({ ...recommendedRedisOptions, host: '127.0.0.1', port: 6379 });
 * const store = new RedisStore({ redis, prefix: 'api' });
 * const reply = await store.take('user:42', [perSecond(10)], 1); // { allowed: true, remaining: 9, ... }
 */
export class RedisStore implements GlobalStore {
  readonly #client: ScriptedClient;
  readonly #prefix: string;

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('options', options, 'an object with a `redis` client');
    }
    const redis: unknown = options.redis;
    if (
      redis === null ||
      typeof redis !== 'object' ||
      typeof (redis as Partial<Redis>).defineCommand !== 'function'
    ) {
      throw new ConfigError('redis', redis, 'an ioredis Redis or Cluster client');
    }
    this.#prefix = assertPrefix(options.prefix ?? DEFAULT_PREFIX);
    const client = redis as Redis | Cluster;
    client.defineCommand(TAKE, { lua: SCRIPTS.take });
    client.defineCommand(RESERVE, { lua: SCRIPTS.reserve });
    client.defineCommand(REFUND, { lua: SCRIPTS.refund });
    client.defineCommand(PEEK, { lua: SCRIPTS.peek });
    this.#client = client as unknown as ScriptedClient;
  }

  /** The prefix of this store's keys. */
  get prefix(): string {
    return this.#prefix;
  }

  take(key: string, limits: readonly LimitSpec[], cost: number): Promise<TakeReply> {
    return this.#client[TAKE](...this.#args(key, limits, 1, cost, 0)).then(toTakeReply, takeFailed);
  }

  reserve(key: string, limits: readonly LimitSpec[], want: number, min: number): Promise<ReserveReply> {
    return this.#client[RESERVE](...this.#args(key, limits, 2, want, min)).then(
      toReserveReply,
      reserveFailed,
    );
  }

  refund(key: string, limits: readonly LimitSpec[], tokens: number): Promise<BucketReply> {
    return this.#client[REFUND](...this.#args(key, limits, 1, tokens, 0)).then(toRefundReply, refundFailed);
  }

  peek(key: string, limits: readonly LimitSpec[]): Promise<BucketReply> {
    return this.#client[PEEK](...this.#args(key, limits, 0, 0, 0)).then(toPeekReply, peekFailed);
  }

  /** `numkeys, KEYS…, head…, capacity₁, refillPerSecond₁, …`: the layout every script's header gives. */
  #args(key: string, limits: readonly LimitSpec[], heads: 0 | 1 | 2, a: number, b: number): ScriptArg[] {
    const n = limits.length;
    const keys = bucketKeys(this.#prefix, key, limits);
    const args = new Array<ScriptArg>(1 + n + heads + 2 * n);
    args[0] = n;
    for (let i = 0; i < n; i++) args[1 + i] = keys[i]!;
    let at = 1 + n;
    if (heads > 0) args[at++] = a;
    if (heads > 1) args[at++] = b;
    for (let i = 0; i < n; i++) {
      const spec = limits[i]!;
      args[at++] = spec.capacity;
      args[at++] = spec.refillPerSecond;
    }
    return args;
  }
}

function toTakeReply(reply: unknown): TakeReply {
  const r = integers(reply, 5, 'take');
  return { allowed: r[0] === 1, remaining: r[1]!, retryAfterMs: r[2]!, resetMs: r[3]!, limit: r[4]! };
}

function toReserveReply(reply: unknown): ReserveReply {
  const r = integers(reply, 5, 'reserve');
  return { granted: r[0]!, remaining: r[1]!, retryAfterMs: r[2]!, resetMs: r[3]!, limit: r[4]! };
}

function toRefundReply(reply: unknown): BucketReply {
  const r = integers(reply, 3, 'refund');
  return { remaining: r[0]!, resetMs: r[1]!, limit: r[2]! };
}

function toPeekReply(reply: unknown): BucketReply {
  const r = integers(reply, 3, 'peek');
  return { remaining: r[0]!, resetMs: r[1]!, limit: r[2]! };
}

/**
 * The reply as `length` integers. ioredis gives numbers, or strings with its `stringNumbers`
 * option; anything else means the key was not ours (a wrong type) or the script is not ours.
 */
function integers(reply: unknown, length: number, command: string): readonly number[] {
  if (Array.isArray(reply) && reply.length === length) {
    let numbers = true;
    for (const value of reply) if (typeof value !== 'number') numbers = false;
    if (numbers) return reply as number[];
    const parsed = reply.map((value) => (typeof value === 'string' ? Number(value) : Number.NaN));
    if (parsed.every(Number.isInteger)) return parsed;
  }
  throw new StoreError(`redis ${command} gave an unexpected reply: ${preview(reply)}`);
}

function failure(command: string): (error: unknown) => never {
  return (error) => {
    const message = error instanceof Error ? error.message : String(error);
    throw new StoreError(`redis ${command} failed: ${message}`, { cause: error });
  };
}

const takeFailed = failure('take');
const reserveFailed = failure('reserve');
const refundFailed = failure('refund');
const peekFailed = failure('peek');

function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}
