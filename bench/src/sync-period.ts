// A row's limiter's sync period, read while the row runs: the `T` of its accuracy bound.

/**
 * How often a row reads its limiter's sync period: `stats()` walks the held leases (100,000 in the
 * many-keys rows, a fraction of a ms), and the period moves at most once a sync round.
 */
const PERIOD_SAMPLE_MS = 250;

/**
 * The longest sync period a limiter reports from now to `stop()` (warm-up included: a lease spent
 * in the timed part may have been made in it); `null` for a limiter without the sync.
 */
export function watchSyncPeriod(read: (() => number | undefined) | undefined): { stop(): number | null } {
  if (read === undefined) return { stop: () => null };
  let longest: number | null = null;
  const sample = () => {
    const period = read();
    if (period !== undefined && (longest === null || period > longest)) longest = period;
  };
  sample();
  const timer = setInterval(sample, PERIOD_SAMPLE_MS);
  let stopped = false;
  return {
    stop() {
      if (!stopped) {
        stopped = true;
        clearInterval(timer);
        sample();
      }
      return longest;
    },
  };
}
