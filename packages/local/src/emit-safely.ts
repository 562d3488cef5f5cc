/** What `emitSafely` needs of an emitter: its listeners of an event, `once` wrappers included. */
export interface Listened {
  // biome-ignore lint/complexity/noBannedTypes: EventEmitter's own type for a listener
  rawListeners(event: string): Function[];
}

/** Emitters and the events whose listeners have thrown already: each is reported once. */
const reported = new WeakMap<object, Set<string | symbol>>();

/**
 * Calls each listener of `event` on `emitter` with `args`, as `emitter.emit` would, except that a
 * listener that throws (or returns a promise that rejects) is reported and does not stop the
 * others or reach the caller. Events are emitted from inside the store guard's timeout and
 * breaker and from the sync's timer: a `degraded` listener that threw through `emit` left the
 * request's decision unsettled for ever and the process with an unhandled rejection.
 */
export function emitSafely(emitter: Listened, event: string, ...args: readonly unknown[]): void {
  // A copy: a `once` listener removes itself as it runs.
  for (const listener of emitter.rawListeners(event)) {
    try {
      const returned: unknown = listener.apply(emitter, args);
      if (isThenable(returned))
        returned.then(undefined, (error) => reportListenerError(emitter, event, error));
    } catch (error) {
      reportListenerError(emitter, event, error);
    }
  }
}

/**
 * Emits a process warning (`type: 'TieredLimiterWarning'`, code `TL_LISTENER_THREW`) for a listener
 * that threw, once per emitter and event: a `failure` listener that throws throws at every failed
 * call of an outage, and one warning with its stack says what a thousand would.
 */
function reportListenerError(emitter: object, event: string, error: unknown): void {
  let events = reported.get(emitter);
  if (events === undefined) {
    events = new Set();
    reported.set(emitter, events);
  }
  if (events.has(event)) return;
  events.add(event);
  const message = error instanceof Error ? error.message : String(error);
  process.emitWarning(
    `a '${event}' listener threw (${message}); the limiter went on without it. Reported once per limiter and event.`,
    {
      type: 'TieredLimiterWarning',
      code: 'TL_LISTENER_THREW',
      detail: error instanceof Error ? error.stack : undefined,
    },
  );
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
