/**
 * Base class of every error tiered-limiter throws or reports. `code` is stable and meant for
 * programs (`switch (err.code)`); `message` is for people and always names the bad value.
 */
export class TieredLimiterError extends Error {
  /** A stable, machine-readable code such as `ERR_TL_CONFIG`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(`[tiered-limiter] ${message}`, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * A limiter or limit was configured with a value it can never work with (a zero capacity, a
 * NaN rate, a timeout of -1). Thrown at construction, never later; `option` names the field.
 */
export class ConfigError extends TieredLimiterError {
  /** The option that was refused, e.g. `capacity` or `timeoutMs`. */
  readonly option: string;
  /** The value that was refused, as given. */
  readonly value: unknown;

  constructor(option: string, value: unknown, expected: string) {
    super('ERR_TL_CONFIG', `Expected \`${option}\` to be ${expected}, got ${describe(value)}`);
    this.option = option;
    this.value = value;
  }
}

/**
 * A call was made with an argument that is a programming error (a key that is not a string, a
 * cost of 0.5). Thrown at once from the call; a `GlobalStore`'s methods reject with it instead,
 * never throw. A store failure is never reported this way.
 */
export class ArgumentError extends TieredLimiterError {
  /** The argument that was refused, e.g. `key` or `cost`. */
  readonly argument: string;
  /** The value that was refused, as given. */
  readonly value: unknown;

  constructor(argument: string, value: unknown, expected: string, code = 'ERR_TL_ARGUMENT') {
    super(code, `Expected \`${argument}\` to be ${expected}, got ${describe(value)}`);
    this.argument = argument;
    this.value = value;
  }
}

/**
 * A request asked for more tokens than the smallest capacity among its limits: no amount of
 * waiting could admit it, so it is refused at once instead of waited on forever.
 */
export class CostExceedsCapacityError extends ArgumentError {
  constructor(cost: number, capacity: number) {
    super(
      'cost',
      cost,
      `at most the capacity ${capacity} (a larger cost can never be admitted)`,
      'ERR_TL_COST_EXCEEDS_CAPACITY',
    );
  }
}

/**
 * The shared store failed, timed out, or was skipped because its circuit breaker is open.
 * Never thrown into a request: it rides on the `Decision` (`decision.error`) that the limit's
 * failure policy made, and on the limiter's failure hook.
 */
export class StoreError extends TieredLimiterError {
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? 'ERR_TL_STORE', message, options);
  }
}

/**
 * The store answered, but with an error of its own instead of a reply: Redis refused the call
 * (`OOM` over `maxmemory` under `noeviction`, `NOPERM` from an ACL, `BUSY` behind another
 * client's long script, `LOADING` after a restart, `MISCONF` after a failed save, `READONLY` on a
 * demoted master, `WRONGTYPE` on a key that is not a bucket). `reply` is the error's first word,
 * for programs to tell them apart; `cause` is the client's error. The server is up: the limiter
 * decides by its failure policy until what `reply` names is fixed, and then uses the store again
 * by itself. Reported, never thrown.
 */
export class StoreReplyError extends StoreError {
  /** The first word of the store's error, e.g. `OOM`, `NOPERM`, `BUSY`, `LOADING`, `MISCONF`, `ERR`. */
  readonly reply: string;

  constructor(reply: string, message: string, options?: { cause?: unknown }) {
    super(message, { cause: options?.cause, code: 'ERR_TL_STORE_REPLY' });
    this.reply = reply;
  }
}

/**
 * The store did not answer within the limiter's `timeoutMs`. Reported, never thrown. When this
 * process's event loop ran the timeout's timer late (`loopLateMs` above 0), the process itself
 * stalled while it waited (a busy loop, a long garbage collection, a starved CPU): the answer may
 * have been on its way, and a service that sees this often sets `timeoutMs` above its loop's delay.
 */
export class StoreTimeoutError extends StoreError {
  /** The timeout that elapsed. */
  readonly timeoutMs: number;
  /** How late, in whole ms, the event loop ran the timeout's timer; 0 when on time. */
  readonly loopLateMs: number;

  constructor(timeoutMs: number, loopLateMs = 0) {
    const late = Math.max(0, Math.floor(loopLateMs));
    super(
      late > 0
        ? `store call timed out after ${timeoutMs} ms (this process's event loop ran the timer ${late} ms late)`
        : `store call timed out after ${timeoutMs} ms`,
      { code: 'ERR_TL_STORE_TIMEOUT' },
    );
    this.timeoutMs = timeoutMs;
    this.loopLateMs = late;
  }
}

/**
 * The store dropped an op unsent: its caller gave up waiting (`GlobalStore.apply`'s `wait`) while
 * the op was queued behind calls a slow server held. It never reached the server, so nothing it
 * carried was counted there; the limiters' guard decided the request by its timeout already.
 */
export class StoreWithdrawnError extends StoreError {
  constructor() {
    super('store op withdrawn unsent: its caller gave up while it was queued', {
      code: 'ERR_TL_STORE_WITHDRAWN',
    });
  }
}

/** The circuit breaker is open: the store was not asked at all. Reported, never thrown. */
export class CircuitOpenError extends StoreError {
  constructor(cause?: unknown) {
    super('circuit breaker is open: the store is not being called', { code: 'ERR_TL_CIRCUIT_OPEN', cause });
  }
}

/** A limiter was used after `close()`. */
export class ClosedError extends TieredLimiterError {
  constructor(what: string) {
    super('ERR_TL_CLOSED', `${what} is closed: create a new one instead of reusing it after close()`);
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 60 ? `a string of length ${value.length}` : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  return `a value of type ${typeof value}`;
}
