import type { LimitSpec, ReserveReply } from '@tiered-limiter/core';

/**
 * One key's lease: tokens this instance already took from the global bucket, in at most two
 * generations so that no token outlives its own grant's expiry (merging a fresh grant into
 * older tokens must not extend the older tokens' life: the README's bound rests on that).
 * Fields are public and mutable because the limiter's hot path reads and writes them
 * directly; everything that is not a plain counter step lives in the functions below.
 */
export class Lease {
  /** The user's key this lease is for. */
  readonly key: string;
  /** Set once the lease left the table (evicted, or the limiter closed): late grants go back. */
  detached = false;
  /** Tokens held, both generations. */
  tokens = 0;
  /** When the oldest held tokens stop being good (already shortened by the coarse tick). */
  expiresAtMs = 0;
  /** Of `tokens`, how many belong to the newer generation. */
  newerTokens = 0;
  /** When the newer generation stops being good. */
  newerExpiresAtMs = 0;
  /** At or below this many tokens, a hot-path admission starts a background refill. */
  lowWater = 0;
  /** Until then, the global bucket said no: deny locally, no round trip. */
  deniedUntilMs = 0;
  /** The refill in flight, shared by every request that finds the lease short. */
  refill: Promise<ReserveReply> | undefined = undefined;
  /** Tokens that requests waiting on `refill` need. */
  pendingCost = 0;
  /** Tokens spent since the last refill was sent: the demand estimate. */
  usedSinceRefill = 0;
  /** When the last refill was sent. */
  lastRefillAtMs: number;
  /** The global bucket's tightest remaining, as of `replyAtMs`. */
  globalRemaining: number;
  /** When the last reply arrived. */
  replyAtMs: number;
  /** The last reply's `resetMs`. */
  resetMs = 0;
  /** The tightest limit. */
  limit: LimitSpec;

  constructor(key: string, nowMs: number, limit: LimitSpec) {
    this.key = key;
    this.lastRefillAtMs = nowMs;
    this.replyAtMs = nowMs;
    this.globalRemaining = limit.capacity;
    this.limit = limit;
  }
}

/** Adds a grant that expires at `expiresAtMs` to the lease. */
export function addGrant(lease: Lease, granted: number, expiresAtMs: number): void {
  if (granted <= 0) return;
  if (lease.tokens === 0) {
    lease.tokens = granted;
    lease.expiresAtMs = expiresAtMs;
    lease.newerTokens = 0;
    return;
  }
  // A third generation folds into the newer one with the earlier expiry: tokens may be
  // returned early, never kept late.
  lease.newerExpiresAtMs =
    lease.newerTokens === 0 ? expiresAtMs : Math.min(lease.newerExpiresAtMs, expiresAtMs);
  lease.newerTokens += granted;
  lease.tokens += granted;
}

/** Moves the newer generation up once the older one is spent. Called after a spend. */
export function promoteIfOlderSpent(lease: Lease): void {
  if (lease.newerTokens !== 0 && lease.tokens <= lease.newerTokens) {
    lease.expiresAtMs = lease.newerExpiresAtMs;
    lease.newerTokens = 0;
  }
}

/** Drops every generation that has expired by `nowMs`; returns how many tokens it dropped. */
export function dropExpired(lease: Lease, nowMs: number): number {
  let dropped = 0;
  while (lease.tokens > 0 && nowMs >= lease.expiresAtMs) {
    const older = lease.tokens - lease.newerTokens;
    dropped += older;
    lease.tokens = lease.newerTokens;
    lease.expiresAtMs = lease.newerExpiresAtMs;
    lease.newerTokens = 0;
  }
  return dropped;
}

/** Empties the lease, returning what it held (for refunds on eviction and close). */
export function drain(lease: Lease): number {
  const held = lease.tokens;
  lease.tokens = 0;
  lease.newerTokens = 0;
  return held;
}
