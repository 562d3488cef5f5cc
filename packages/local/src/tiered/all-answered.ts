/**
 * Resolves once every one of `sent` has answered, and rejects with the first failure then: every
 * op is waited for, not only up to the first failure, since the others may still land.
 */
export function allAnswered(sent: readonly Promise<unknown>[]): Promise<void> {
  return Promise.allSettled(sent).then((results) => {
    for (const result of results) if (result.status === 'rejected') throw result.reason;
  });
}

/**
 * `allAnswered` for ops answered through callbacks instead of a promise each: each of the `count`
 * ops, numbered in the order sent, calls `answered()` or `failed(index, error)` once. `done`
 * resolves once all have, or rejects with the failure of the first op in that order that failed.
 * A sync's op chained two promises and an `allSettled` entry to reach the slice's promise.
 */
export class Answers {
  /** Settles once every op has answered. */
  readonly done: Promise<void>;
  #left: number;
  #failedAt = Number.POSITIVE_INFINITY;
  #failure: unknown;
  #resolve!: () => void;
  #reject!: (error: unknown) => void;

  constructor(count: number) {
    this.#left = count;
    this.done = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    if (count === 0) this.#resolve();
  }

  /** One op answered. */
  answered(): void {
    if (--this.#left > 0) return;
    if (this.#failedAt === Number.POSITIVE_INFINITY) this.#resolve();
    else this.#reject(this.#failure);
  }

  /** The op sent `index`th failed with `error`. */
  failed(index: number, error: unknown): void {
    if (index < this.#failedAt) {
      this.#failedAt = index;
      this.#failure = error;
    }
    this.answered();
  }
}
