import type { BucketReply, Decision, LimitSpec } from '@tiered-limiter/core';
import type { GuardResult } from '../guard/store-guard.js';

/**
 * Tokens of one grant: one store generation, one expiry at this holder. The store holds the
 * generation longer than the grant lives here (`holdMs` > `ttlMs`), so every token is spent or
 * handed back before the store could let the bucket refill the room it takes.
 */
export class Grant {
  /** Tokens not yet spent. */
  left: number;
  /** Tokens spent since the last report. */
  spent = 0;
  /** Tokens expired or drained unspent, to hand back in the next report. */
  returning = 0;
  /** The store's generation of these tokens. */
  generation: number;
  /** When these tokens stop being good here (this process's clock). */
  expiresAtMs: number;

  constructor(generation: number, expiresAtMs: number, tokens: number) {
    this.generation = generation;
    this.expiresAtMs = expiresAtMs;
    this.left = tokens;
  }
}

/**
 * One key's lease: the grants this instance holds, oldest expiry first, and what it last heard
 * of the global bucket. The hot path reads and writes `head` directly; everything else goes
 * through the functions below.
 */
export class Lease {
  /** The user's key this lease is for. */
  readonly key: string;
  /** Set once the lease left the table (evicted, or the limiter closed): late grants go back. */
  detached = false;
  /** A detached carrier's limits (`carrierOf`): its grants were taken under them, not the limiter's. */
  grantedUnder: readonly LimitSpec[] | undefined = undefined;
  /** The grant the hot path spends from: the first with tokens left (its expiry still to check). */
  head: Grant | undefined = undefined;
  /** Grants not yet fully accounted for to the store, by expiry. */
  readonly grants: Grant[] = [];
  /**
   * A grant dropped once fully accounted for, for the next `addGrant` to reuse: a grant lives a
   * sync period, long enough for the garbage collector to copy it out of the young generation.
   * At 100,000 keys new grants were about a third of what it copied, and the arrays `splice` made
   * for them another third.
   */
  spare: Grant | undefined = undefined;
  /** Tokens left across the grants. */
  tokens = 0;
  /** At or below this many tokens, a hot-path admission starts a background refill. */
  lowWater = 0;
  /** Until then, deny here with no round trip (a global denial, or a `block`). */
  deniedUntilMs = 0;
  /**
   * When the store said one token could pass, if the last reply turned a token away; else 0. A
   * larger cost's wait runs on from it a token at a time: read from `globalRemaining`, a whole
   * number, it was up to a token's time long (3,000 ms where the store says 2,500).
   */
  tokenAtMs = 0;
  /**
   * `Refiller.asks` when `reward` or `penalty` last forgot the denial: a reply to an op asked for
   * by then may have been decided before the call landed, and its denial is not kept.
   */
  forgotAsk = 0;
  /** Until then the key is blocked (`block`): grants that land meanwhile go straight back. */
  blockedUntilMs = 0;
  /** The refill in flight, shared by every request that finds the lease short. */
  refill: Promise<GuardResult<BucketReply>> | undefined = undefined;
  /** Tokens that requests waiting on `refill` need. */
  pendingCost = 0;
  /** Tokens a take just took for the request waiting on it (a sparse key keeps no lease). */
  taken = 0;
  /**
   * Tokens asked for the key here, ever, admitted or turned away by a remembered denial: the
   * demand estimates read differences. Denials count, or a key held at its limit would look idle
   * and stop asking for its share.
   */
  asked = 0;
  /** Requests counted in `asked`: with it, what a request of the key costs on average (`meanCost`). */
  requests = 0;
  /**
   * Tokens the key's first request here asked: it starts the clock on the key's demand and says
   * nothing of a rate, so the first estimate leaves it out.
   */
  firstCost = 0;
  /** `asked` when the last refill was sent. */
  askedAtRefill = 0;
  /** When the last refill was sent. */
  lastRefillAtMs: number;
  /** `asked` at the last periodic sync. */
  askedAtSync = 0;
  /** `requests` at the last periodic sync. */
  requestsAtSync = 0;
  /**
   * Tokens a request of the key asked for on average over the last sync period that had one (1
   * until then): the sync sizes leases in requests of this cost, not in single tokens.
   */
  meanCost = 1;
  /** When the last periodic sync was sent. */
  syncedAtMs: number;
  /** Tokens per ms this instance asks for the key: its mean over the first periods, then an EWMA. */
  rate = 0;
  /** Start of the span `rate` is the plain mean over, until it spans a few periods (then an EWMA). */
  rateFromMs = 0;
  /** `asked` at `rateFromMs`. */
  askedAtRateFrom = 0;
  /** Tokens admitted here before the store heard of the key (optimistic cold start), to charge. */
  debt = 0;
  /** When optimistic cold start admitted the key here (its lease began so), or -Infinity. */
  claimedAtMs = Number.NEGATIVE_INFINITY;
  /** The global bucket's remaining tokens, as of `replyAtMs`. */
  globalRemaining: number;
  /**
   * When the last reply's op was sent: the store decided then or later, so the refill counted
   * from here is never short, and a wait counted from here ends no later than the store's.
   */
  replyAtMs: number;
  /** The last reply's `resetMs`. */
  resetMs = 0;
  /** The limit the last reply spoke of. */
  limit: LimitSpec;
  /** The last remembered denial handed out, handed out again while its values hold. */
  denial: Decision | undefined = undefined;
  /** The store's call group of the key (`GlobalStore.groupOf`), once a sync asked; -1 before. */
  group = -1;

  constructor(key: string, nowMs: number, limit: LimitSpec) {
    this.key = key;
    this.lastRefillAtMs = nowMs;
    this.syncedAtMs = nowMs;
    this.replyAtMs = nowMs;
    this.globalRemaining = limit.capacity;
    this.limit = limit;
  }
}

/** Points `head` at the first grant with tokens left. */
export function nextHead(lease: Lease): void {
  let head: Grant | undefined;
  for (const grant of lease.grants) {
    if (grant.left > 0) {
      head = grant;
      break;
    }
  }
  lease.head = head;
}

/** Adds a grant of `tokens` that stays good here until `expiresAtMs`. */
export function addGrant(lease: Lease, generation: number, expiresAtMs: number, tokens: number): void {
  let grant = lease.spare;
  if (grant === undefined) {
    grant = new Grant(generation, expiresAtMs, tokens);
  } else {
    lease.spare = undefined;
    grant.generation = generation;
    grant.expiresAtMs = expiresAtMs;
    grant.left = tokens;
    grant.spent = 0;
    grant.returning = 0;
  }
  // Pushed, then moved down to its place by expiry: `splice` allocated an array on every call.
  const grants = lease.grants;
  let i = grants.length;
  grants.push(grant);
  while (i > 0 && grants[i - 1]!.expiresAtMs > expiresAtMs) {
    grants[i] = grants[i - 1]!;
    i--;
  }
  grants[i] = grant;
  lease.tokens += tokens;
  nextHead(lease);
}

/**
 * Keeps the grants `keep` says, in their order; the one dropped last becomes the lease's spare.
 * The kept ones are swapped to the front, so the dropped ones gather at the end and are popped:
 * an array emptied through its `length` gives up its storage, and the key's next grant
 * allocated it anew.
 */
export function keepGrants(lease: Lease, keep: (grant: Grant) => boolean): void {
  const grants = lease.grants;
  let kept = 0;
  for (let i = 0; i < grants.length; i++) {
    const grant = grants[i]!;
    if (!keep(grant)) continue;
    grants[i] = grants[kept]!;
    grants[kept++] = grant;
  }
  while (grants.length > kept) lease.spare = grants.pop();
}

/** Moves every expired grant's tokens to be handed back; returns how many expired. */
export function expireGrants(lease: Lease, nowMs: number): number {
  let expired = 0;
  for (const grant of lease.grants) {
    if (grant.left > 0 && nowMs >= grant.expiresAtMs) {
      expired += grant.left;
      grant.returning += grant.left;
      grant.left = 0;
    }
  }
  if (expired > 0) {
    lease.tokens -= expired;
    nextHead(lease);
  }
  return expired;
}

/**
 * Hands back (in the next report) the tokens of grants that expire before `beforeMs`, all but
 * `keep` of them: a sync does this so that the grant it replaces stops taking room in the global
 * bucket a period early, keeping only what bridges the wait for the new grant. Returns how many.
 */
export function handBackExpiring(lease: Lease, beforeMs: number, keep: number): number {
  let kept = 0;
  let back = 0;
  for (const grant of lease.grants) {
    if (grant.left === 0 || grant.expiresAtMs >= beforeMs) continue;
    const stay = grant.left < keep - kept ? grant.left : keep - kept;
    kept += stay;
    const leaving = grant.left - stay;
    if (leaving > 0) {
      grant.returning += leaving;
      grant.left = stay;
      back += leaving;
    }
  }
  if (back > 0) {
    lease.tokens -= back;
    nextHead(lease);
  }
  return back;
}

/**
 * Spends `cost` tokens from live grants, oldest first, if they hold that many: the general case
 * of the hot path's one-grant step (a cost spanning grants, an expired head). Expire first.
 */
export function spend(lease: Lease, cost: number): boolean {
  if (lease.tokens < cost) return false;
  let owed = cost;
  for (const grant of lease.grants) {
    if (owed === 0) break;
    const take = grant.left < owed ? grant.left : owed;
    grant.left -= take;
    grant.spent += take;
    owed -= take;
  }
  lease.tokens -= cost;
  lease.asked += cost;
  lease.requests++;
  nextHead(lease);
  return true;
}

/** Moves every token left to be handed back (eviction, close, reset). Returns how many. */
export function drainLease(lease: Lease): number {
  const held = lease.tokens;
  for (const grant of lease.grants) {
    grant.returning += grant.left;
    grant.left = 0;
  }
  lease.tokens = 0;
  lease.head = undefined;
  return held;
}
