import type { LuaScript, RedisClientAdapter, ScriptCall } from '@tiered-limiter/redis';
import type { Redis } from 'ioredis';

/**
 * A `RedisClientAdapter` as a user of some other client would write it, over nothing but raw
 * commands (`call`, and a pipeline of them) on one server: EVALSHA, EVAL for the calls the server
 * answered NOSCRIPT (Redis ran nothing then), DEL. The store takes it by shape, so the contract
 * run through it shows the store needs no more of a client than the README's list.
 */
export function rawCommandAdapter(redis: Redis): RedisClientAdapter {
  const noScript = (reply: unknown) => reply instanceof Error && reply.message.startsWith('NOSCRIPT');
  return {
    client: 'raw commands',
    isCluster: false,
    nodeOf: () => '',
    async evalScript(script: LuaScript, calls: readonly ScriptCall[]): Promise<unknown[]> {
      const pipeline = redis.pipeline();
      for (const call of calls) pipeline.call('EVALSHA', script.sha1, ...call);
      const results = (await pipeline.exec()) ?? [];
      const replies = calls.map((_, i) => {
        const [error, reply] = results[i] ?? [new Error('no reply in the pipeline'), undefined];
        return error ?? reply;
      });
      return Promise.all(
        replies.map((reply, i) => {
          if (!noScript(reply)) return reply;
          return redis.call('EVAL', script.lua, ...calls[i]!).catch((error: unknown) => error);
        }),
      );
    },
  };
}
