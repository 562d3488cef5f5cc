/** The callbacks of each signal listened to, and the one listener of ours that calls them. */
interface Fanout {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const fanouts = new WeakMap<AbortSignal, Fanout>();

/**
 * Calls `callback` when `signal` aborts; returns how to stop. However many waiters listen on one
 * signal, it carries a single listener of ours, gone with the last of them: a caller's signal shared
 * by 11 waiting `acquire`s (a job's, a shutdown's) made Node warn of a leak when each added its own.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let fanout = fanouts.get(signal);
  if (fanout === undefined) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      fanouts.delete(signal);
      for (const call of [...callbacks]) call();
    };
    fanout = { callbacks, listener };
    fanouts.set(signal, fanout);
    signal.addEventListener('abort', listener, { once: true });
  }
  // Its own entry: the same function may listen twice, and each stop removes one.
  const entry = () => callback();
  const { callbacks, listener } = fanout;
  callbacks.add(entry);
  return () => {
    if (!callbacks.delete(entry) || callbacks.size > 0 || fanouts.get(signal) !== fanout) return;
    fanouts.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}
