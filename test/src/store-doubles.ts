import type { BucketOp, BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';

export type StoreMode = 'ok' | 'reject' | 'hang';

/** An op a `ScriptedStore` received (or a reset, as an op with no fields). */
export interface StoreCall {
  readonly method: 'apply' | 'reset';
  readonly op: BucketOp;
}

/**
 * Wraps a real store and, on command, rejects or never answers: the faults a limiter must
 * survive, without mocking what a healthy store replies.
 */
export class ScriptedStore implements GlobalStore {
  mode: StoreMode = 'ok';
  readonly calls: StoreCall[] = [];
  readonly #inner: GlobalStore;

  constructor(inner: GlobalStore) {
    this.#inner = inner;
  }

  /** Ops received that reserve (refills), take, or carry nothing asked (reports, peeks). */
  count(kind: 'reserve' | 'take' | 'settle' | 'reset'): number {
    return this.calls.filter((c) => kindOf(c) === kind).length;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    return this.#run({ method: 'apply', op }, () => this.#inner.apply(op));
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#run({ method: 'reset', op: { key, limits } }, () => this.#inner.reset(key, limits));
  }

  #run<T>(call: StoreCall, real: () => Promise<T>): Promise<T> {
    this.calls.push(call);
    if (this.mode === 'reject') return Promise.reject(new Error('connection refused'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    return real();
  }
}

function kindOf(call: StoreCall): 'reserve' | 'take' | 'settle' | 'reset' {
  if (call.method === 'reset') return 'reset';
  if (call.op.reserve !== undefined) return 'reserve';
  if (call.op.take !== undefined) return 'take';
  return 'settle';
}
