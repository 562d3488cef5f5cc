import type { LimitSpec } from '@tiered-limiter/core';
import { relimit } from './lease-limit.js';
import type { TieredParts } from './wiring.js';

/**
 * `setLimits` on a two-tier limiter's parts, all or nothing: `next` is weighed against optimistic
 * cold start's rule and given to the store, either of which throws before anything changes; then
 * `commit` puts it in force on the limiter, and every lease follows (what it holds goes back and its
 * spends are reported to the buckets of `before`, the limits it was leased under). Cold, and apart
 * from the limiter's class so that the class keeps its hot path and little else.
 */
export function changeLimits(
  parts: TieredParts,
  before: readonly LimitSpec[],
  next: readonly LimitSpec[],
  commit: () => void,
): void {
  // Optimistic cold start's rule holds for the new limits too, or nothing changes.
  const coldStartUnderNext = parts.optimistic.weighLimits(next);
  parts.store.setLimits(next);
  coldStartUnderNext();
  commit();
  parts.refiller.batching.resize();
  const { leases } = parts;
  for (const lease of leases.values()) {
    // A denial the old limits gave says nothing of the new ones (a renamed limit starts full, a
    // faster rate refills sooner): it was kept until the old wait was over. A block stays.
    lease.deniedUntilMs = lease.blockedUntilMs;
  }
  parts.book.drainAll(leases.values(), before);
  // After the drain, whose carriers keep the replaced limits: a lease speaks of a limit in force.
  for (const lease of leases.values()) relimit(lease, next);
}
