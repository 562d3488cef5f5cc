/** Least time between two reads of a Cluster's slots that failed calls ask for. */
export const SLOT_REFRESH_EVERY_MS = 500;

/**
 * `refresh`, run after a failed call at most once per `SLOT_REFRESH_EVERY_MS`: a Cluster client
 * that learns of a new slot owner only from a MOVED (node-redis) or from a timer (ioredis and
 * iovalkey, every 5 s, once `retryDelayOnFailover: 0` keeps a closed connection from resending)
 * never hears of the replica that took a killed master's slots, since a dead master answers
 * nothing. `refresh` returns whether it started a read; one that could not start does not count.
 */
export function slotRefresher(refresh: () => boolean): () => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  return () => {
    const now = performance.now();
    if (now - lastAt < SLOT_REFRESH_EVERY_MS) return;
    if (refresh()) lastAt = now;
  };
}
