import { allowDecision, type Decision, denyDecision, internal, type LimitSpec } from '@tiered-limiter/core';
import type { LRUCache } from 'lru-cache';

const {
  advance,
  covers,
  fullBucket,
  isFullAt,
  isTighter,
  msUntilFull,
  msUntilTokens,
  refilled,
  tryTake,
  wholeTokens,
} = internal;
type BucketState = internal.BucketState;

/**
 * What `LocalLimiter` keeps per key: one bucket for a single limit, one per limit (in order) for
 * several. A key whose buckets have all refilled equals no entry, so the entry may be dropped then.
 */
export type Buckets = BucketState | BucketState[];

/** The buckets of an entry as a list, one per limit. */
export function listOf(stored: Buckets): BucketState[] {
  return Array.isArray(stored) ? stored : [stored];
}

/** The entry for `buckets`: the bucket itself when there is one limit (the hot path's shape). */
export function entryOf(buckets: BucketState[]): Buckets {
  return buckets.length === 1 ? buckets[0]! : buckets;
}

/** Full buckets for every limit, as a key seen for the first time has. */
export function fullBuckets(limits: readonly LimitSpec[], nowMs: number): BucketState[] {
  return limits.map((spec) => fullBucket(spec, nowMs));
}

/**
 * Takes `cost` from every bucket if all of them hold it, else from none, and decides: the
 * decision speaks of the limit core's `isTighter` picks (the request's own wait when denied).
 */
export function consumeAll(
  buckets: readonly BucketState[],
  limits: readonly LimitSpec[],
  cost: number,
  nowMs: number,
): Decision {
  let admit = true;
  for (let i = 0; i < limits.length; i++) {
    const bucket = buckets[i]!;
    advance(bucket, limits[i]!, nowMs);
    if (!covers(bucket.tokens, cost)) admit = false;
  }
  if (admit) for (let i = 0; i < limits.length; i++) tryTake(buckets[i]!, limits[i]!, cost, nowMs);
  return decide(buckets, limits, admit ? 1 : cost, admit, nowMs);
}

/** What a request of cost 1 would get now, taking nothing; `undefined` when every bucket is full. */
export function peekAll(
  buckets: readonly BucketState[],
  limits: readonly LimitSpec[],
  nowMs: number,
): Decision | undefined {
  let full = true;
  for (let i = 0; i < limits.length; i++) {
    const bucket = buckets[i]!;
    if (!covers(refilled(bucket.tokens, nowMs - bucket.updatedAtMs, limits[i]!), limits[i]!.capacity)) {
      full = false;
    }
  }
  return full ? undefined : decide(buckets, limits, 1, undefined, nowMs);
}

/**
 * The decision over `buckets` as they stand at `nowMs` for a request waiting on `cost` tokens:
 * `admitted` when the request was taken, `false` when refused, `undefined` for a peek (denied
 * when the tightest limit lacks the tokens).
 */
function decide(
  buckets: readonly BucketState[],
  limits: readonly LimitSpec[],
  cost: number,
  admitted: boolean | undefined,
  nowMs: number,
): Decision {
  let at = 0;
  let atWait = 0;
  let atRemaining = 0;
  let atFull = 0;
  for (let i = 0; i < limits.length; i++) {
    const spec = limits[i]!;
    const bucket = buckets[i]!;
    const tokens = refilled(bucket.tokens, nowMs - bucket.updatedAtMs, spec);
    const wait = msUntilTokens(tokens, cost, spec);
    const whole = wholeTokens(tokens);
    const fullIn = msUntilFull(tokens, spec);
    if (i === 0 || isTighter(wait, whole, fullIn, atWait, atRemaining, atFull)) {
      at = i;
      atWait = wait;
      atRemaining = whole;
      atFull = fullIn;
    }
  }
  const spec = limits[at]!;
  const allowed = admitted ?? atWait === 0;
  return allowed
    ? allowDecision(atRemaining, atFull, spec, 'local')
    : denyDecision(atWait, atRemaining, atFull, spec, 'local');
}

/** Whether every bucket of an entry would be full at `nowMs`: the entry can then be forgotten. */
export function allFull(stored: Buckets, limits: readonly LimitSpec[], nowMs: number): boolean {
  const buckets = listOf(stored);
  for (let i = 0; i < buckets.length; i++) {
    if (!isFullAt(buckets[i]!, limits[i]!, nowMs)) return false;
  }
  return true;
}

/**
 * Adds `tokens` to every bucket (`reward`, never past its capacity) or, negative, takes them
 * regardless (`penalty`): a bucket may go into debt, at most its capacity deep, as the shared
 * stores allow; one already deeper (its capacity lowered since) stays where it is, as there.
 */
export function addTokens(
  buckets: readonly BucketState[],
  limits: readonly LimitSpec[],
  tokens: number,
  nowMs: number,
): void {
  for (let i = 0; i < limits.length; i++) {
    const spec = limits[i]!;
    const bucket = buckets[i]!;
    advance(bucket, spec, nowMs);
    const next = bucket.tokens + tokens;
    if (next > spec.capacity) bucket.tokens = spec.capacity;
    else if (next >= -spec.capacity || tokens > 0) bucket.tokens = next;
    else if (bucket.tokens > -spec.capacity) bucket.tokens = -spec.capacity;
  }
}

/**
 * A key's buckets under new limits: a limit of the same name keeps its tokens (refilled to now
 * under the old rate, then cut to the new capacity), a new name starts full, as a store keyed by
 * limit name does. A bucket already full is no bucket, as for a store that forgot it: full to the
 * new capacity. Kept at the old one, a raised capacity gave a key idle for an hour half the burst
 * of a new key, or the whole of it if a `peek` or `size` had dropped the key first.
 */
function carryOver(
  buckets: readonly BucketState[],
  from: readonly LimitSpec[],
  to: readonly LimitSpec[],
  nowMs: number,
): BucketState[] {
  return to.map((spec) => {
    const i = from.findIndex((old) => old.name === spec.name);
    if (i === -1) return fullBucket(spec, nowMs);
    const bucket = buckets[i]!;
    const tokens = refilled(bucket.tokens, nowMs - bucket.updatedAtMs, from[i]!);
    if (covers(tokens, from[i]!.capacity)) return fullBucket(spec, nowMs);
    // A debt is kept whole, as the stores keep it: cut to the new capacity, a penalty of 10 on a
    // bucket of 10 was half forgiven by a capacity of 5, and the key admitted 5 tokens' time early.
    const cut = tokens > spec.capacity ? spec.capacity : tokens;
    return { tokens: cut, updatedAtMs: nowMs > bucket.updatedAtMs ? nowMs : bucket.updatedAtMs };
  });
}

/** `carryOver` for every key of `table`, oldest first, so that setting each again keeps the LRU order. */
export function carryTable(
  table: LRUCache<string, Buckets>,
  from: readonly LimitSpec[],
  to: readonly LimitSpec[],
  nowMs: number,
): void {
  for (const key of [...table.rkeys()]) {
    table.set(key, entryOf(carryOver(listOf(table.peek(key)!), from, to, nowMs)));
  }
}

/** Forgets every key of `table` whose buckets have all refilled; returns how many keys are left. */
export function dropFull(
  table: LRUCache<string, Buckets>,
  limits: readonly LimitSpec[],
  nowMs: number,
): number {
  const full: string[] = [];
  for (const [key, stored] of table.entries()) if (allFull(stored, limits, nowMs)) full.push(key);
  // Deleting while lru-cache iterates would unlink the entry the iterator stands on.
  for (const key of full) table.delete(key);
  return table.size;
}
