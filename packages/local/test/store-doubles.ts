import type { BucketReply, GlobalStore, LimitSpec, ReserveReply, TakeReply } from '@tiered-limiter/core';

export type StoreMode = 'ok' | 'reject' | 'hang';

/** A call a `ScriptedStore` received. */
export interface StoreCall {
  readonly method: 'take' | 'reserve' | 'refund' | 'peek';
  readonly key: string;
  readonly args: readonly number[];
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

  count(method: StoreCall['method']): number {
    return this.calls.filter((c) => c.method === method).length;
  }

  take(key: string, limits: readonly LimitSpec[], cost: number): Promise<TakeReply> {
    return this.#run({ method: 'take', key, args: [cost] }, () => this.#inner.take(key, limits, cost));
  }

  reserve(key: string, limits: readonly LimitSpec[], want: number, min: number): Promise<ReserveReply> {
    return this.#run({ method: 'reserve', key, args: [want, min] }, () =>
      this.#inner.reserve(key, limits, want, min),
    );
  }

  refund(key: string, limits: readonly LimitSpec[], tokens: number): Promise<BucketReply> {
    return this.#run({ method: 'refund', key, args: [tokens] }, () =>
      this.#inner.refund(key, limits, tokens),
    );
  }

  peek(key: string, limits: readonly LimitSpec[]): Promise<BucketReply> {
    return this.#run({ method: 'peek', key, args: [] }, () => this.#inner.peek(key, limits));
  }

  #run<T>(call: StoreCall, real: () => Promise<T>): Promise<T> {
    this.calls.push(call);
    if (this.mode === 'reject') return Promise.reject(new Error('connection refused'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    return real();
  }
}
