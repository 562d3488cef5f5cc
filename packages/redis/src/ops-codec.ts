import type { BucketOp, BucketReply } from '@tiered-limiter/core';
import { StoreError } from '@tiered-limiter/core';

/** Integers `apply.lua` replies per op, but a short take's (`isShortTake`). */
export const REPLY_WIDTH = 7;

/** An op on its way: what it asks and its Redis keys. */
export interface EncodableOp {
  readonly op: BucketOp;
  readonly keys: readonly string[];
  /** Set instead of a bucket op: register `instance` in the fleet set `keys[0]` for `ttlMs`. */
  readonly heartbeat?: { readonly instance: string; readonly ttlMs: number } | undefined;
  /** Set instead of the op's fields: the key's buckets become full, their leases fenced off (`reset`). */
  readonly reset?: true | undefined;
}

/** Which optional fields an entry carries, in this order after its flags (`apply.lua` reads the same bits). */
const FLAG = { take: 1, reserve: 2, credit: 4, debit: 8, ahead: 16, reports: 32, reset: 64 } as const;

/**
 * Whether `op` is a take of 1 on one limit and nothing else: every `RequestLimiter` decision at
 * cost 1, and a sparse key's first take. `apply.lua` takes it as one number, `-set`, and answers
 * it in 2 or 3 integers rather than 7 (its header says how): each number cost Redis a fiftieth of
 * the take's server time to read and as much to write.
 */
function isShortTake(op: BucketOp): boolean {
  return (
    op.take === 1 &&
    op.limits.length === 1 &&
    !(op.reserve && op.reserve.want > 0) &&
    !op.credit &&
    !op.debit &&
    !op.aheadMs &&
    !(op.reports && op.reports.length > 0)
  );
}

/**
 * The arguments of one `apply.lua` call for `batch`: `numkeys, KEYS…`, then every number in the
 * layout the script's header gives as one JSON array (E, S, the ms a key is kept once its bucket
 * is full, S limit sets of N capacity/rate pairs shared by the entries, then per op its set and
 * flags and only the fields the flags name; or set 0, instance, ttlMs for a heartbeat), then the
 * heartbeats' instances. One argument, not one per number: ioredis spent about 0.35 µs writing
 * each numeric argument, and Redis more making each a Lua string than `cjson.decode` takes to
 * read them all (a call of 30 ops carries 170).
 */
export function encodeOps(batch: readonly EncodableOp[], keepAfterFullMs: number): (string | number)[] {
  let numKeys = 0;
  for (const { keys } of batch) numKeys += keys.length;
  const args: (string | number)[] = [numKeys];
  for (const { keys } of batch) for (const key of keys) args.push(key);
  // The ops of one limiter share its limits array: a set is sent once per call.
  const sets = new Map<BucketOp['limits'], number>();
  // Written as text as it is read: an array of the entries' numbers, copied into another and
  // joined, was a tenth of a sync op's garbage. A number prints the same in a template as in `join`.
  let entries = '';
  const instances: string[] = [];
  for (const { op, heartbeat, reset } of batch) {
    if (heartbeat !== undefined) {
      instances.push(heartbeat.instance);
      entries += `,0,${instances.length},${heartbeat.ttlMs}`;
      continue;
    }
    let set = sets.get(op.limits);
    if (set === undefined) {
      set = sets.size + 1;
      sets.set(op.limits, set);
    }
    if (reset) {
      entries += `,${set},${FLAG.reset}`;
      continue;
    }
    const { take, reserve, credit, debit, aheadMs, reports } = op;
    const flags =
      (take ? FLAG.take : 0) |
      (reserve && reserve.want > 0 ? FLAG.reserve : 0) |
      (credit ? FLAG.credit : 0) |
      (debit ? FLAG.debit : 0) |
      (aheadMs ? FLAG.ahead : 0) |
      (reports && reports.length > 0 ? FLAG.reports : 0);
    if (isShortTake(op)) {
      entries += `,${-set}`;
      continue;
    }
    entries += `,${set},${flags}`;
    if (flags & FLAG.take) entries += `,${take}`;
    if (flags & FLAG.reserve) entries += `,${reserve!.want},${reserve!.min},${reserve!.holdMs}`;
    if (flags & FLAG.credit) entries += `,${credit}`;
    if (flags & FLAG.debit) entries += `,${debit}`;
    if (flags & FLAG.ahead) entries += `,${aheadMs}`;
    if (flags & FLAG.reports) {
      entries += `,${reports!.length}`;
      for (const r of reports!) entries += `,${r.generation},${r.spent},${r.returned}`;
    }
  }
  let numbers = `[${batch.length},${sets.size},${keepAfterFullMs}`;
  for (const limits of sets.keys()) {
    numbers += `,${limits.length}`;
    for (const spec of limits) numbers += `,${spec.capacity},${spec.refillPerSecond}`;
  }
  // Every number is finite (core validates limits and costs), so each prints as valid JSON.
  args.push(`${numbers}${entries}]`);
  for (const instance of instances) args.push(instance);
  return args;
}

/**
 * The replies of one `apply.lua` call, one per op of `batch`. ioredis gives numbers, or strings
 * with its `stringNumbers` option; anything else means a key was not ours (a wrong type) or the
 * script is not ours.
 */
export function readReplies(reply: unknown, batch: readonly EncodableOp[]): BucketReply[] {
  if (!Array.isArray(reply)) throw unexpected(reply);
  // Read in place, a pass over the reply: a mapped copy of it and a check of the copy made two
  // arrays a call for nothing.
  const replies = new Array<BucketReply>(batch.length);
  let at = 0;
  for (let i = 0; i < batch.length; i++) {
    const { op, heartbeat, reset } = batch[i]!;
    if (heartbeat === undefined && !reset && isShortTake(op)) {
      // remaining + 1 and resetMs when admitted; -remaining, retryAfterMs and resetMs when not
      const first = integerAt(reply, at);
      const ok = first >= 1;
      replies[i] = {
        ok,
        granted: ok ? 1 : 0,
        generation: 0,
        remaining: ok ? first - 1 : first < 0 ? -first : 0,
        retryAfterMs: ok ? 0 : integerAt(reply, at + 1),
        resetMs: integerAt(reply, ok ? at + 1 : at + 2),
        limitIndex: 0,
      };
      at += ok ? 2 : 3;
      continue;
    }
    replies[i] = {
      ok: integerAt(reply, at) === 1,
      granted: integerAt(reply, at + 1),
      generation: integerAt(reply, at + 2),
      remaining: integerAt(reply, at + 3),
      retryAfterMs: integerAt(reply, at + 4),
      resetMs: integerAt(reply, at + 5),
      limitIndex: integerAt(reply, at + 6),
    };
    at += REPLY_WIDTH;
  }
  if (at !== reply.length) throw unexpected(reply);
  return replies;
}

/** The integer at `at` in `reply` (a string with ioredis' `stringNumbers`), or a throw for anything else. */
function integerAt(reply: unknown[], at: number): number {
  const value = reply[at];
  const n = typeof value === 'string' ? Number(value) : value;
  if (!Number.isInteger(n)) throw unexpected(reply);
  return n as number;
}

function unexpected(reply: unknown): StoreError {
  let text: string;
  try {
    text = JSON.stringify(reply) ?? String(reply);
  } catch {
    text = String(reply);
  }
  return new StoreError(
    `redis apply gave an unexpected reply: ${text.length > 120 ? `${text.slice(0, 120)}…` : text}`,
  );
}
