/** How long a request waits for the shared store before its limit's failure policy decides. */
export const DEFAULT_TIMEOUT_MS = 20;
/** Consecutive store failures that open the circuit breaker. */
export const DEFAULT_FAILURE_THRESHOLD = 3;
/** How long an open breaker waits before letting one probe call through. */
export const DEFAULT_COOLDOWN_MS = 250;
/** `retryAfterMs` of a denial made by the `closed` policy: when to come back and try. */
export const DEFAULT_CLOSED_RETRY_AFTER_MS = 1000;
