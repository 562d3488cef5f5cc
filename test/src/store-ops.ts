import type { BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';

/** A store's one op by the names of what it does, for readable tests. */
export const storeOps = (store: GlobalStore) => ({
  take: (key: string, limits: LimitSpec[], cost: number) => store.apply({ key, limits, take: cost }),
  peek: (key: string, limits: LimitSpec[]) => store.apply({ key, limits }),
  credit: (key: string, limits: LimitSpec[], tokens: number) => store.apply({ key, limits, credit: tokens }),
  reserve: (key: string, limits: LimitSpec[], want: number, min: number) =>
    store.apply({ key, limits, reserve: { want, min, holdMs: 60_000 } }),
});

/** What a take came back with when its connection was cut under it: a reply or an error. */
export interface CutOutcome {
  reply: BucketReply | undefined;
  error: unknown;
}

/**
 * Sends a take of 1 on `key` and runs `cut` (destroy the socket) as soon as the store has sent it,
 * then waits for the take to settle either way.
 */
export async function takeWhileCutting(
  store: GlobalStore,
  key: string,
  limits: LimitSpec[],
  cut: () => void,
): Promise<CutOutcome> {
  const pending = store.apply({ key, limits, take: 1 }).then(
    (reply) => ({ reply, error: undefined }),
    (error: unknown) => ({ reply: undefined, error }),
  );
  // The store sends what a turn gathered once its promise jobs have run (a process tick): let it
  // go out, then cut.
  await Promise.resolve();
  await new Promise<void>((resolve) => process.nextTick(resolve));
  cut();
  return pending;
}

/** Destroys an ioredis connection's socket under it, as a network fault would. */
export function destroySocket(connection: unknown): void {
  (connection as { stream: { destroy(): void } }).stream.destroy();
}
