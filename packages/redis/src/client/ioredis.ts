import type { LuaScript, RedisClientAdapter, ScriptCall } from './adapter.js';
import { asError } from './adapter.js';
import { slotRefresher } from './slot-refresh.js';

type Command = (...args: (string | number)[]) => Promise<unknown>;

/** ioredis' refusal of a Cluster pipeline whose keys are on more than one node (nothing was sent). */
const SPLIT_PIPELINE = /same slots allocation group/;

/** What the store uses of an ioredis (or iovalkey) `Redis` or `Cluster`. */
interface IoredisLike {
  defineCommand(name: string, definition: { lua: string }): void;
  pipeline(): {
    exec(): Promise<[Error | null, unknown][] | null>;
  } & Record<string, unknown>;
  readonly isCluster?: boolean;
  readonly slots?: readonly (readonly string[] | undefined)[];
  /** A Cluster's read of its slots (`CLUSTER SLOTS`); it sends no command again. */
  refreshSlotsCache?(callback?: (error?: Error | null) => void): void;
}

/** Whether `client` looks like an ioredis or iovalkey client (both define Lua commands). */
export function isIoredisLike(client: object): client is IoredisLike {
  const c = client as Partial<IoredisLike>;
  return typeof c.defineCommand === 'function' && typeof c.pipeline === 'function';
}

/**
 * The adapter for ioredis and iovalkey (its fork, same API). The script is defined on the client
 * with `defineCommand`, so ioredis' own EVALSHA-with-NOSCRIPT-fallback runs it (`lib/Script.ts`),
 * on a pipeline too. Several calls for one node go as one pipeline (ioredis wants a Cluster
 * pipeline's keys on one node, which the store's per-node queues guarantee).
 */
export function ioredisAdapter(client: IoredisLike): RedisClientAdapter {
  const defined = new Set<string>();
  const commandFor = (script: LuaScript): string => {
    const name = `tieredLimiter${script.sha1.slice(0, 12)}`;
    if (!defined.has(name)) {
      client.defineCommand(name, { lua: script.lua });
      defined.add(name);
    }
    return name;
  };
  const isCluster = client.isCluster === true;
  const run = async (script: LuaScript, calls: readonly ScriptCall[]): Promise<unknown[]> => {
    const name = commandFor(script);
    if (calls.length === 1) {
      const command = (client as unknown as Record<string, Command>)[name]!;
      return [await command.apply(client, [...calls[0]!]).catch(asError)];
    }
    const pipeline = client.pipeline();
    for (const call of calls) (pipeline[name] as Command).apply(pipeline, [...call]);
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipeline.exec();
    } catch (error) {
      // A Cluster pipeline whose slots the client now maps to different nodes is refused before
      // anything is sent: send each alone. `RedisStore` splits a flush by node just before it
      // calls here, so this is for an adapter's other callers, or a map that changed in between.
      if (!(error instanceof Error) || !SPLIT_PIPELINE.test(error.message)) throw error;
      return Promise.all(calls.map((call) => run(script, [call]).then((r) => r[0])));
    }
    return calls.map((_, i) => {
      const [error, reply] = results?.[i] ?? [new Error('no reply in the pipeline'), undefined];
      return error ?? reply;
    });
  };
  // A killed master's slots went to its replica; with the failover retry off, only ioredis' 5 s
  // timer read the slots again (back 0.1 s after the promotion in one run, not within 4 s in another).
  const refresh =
    isCluster && typeof client.refreshSlotsCache === 'function'
      ? slotRefresher(() => {
          client.refreshSlotsCache?.(() => {});
          return true;
        })
      : undefined;
  return {
    client: 'ioredis',
    isCluster,
    nodeOf: (slot) => (isCluster ? (client.slots?.[slot]?.[0] ?? `slot:${slot}`) : ''),
    async evalScript(script: LuaScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
      if (refresh === undefined) return run(script, calls);
      try {
        const replies = await run(script, calls);
        if (replies.some((reply) => reply instanceof Error)) refresh();
        return replies;
      } catch (error) {
        refresh();
        throw error;
      }
    },
  };
}
