import type { Decision, StoreError } from '@tiered-limiter/core';
import type { RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import type { ScriptedStore } from '@tiered-limiter/test-harness';

// The store doubles live in the test harness, shared with the limiter contract and the option matrix.
export { ScriptedStore, type StoreCall, type StoreMode } from '@tiered-limiter/test-harness';

/** The two failure policies that need no local bucket, each with whether it admits while the store fails. */
export const OPEN_AND_CLOSED = [
  ['open', true],
  ['closed', false],
] as const;

/** A limiter over a scripted store, as a test's `setup` makes them. */
interface ScriptedSetup {
  readonly store: ScriptedStore;
  readonly limiter: RequestLimiter | TieredLimiter;
}

/** What one request made while the store rejected: the decision, and the `failure` events meanwhile. */
interface RejectedRequest {
  readonly decision: Decision;
  readonly failures: StoreError[];
}

/** Makes `store` reject every call, then makes one `consume('k')` on `limiter`. */
export async function consumeWhileRejecting({ store, limiter }: ScriptedSetup): Promise<RejectedRequest> {
  store.mode = 'reject';
  const failures: StoreError[] = [];
  limiter.on('failure', (error: StoreError) => failures.push(error));
  return { decision: await limiter.consume('k'), failures };
}

/** Makes `store` hang on every call, then starts one `consume('k')` on `limiter`: its pending decision. */
export function consumeWhileHanging({ store, limiter }: ScriptedSetup): Promise<Decision> {
  store.mode = 'hang';
  return limiter.consume('k');
}
