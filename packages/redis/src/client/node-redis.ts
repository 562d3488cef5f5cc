import type { LuaScript, RedisClientAdapter, ScriptCall } from './adapter.js';
import { asError } from './adapter.js';
import { isReadonlyError, type ReconnectableNodeRedis, readonlyReconnector } from './readonly-reconnect.js';
import { slotRefresher } from './slot-refresh.js';

/** What the store uses of a node-redis v5 client (`createClient`): commands, and a reconnect on `READONLY`. */
type NodeRedisClientLike = ReconnectableNodeRedis;

/** A node-redis client as far as a cluster's rediscovery goes: the options it was made with. */
interface NodeRedisNodeClient {
  readonly isReady: boolean;
  readonly options?: { readonly socket?: object };
}

/** What the store uses of a node-redis v5 cluster (`createCluster`). */
interface NodeRedisClusterLike {
  sendCommand(firstKey: string, isReadonly: boolean, args: string[]): Promise<unknown>;
  readonly slots: readonly ({ readonly master: { readonly address: string } } | undefined)[];
  readonly masters: readonly { readonly client?: NodeRedisNodeClient }[];
  /** node-redis' slot map: `rediscover` reads the slots again from the node `startWith` names, else the root nodes. */
  readonly _slots?: { rediscover?(startWith: { readonly options?: object }): Promise<void> };
}

/**
 * What the store uses of a node-redis v5 Sentinel client (`createSentinel`): its `sendCommand`
 * takes whether the command only reads first (`false` sends it to the master), as a client's
 * does not. Told apart by `getMasterNode`, which neither a client nor a cluster has.
 */
interface NodeRedisSentinelLike {
  sendCommand(isReadonly: boolean, args: string[]): Promise<unknown>;
  getMasterNode(): unknown;
  readonly isOpen: boolean;
}

type NodeRedisLike = NodeRedisClientLike | NodeRedisClusterLike | NodeRedisSentinelLike;

/**
 * Tries of a call Redis refused with TRYAGAIN, and the pause between them (ioredis' default
 * `retryDelayOnTryAgain`; ioredis itself retries until its 16 `maxRedirections` are spent).
 */
const TRYAGAIN_ATTEMPTS = 5;
const TRYAGAIN_DELAY_MS = 100;

/** Whether `client` looks like a node-redis client, cluster or Sentinel client (raw `sendCommand`, no `defineCommand`). */
export function isNodeRedisLike(client: object): client is NodeRedisLike {
  const c = client as Partial<NodeRedisClientLike & NodeRedisClusterLike>;
  return typeof c.sendCommand === 'function' && ('isOpen' in c || Array.isArray(c.masters));
}

function isSentinel(client: NodeRedisLike): client is NodeRedisSentinelLike {
  return typeof (client as Partial<NodeRedisSentinelLike>).getMasterNode === 'function';
}

/**
 * The adapter for node-redis v5 (`redis`): `EVALSHA` as a raw command, and `EVAL` only when the
 * server answers NOSCRIPT (node-redis' own scripts must be declared when the client is made,
 * which a store given a client cannot do). node-redis writes every command made in one tick in
 * one socket write, so calls for one node made together travel as one pipeline; on a cluster
 * each call follows MOVED and ASK by itself (node-redis' `sendCommand` does) and nothing else is
 * ever resent. A Sentinel client sends each call to the master the Sentinels name; it resends a
 * call whose master connection failed unless made with `recommendedNodeRedisSentinelOptions`. A
 * plain client whose call answers `READONLY` (its master was demoted under the connection) is
 * made to reconnect, the call not resent: `readonlyReconnector`.
 */
export function nodeRedisAdapter(client: NodeRedisLike): RedisClientAdapter {
  const cluster = 'masters' in client ? (client as NodeRedisClusterLike) : undefined;
  const sentinel = isSentinel(client) ? client : undefined;
  // Taken for a client, a Sentinel client got the arguments as its `isReadonly` and failed every
  // call: a limiter on it decided by its policy alone, with Redis up.
  const send = (firstKey: string, args: string[]): Promise<unknown> =>
    cluster
      ? cluster.sendCommand(firstKey, false, args)
      : sentinel
        ? sentinel.sendCommand(false, args)
        : (client as NodeRedisClientLike).sendCommand(args);
  const evalsha = async (script: LuaScript, args: string[]): Promise<unknown> => {
    const firstKey = args[1] ?? '';
    try {
      return await send(firstKey, ['EVALSHA', script.sha1, ...args]);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return send(firstKey, ['EVAL', script.lua, ...args]);
    }
  };
  const rediscover = cluster ? rediscovery(cluster) : undefined;
  const reconnect = cluster || sentinel ? undefined : readonlyReconnector(client as NodeRedisClientLike);
  const run = async (script: LuaScript, call: ScriptCall): Promise<unknown> => {
    const args = call.map(String);
    for (let attempt = 1; ; attempt++) {
      try {
        return await evalsha(script, args);
      } catch (error) {
        // TRYAGAIN: the call's keys are split by a slot migration and Redis ran nothing. ioredis
        // waits and retries (`retryDelayOnTryAgain`); node-redis does not, so the adapter does.
        const retry = error instanceof Error && error.message.startsWith('TRYAGAIN');
        if (!retry || attempt >= TRYAGAIN_ATTEMPTS) throw error;
        await new Promise((resolve) => setTimeout(resolve, TRYAGAIN_DELAY_MS));
      }
    }
  };
  return {
    client: 'node-redis',
    isCluster: cluster !== undefined,
    nodeOf: (slot) => (cluster ? (cluster.slots[slot]?.master.address ?? `slot:${slot}`) : ''),
    evalScript: (script, calls) =>
      Promise.all(
        calls.map((call) =>
          run(script, call).catch((error: unknown) => {
            rediscover?.();
            if (isReadonlyError(error)) reconnect?.();
            return asError(error);
          }),
        ),
      ),
  };
}

/**
 * Reads a cluster's slots again after a failed call, at most once per `SLOT_REFRESH_EVERY_MS` (`slotRefresher`).
 * node-redis reads them only on a MOVED or ASK, which a master that died never answers: its
 * replica took the slots, but every call for them still went to the dead address and failed
 * ("The client is offline"), 80 % of decisions by policy 3 s after the promotion and for good,
 * where ioredis (which reads the slots every 5 s and when a node goes) was back in 0.25 s. Starts
 * from the options of a master that is connected (a copy: node-redis sets its own socket options
 * on what it is given), and falls back on the root nodes by itself; sends no call again.
 */
function rediscovery(cluster: NodeRedisClusterLike): () => void {
  return slotRefresher(() => {
    const slots = cluster._slots;
    if (typeof slots?.rediscover !== 'function') return false;
    const options = cluster.masters.find((master) => master.client?.isReady === true)?.client?.options;
    if (options === undefined) return false;
    slots.rediscover({ options: { ...options, socket: { ...options.socket } } }).catch(() => {});
    return true;
  });
}
