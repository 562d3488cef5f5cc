import type { CallerWait } from '@tiered-limiter/core';

/**
 * Calls `landedLate` once `applied` lands, if the guard had given up on it by then: the op was on
 * its way when its call timed out, and ran after all. A caller that undid something for the failed
 * call (a remembered denial kept again after a reward) undoes that in turn.
 */
export function onLandedLate(applied: Promise<unknown>, wait: CallerWait, landedLate?: () => void): void {
  if (landedLate === undefined) return;
  applied.then(
    () => {
      if (wait.gaveUp) landedLate();
    },
    () => {},
  );
}
