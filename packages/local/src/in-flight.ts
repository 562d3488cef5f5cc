/**
 * The store calls a limiter made that have not settled yet, counted: `close()` waits for them, so
 * that a Redis client closed after it cuts none (a disconnect right after `close()` failed every
 * call still out: requests decided by policy, rewards lost, a `failure` each). A request or a
 * management call settles within the guard's timeout, and the two-tier limiter waits no longer
 * than `closeTimeoutMs` in any case. A count, not a set of promises: the two-tier limiter's cold
 * path enters and leaves it once per decision.
 */
export class InFlight {
  #count = 0;
  #idle: (() => void)[] = [];
  #closed = false;

  /** Whether the limiter is closing (`close()` was called). */
  get closed(): boolean {
    return this.#closed;
  }

  /** A call starts. */
  enter(): void {
    this.#count++;
  }

  /** A call has settled. */
  leave(): void {
    if (--this.#count > 0 || this.#idle.length === 0) return;
    const idle = this.#idle;
    this.#idle = [];
    for (const resolve of idle) resolve();
  }

  /** `call`, counted until it settles. */
  track<T>(call: Promise<T>): Promise<T> {
    this.enter();
    return call.finally(() => this.leave());
  }

  /** The limiter closes: resolves once no call is in flight. */
  close(): Promise<void> {
    this.#closed = true;
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}
