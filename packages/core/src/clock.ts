/**
 * A monotonic millisecond clock. Limiters default to `performance`; tests pass a fake one
 * and advance it by hand, so every number a test checks is exact.
 */
export interface Clock {
  /** Milliseconds since an arbitrary origin; never steps backwards. */
  now(): number;
}
