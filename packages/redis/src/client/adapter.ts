import { ConfigError } from '@tiered-limiter/core';
import { ioredisAdapter, isIoredisLike } from './ioredis.js';
import { isNodeRedisLike, nodeRedisAdapter } from './node-redis.js';

/** A Lua script as a store sends it: its source, and the SHA-1 that `EVALSHA` names it by. */
export interface LuaScript {
  /** The full source. */
  readonly lua: string;
  /** Lower-case hex SHA-1 of `lua`. */
  readonly sha1: string;
}

/**
 * One script call: `numkeys`, the keys (all in one Cluster slot), then the arguments, exactly
 * what follows the SHA in an `EVALSHA`.
 */
export type ScriptCall = readonly (string | number)[];

/**
 * The few things a `RedisStore` asks of a Redis client, and all it ever sends: its one script
 * (EVALSHA, and EVAL only when the server answers NOSCRIPT, which means the script did not run),
 * calls for one node together, the node serving a Cluster slot, and DEL for `reset`. The store
 * makes one from an ioredis or iovalkey `Redis`/`Cluster`, or a node-redis client, cluster or Sentinel client, by
 * their shape; any other client can be given as an object of this shape.
 *
 * An adapter never sends a call twice: a call whose connection dropped may have run, and running
 * it again would count its tokens twice. Redirections (MOVED, ASK) and NOSCRIPT may be followed:
 * Redis ran nothing then.
 */
export interface RedisClientAdapter {
  /** The client library, for messages: `ioredis` (iovalkey included), `node-redis`, or your own. */
  readonly client: string;
  /** Whether keys are spread over a Redis Cluster (then `nodeOf` routes them). */
  readonly isCluster: boolean;
  /** A name of the node serving `slot` now (`host:port`), or `''` for a single server. */
  nodeOf(slot: number): string;
  /**
   * Runs `script` once per call, every call for keys the same node serves, as one pipeline where
   * there are several. Resolves one entry per call, in order: the reply, or the `Error` that call
   * got. Rejects only when none of them could be sent.
   */
  evalScript(script: LuaScript, calls: readonly ScriptCall[]): Promise<unknown[]>;
}

/** What `RedisStore`'s `redis` option takes: a client it recognises, or an adapter. */
export type RedisClientLike = object;

/**
 * The adapter for `client`: itself when it already is one, else the one for its library, told
 * apart by shape (ioredis and iovalkey define commands; node-redis sends raw commands). Throws a
 * `ConfigError` naming the `redis` option for anything else.
 */
export function adapterFor(client: unknown): RedisClientAdapter {
  if (client !== null && typeof client === 'object') {
    if (isAdapter(client)) return client;
    if (isIoredisLike(client)) return ioredisAdapter(client);
    if (isNodeRedisLike(client)) return nodeRedisAdapter(client);
  }
  throw new ConfigError(
    'redis',
    client,
    'an ioredis or iovalkey Redis or Cluster, a node-redis client, cluster or Sentinel client, or a RedisClientAdapter',
  );
}

function isAdapter(value: object): value is RedisClientAdapter {
  const a = value as Partial<RedisClientAdapter>;
  return typeof a.evalScript === 'function' && typeof a.nodeOf === 'function';
}

/** The error `value` is, or one saying what it was. */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
