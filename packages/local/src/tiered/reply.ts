import type { BucketOp, BucketReply } from '@tiered-limiter/core';
import { addGrant, type Lease } from './lease.js';
import type { TieredConfig } from './options.js';
import type { TieredCounters } from './stats.js';

/** What a store reply did to a lease: the tokens it leased, and whether the key is dry. */
export interface ReplyEffect {
  readonly leased: number;
  /** Turned away, or granted tokens that left the bucket with none. */
  readonly dry: boolean;
}

/**
 * Applies the store's `reply` to `op` (asked for as number `ask` of `Refiller.asks`, sent at
 * `sentAt`) to `lease` at `nowMs`: the grant (good here for `lifeMs` from `sentAt`) or the take's
 * token, what the bucket has left, and a denial to remember; counts it in `counters`. The grant
 * goes to `grantTo` (a carrier, for a reply to limits replaced since the op left).
 */
export function applyReply(
  lease: Lease,
  op: BucketOp,
  reply: BucketReply,
  ask: number,
  sentAt: number,
  nowMs: number,
  counters: TieredCounters,
  config: TieredConfig,
  lifeMs: number = config.timing.ttlMs,
  grantTo: Lease = lease,
): ReplyEffect {
  // Refills alone (a lease or a take): a sync's hand-back of an ended grant is no refill, and
  // counting it put the count at twice the refills sent on a key the sync kept.
  if (op.reserve !== undefined || op.take !== undefined) counters.latency(nowMs - sentAt);
  counters.tokensRefunded += returned(op);
  const leased = op.reserve === undefined ? 0 : reply.granted;
  // A take's tokens are spent already: they are the waiter's that asked for them, at once.
  lease.taken = op.take === undefined ? 0 : reply.granted;
  counters.tokensTaken += lease.taken;
  if (leased > 0) {
    counters.tokensLeased += leased;
    // A token's life here counts from when it was asked for, before the store granted it; the
    // store counts its hold from the grant, later, and holds it longer still.
    addGrant(grantTo, reply.generation, sentAt + lifeMs, leased);
    // With the periodic sync the next lease comes with the next sync, not at a low-water mark.
    lease.lowWater = config.sync === undefined ? Math.ceil(leased * config.lowWater) : -1;
  }
  // A reply to limits replaced since the op left (`grantTo` its carrier) speaks of a limit no
  // longer in force: the lease keeps what it knows of the new ones.
  if (grantTo === lease) {
    lease.globalRemaining = reply.remaining;
    // As of the send, not the read: a round trip or a stalled event loop between them would
    // lengthen a remembered denial's wait past the store's.
    lease.replyAtMs = sentAt;
    lease.resetMs = reply.resetMs;
    lease.limit = op.limits[reply.limitIndex] ?? lease.limit;
  }
  // A denial is remembered only when no whole token is left, and only for one token: the wait
  // is for what was asked, and a cost of 2 turned away kept a cost of 1 waiting for the second
  // token (500 ms at 2/s) where the bucket could pay it sooner. A cost above what is left must not
  // turn away a smaller one the bucket still has either. Nor is one kept, nor is the key dry, when
  // the op was asked for before a `reward` or `penalty` of the key: the store may have decided it
  // before the call landed (kept, it turned the key away here for 980 ms with a token in the
  // bucket). Its wait counts from the send: counted from the read, a stalled loop lengthened it
  // past the store's.
  const current = ask > lease.forgotAsk;
  const asked = op.reserve !== undefined || op.take !== undefined;
  const turnedAway = current && asked && !reply.ok && reply.remaining === 0;
  const need = op.take ?? op.reserve?.min ?? 1;
  const deniedUntil = turnedAway && need === 1 ? sentAt + Math.max(1, reply.retryAfterMs) : 0;
  lease.tokenAtMs = deniedUntil;
  lease.deniedUntilMs = deniedUntil > lease.blockedUntilMs ? deniedUntil : lease.blockedUntilMs;
  // A grant that left the bucket with nothing: at the key's limit, once it is spent the key is
  // as good as turned away (the lease book judges whether the key is at its limit).
  return { leased, dry: turnedAway || (current && leased > 0 && reply.remaining === 0) };
}

/** Tokens `op` hands back to the store. */
export function returned(op: BucketOp): number {
  let tokens = 0;
  if (op.reports !== undefined) for (const r of op.reports) tokens += r.returned;
  return tokens;
}
