/** What a lease owes the store: spends and hand-backs it has not heard of, and taking them off the books. */

import type { LeaseReport, LimitSpec } from '@tiered-limiter/core';
import { drainLease, type Grant, keepGrants, Lease } from './lease.js';

/**
 * A detached lease of `lease`'s key that carries grants taken under `limits`, replaced since
 * (`setLimits`): what it owes goes to their buckets however late it is sent. Left on the key's
 * lease, a hand-back the breaker refused rode the lease's next op under the new limits, and met a
 * lease of the same generation on the new bucket (19 tokens created of 100).
 */
export function carrierOf(lease: Lease, limits: readonly LimitSpec[]): Lease {
  const carrier = new Lease(lease.key, lease.replyAtMs, lease.limit);
  carrier.detached = true;
  carrier.grantedUnder = limits;
  return carrier;
}

/** Drains each of `leases` and moves its grants to a carrier of `limits`; the carriers of those that held any. */
export function carveOff(leases: Iterable<Lease>, limits: readonly LimitSpec[]): Lease[] {
  const carriers: Lease[] = [];
  for (const lease of leases) {
    drainLease(lease);
    if (lease.grants.length === 0) continue;
    const carrier = carrierOf(lease, limits);
    carrier.grants.push(...lease.grants);
    lease.grants.length = 0;
    carriers.push(carrier);
  }
  return carriers;
}

/** Whether the lease has spends or hand-backs the store has not heard of. */
export function owes(lease: Lease): boolean {
  for (const grant of lease.grants) if (grant.spent > 0 || grant.returning > 0) return true;
  return false;
}

/**
 * Whether the lease holds tokens that expired unspent: those must reach the store before their
 * generation is released, or the room they hold is lost until then. Spends alone ride on the
 * key's next op (or go with their generation): a call each would cost a round trip per key.
 */
export function owesHandBack(lease: Lease): boolean {
  for (const grant of lease.grants) if (grant.returning > 0) return true;
  return false;
}

/**
 * The reports the store has not heard yet, taken off the lease's books (a report is sent once,
 * never again, whatever becomes of its call), or `undefined` when there are none. Grants fully
 * accounted for are dropped.
 */
export function takeReports(lease: Lease): LeaseReport[] | undefined {
  let reports: LeaseReport[] | undefined;
  const grants = lease.grants;
  for (const grant of grants) {
    if (grant.spent === 0 && grant.returning === 0) continue;
    if (reports === undefined) reports = [];
    reports.push({ generation: grant.generation, spent: grant.spent, returned: grant.returning });
    grant.spent = 0;
    grant.returning = 0;
  }
  if (reports !== undefined) keepGrants(lease, hasTokens);
  return reports;
}

/**
 * Drops used-up grants that expired here before `expiredBeforeMs`: the store has released their
 * generation by now, so their unreported spends are moot (it counted them as spent).
 */
export function forgetReleased(lease: Lease, expiredBeforeMs: number): void {
  keepGrants(lease, (grant) => grant.left > 0 || grant.returning > 0 || grant.expiresAtMs >= expiredBeforeMs);
}

function hasTokens(grant: Grant): boolean {
  return grant.left > 0;
}
