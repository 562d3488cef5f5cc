import { type BucketReply, StoreTimeoutError } from '@tiered-limiter/core';
import type { GuardResult } from '../guard/store-guard.js';

/**
 * A refill's result, or a timeout once `leftMs` have passed (the call goes on, and its grant lands
 * on the lease): how the cold path keeps a request's refills within the one budget the guard's
 * timeout gives it. As the guard's timer does, the timer first lets the poll phase read an answer
 * already in the socket.
 */
export function refillWithin(
  refill: Promise<GuardResult<BucketReply>>,
  leftMs: number,
  timeoutMs: number,
): Promise<GuardResult<BucketReply>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<GuardResult<BucketReply>>((resolve) => {
    const timedOut = () => resolve({ ok: false, error: new StoreTimeoutError(timeoutMs) });
    timer = setTimeout(() => setImmediate(timedOut), leftMs);
  });
  return Promise.race([refill, late]).finally(() => clearTimeout(timer));
}
