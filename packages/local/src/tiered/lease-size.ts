import type { BatchPolicy } from './batch-size.js';
import type { Lease } from './lease.js';
import { spansLifeMs } from './lease-op.js';
import type { TieredConfig } from './options.js';

/** Requests a key must expect per lease lifetime for the sync to lease for it: below, it is sparse. */
export const MIN_EXPECTED = 0.35;
/**
 * A key is quiet when the fleet asks for it at most this share of its refill rate (this instance's
 * demand times the fleet): far from its limit, a larger grant held longer takes room nobody needs.
 */
export const QUIET_SHARE = 0.25;
/**
 * Sync intervals a quiet key's grant lives. It is sized for them, and the sync between sends the
 * key nothing while the grant covers the next interval: on 100,000 keys drawn by Zipf's law at
 * 25,000 decisions a second, nine in ten held keys were quiet, and a sync op each every period
 * was most of what the limiter asked of Redis.
 */
export const QUIET_SPANS = 2;

/**
 * Tokens a key expecting `expected` requests over a grant's life should hold: three standard
 * deviations of a Poisson count above it.
 */
export function needed(expected: number): number {
  return Math.ceil(expected + 3 * Math.sqrt(expected));
}

/**
 * Tokens `lease`'s key needs over `ms` at its rate: `needed` of its requests, each of the key's
 * mean cost. Counted in tokens as if each were a request, a key asking 10 tokens a second in
 * requests of 10 was leased 4 tokens, which no request of it could spend (each then cost a
 * refill and the sync a lease: two store ops a request, where a take is one).
 */
export function neededTokens(lease: Lease, ms: number): number {
  const cost = lease.meanCost;
  return Math.ceil(cost * needed((lease.rate * ms) / cost));
}

/**
 * Whether `lease` holds, in grants that last until `untilMs`, what its key needs over a grant's
 * life of `ttlMs` (`neededTokens`).
 */
export function covers(lease: Lease, untilMs: number, ttlMs: number): boolean {
  let lasting = 0;
  for (const grant of lease.grants) if (grant.expiresAtMs >= untilMs) lasting += grant.left;
  return lasting > 0 && lasting >= neededTokens(lease, ttlMs);
}

/**
 * Tokens the sync leases `lease` at `nowMs` for `spans` sync intervals (`periodMs` long): its
 * demand over the grant's life, less what grants that last as long still hold (for one interval,
 * those that outlive the next sync), capped by a fair share, the largest batch and a quarter of
 * what the bucket has left. None below the demand a lease pays for (lower for a key `leasing`
 * already).
 */
export function leaseWant(
  lease: Lease,
  nowMs: number,
  periodMs: number,
  timing: TieredConfig['timing'],
  batch: BatchPolicy,
  leasing: boolean,
  spans: number,
): number {
  // Requests, not tokens: the threshold and the spread are a count of requests (of the mean cost).
  const expected = (lease.rate * timing.ttlMs) / lease.meanCost;
  // A key already leasing (or synced lately) keeps its lease down to half the demand it needed
  // to get one: a rate near the threshold, measured over a few periods, would otherwise flap
  // in and out of leases.
  if (expected < (leasing ? MIN_EXPECTED / 2 : MIN_EXPECTED)) return 0;
  // Three standard deviations, not four: four cut a fleet of 200's refills between syncs from 17
  // to 4 a second on fake time, but where a key's fair share is a few tokens (100 instances on
  // 10 keys of 400 at 400/s: 6 each), every instance asked for all of it, the bucket ran dry
  // and the refills went from 11 to 63 a second.
  const lifeMs = spansLifeMs(spans, timing);
  const need = neededTokens(lease, lifeMs);
  // Tokens that outlive the next sync already cover part of the next period. A quiet key's
  // grant must hold what it needs at the sync between on its own (`covers`): older grants
  // are spent first and only help it do so.
  const keptAfterMs = spans === 1 ? nowMs + periodMs : nowMs + lifeMs;
  let kept = 0;
  for (const grant of lease.grants) if (grant.expiresAtMs > keptAfterMs) kept += grant.left;
  const left = Math.min(
    lease.limit.capacity,
    lease.globalRemaining + (nowMs - lease.replyAtMs) * lease.limit.refillPerMs,
  );
  const cap = Math.max(batch.fairShare, Math.ceil(left / 4), 1);
  const want = Math.min(need - kept, cap, batch.maxBatch);
  return want > 0 ? want : 0;
}
