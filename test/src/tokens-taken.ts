import type { LimitSpec } from '@tiered-limiter/core';
import { type RedisClientLike, RedisStore } from '@tiered-limiter/redis';

/**
 * The tokens each of `keys` has lost from its bucket of `limit` under `prefix`, read from Redis now
 * (a look, which takes nothing): after a fault, a take counted twice shows as 2 where one request
 * was decided. The limit must refill too slowly to matter within the test.
 */
export function tokensTaken(
  redis: RedisClientLike,
  prefix: string,
  keys: readonly string[],
  limit: LimitSpec,
): Promise<number[]> {
  const store = new RedisStore({ redis, prefix });
  return Promise.all(
    keys.map((key) =>
      store.apply({ key, limits: [limit] }).then((reply) => limit.capacity - reply.remaining),
    ),
  );
}
