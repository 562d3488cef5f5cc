/**
 * One instance's way to a shared store (`FaultyView`), which can fail for that instance alone, in
 * the ways a real one does: refused at once, silent, an op that runs but whose answer comes late,
 * or an op that reaches the store late, after its caller gave up.
 */
import type { BucketOp, BucketReply, GlobalStore, LimitSpec } from '@tiered-limiter/core';

/** How an instance's calls fail, and by how much a late answer or op is late. */
export interface Fault {
  readonly mode: 'reject' | 'hang' | 'lateAnswer' | 'lateArrival';
  readonly lateMs: number;
}

type SharedStore = Required<Pick<GlobalStore, 'apply' | 'reset' | 'heartbeat' | 'leave'>>;

/** A view of `shared` for one instance, failing as `fault` says while it is set. */
export class FaultyView implements GlobalStore {
  fault: Fault | undefined;
  readonly #shared: SharedStore;

  constructor(shared: SharedStore) {
    this.#shared = shared;
  }

  apply(op: BucketOp): Promise<BucketReply> {
    return this.#through(() => this.#shared.apply(op));
  }

  reset(key: string, limits: readonly LimitSpec[]): Promise<void> {
    return this.#through(() => this.#shared.reset(key, limits));
  }

  heartbeat(instance: string, ttlMs: number): Promise<number> {
    return this.#through(() => this.#shared.heartbeat(instance, ttlMs));
  }

  leave(instance: string): Promise<void> {
    return this.#through(() => this.#shared.leave(instance));
  }

  #through<T>(run: () => Promise<T>): Promise<T> {
    const fault = this.fault;
    if (fault === undefined) return run();
    switch (fault.mode) {
      case 'reject':
        return Promise.reject(new Error('connection refused'));
      case 'hang':
        return new Promise<T>(() => {});
      case 'lateAnswer':
        return run().then((value) => after(fault.lateMs).then(() => value));
      case 'lateArrival':
        return after(fault.lateMs).then(run);
    }
  }
}

function after(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
