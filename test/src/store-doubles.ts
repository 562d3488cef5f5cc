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
  /** Calls passed on to the inner store and not yet answered. */
  readonly #out = new Set<Promise<unknown>>();

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

  /**
   * Resolves once every call passed on to the inner store so far has been answered, whenever
   * that is: what a test waits for after work the limiter sends in the background (a hand-back),
   * rather than a sleep that assumes how long a round trip takes. Calls a `hang` mode keeps are
   * not waited for.
   */
  async settled(): Promise<void> {
    while (this.#out.size > 0) await Promise.allSettled([...this.#out]);
  }

  #run<T>(call: StoreCall, real: () => Promise<T>): Promise<T> {
    this.calls.push(call);
    if (this.mode === 'reject') return Promise.reject(new Error('connection refused'));
    if (this.mode === 'hang') return new Promise<T>(() => {});
    const answer = real();
    this.#out.add(answer);
    const done = () => this.#out.delete(answer);
    answer.then(done, done);
    return answer;
  }
}

function kindOf(call: StoreCall): 'reserve' | 'take' | 'settle' | 'reset' {
  if (call.method === 'reset') return 'reset';
  if (call.op.reserve !== undefined) return 'reserve';
  if (call.op.take !== undefined) return 'take';
  return 'settle';
}

/** The inner store's fleet registry, so a limiter over a `LosableStore` counts its fleet. */
type Registry = Required<Pick<GlobalStore, 'heartbeat' | 'leave'>>;

/**
 * One instance's way to a shared store, which that instance alone can lose (`lost`): its ops and
 * its heartbeats are refused while the others' go through, as for a process cut off from Redis.
 * A leave always goes through (a closing instance in a test should not linger in the count).
 */
export class LosableStore implements GlobalStore {
  lost = false;
  readonly #inner: GlobalStore & Registry;

  constructor(inner: GlobalStore & Registry) {
    this.#inner = inner;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    return this.lost ? refused() : this.#inner.apply(op);
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.lost ? refused() : this.#inner.reset(key, limits);
  }

  heartbeat(instance: string, ttlMs: number): Promise<number> {
    return this.lost ? refused() : this.#inner.heartbeat(instance, ttlMs);
  }

  leave(instance: string): Promise<void> {
    return this.#inner.leave(instance);
  }
}

function refused(): Promise<never> {
  return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
}
