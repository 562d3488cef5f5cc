import { type BucketOp, type BucketReply, StoreError, StoreReplyError } from '@tiered-limiter/core';
import { byNode } from './by-node.js';
import { asError, type RedisClientAdapter } from './client/adapter.js';
import { type EncodableOp, encodeOps, readReplies } from './ops-codec.js';
import type { Pending } from './pending-ops.js';
import { APPLY_SCRIPT } from './scripts.js';

/** An op waiting in the store's coalescer: a bucket op, or a heartbeat or reset entry. */
export type StoreOp = Pending<BucketOp, BucketReply> & Pick<EncodableOp, 'heartbeat' | 'reset'>;

/** Errors with which Redis refuses a call without running it: the slot is elsewhere or moving. */
const REDIRECTED = /^(MOVED|ASK|TRYAGAIN) /;

/** The error with which the script refuses a key whose value is not a bucket (`WRONGTYPE`). */
const KEY_REFUSED = /^WRONGTYPE /;

/**
 * An error Redis answered: its first word is an upper-case code (`OOM`, `NOPERM`, `BUSY`, `LOADING`,
 * `MISCONF`, `ERR` …). A client's own errors (a closed connection, no offline queue) never start so.
 */
const REPLY_CODE = /^([A-Z][A-Z0-9_]+)(?: |$)/;

/**
 * The coalescer's sender for a `RedisStore`: sends a flush's batches as `apply.lua` calls on
 * `client` and settles every op they carried, each exactly once, with its reply or a `StoreError`.
 * `countCalls` hears of round trips beyond the flush's one (a flush split over masters, a part
 * sent again alone after a redirection). Nothing that may have run is ever resent.
 */
export function applySender(
  client: RedisClientAdapter,
  keepAfterFullMs: number,
  countCalls: (extra: number) => void,
): (batches: readonly (readonly StoreOp[])[]) => Promise<void> {
  const call = (batches: readonly (readonly StoreOp[])[]) =>
    client.evalScript(
      APPLY_SCRIPT,
      batches.map((batch) => encodeOps(batch, keepAfterFullMs)),
    );

  async function sendPart(batches: readonly (readonly StoreOp[])[]): Promise<void> {
    let results: unknown[];
    try {
      results = repliesOf(await call(batches));
    } catch (error) {
      // One error for the call's ops: they failed together, and an error per op (a stack trace
      // each) took 5 % of a bench process's CPU when a closing limiter's hand-backs failed.
      rejectAll(batches, failure('apply', error));
      return;
    }
    await Promise.all(
      batches.map(async (batch, i) => {
        let reply = results[i];
        // A pipeline whose calls were redirected in part comes back with those calls failed.
        // Redis ran none of them, so each goes once more alone, where the client follows the
        // redirection itself (ASKING included).
        if (reply instanceof Error && REDIRECTED.test(reply.message) && batches.length > 1) {
          countCalls(1);
          // Called in a reaction: an adapter that throws rather than rejects fails these ops too.
          reply = await Promise.resolve()
            .then(() => call([batch]))
            .then((r) => repliesOf(r)[0])
            .catch(asError);
        }
        if (reply instanceof Error && KEY_REFUSED.test(reply.message)) return sendByKey(batch, reply);
        if (reply instanceof Error) rejectAll([batch], failure('apply', reply));
        else settle(batch, reply);
      }),
    );
  }

  /**
   * A call the script refused for one of its keys (`WRONGTYPE`: a value that is not a bucket) failed
   * every op it carried, and one such key in a busy limiter's calls failed the ops of other keys
   * beside it and opened the breaker for all of them. The script reads every key before it writes
   * any bucket, so those ops ran nothing (a heartbeat before the key may have renewed its
   * registration, which a second time only renews again): each key's ops go once more as a call
   * of their own, in order, and only the refused key's fail.
   */
  async function sendByKey(batch: readonly StoreOp[], refusal: Error): Promise<void> {
    const groups = byUserKey(batch);
    if (groups.length === 1) {
      rejectAll([batch], failure('apply', refusal));
      return;
    }
    countCalls(groups.length);
    await Promise.all(
      groups.map(async (group) => {
        const reply = await Promise.resolve()
          .then(() => call([group]))
          .then((r) => repliesOf(r)[0])
          .catch(asError);
        if (reply instanceof Error) rejectAll([group], failure('apply', reply));
        else settle(group, reply);
      }),
    );
  }

  // One call, or, when the client now maps the batches' slots to several masters (a slot moved
  // since its ops were queued), one call per master, each counted. Sent as one, ioredis refused
  // the pipeline unsent and node-redis sent each slot to its master: two round trips, counted one.
  return (batches) => {
    let parts: (readonly StoreOp[])[][] | undefined;
    try {
      parts =
        client.isCluster && batches.length > 1 ? byNode(batches, (slot) => client.nodeOf(slot)) : undefined;
    } catch (error) {
      // An adapter's `nodeOf` that threw here threw out of the coalescer's flush: an uncaught
      // exception in a tick, and the destination's call counted out for good, its ops unsettled.
      rejectAll(batches, failure('apply', error));
      return Promise.resolve();
    }
    if (parts === undefined) return sendPart(batches);
    countCalls(parts.length - 1);
    return Promise.all(parts.map(sendPart)).then(() => undefined);
  };
}

/** `batch`'s ops by user key, each key's in their order; a heartbeat entry alone. */
function byUserKey(batch: readonly StoreOp[]): StoreOp[][] {
  const groups = new Map<unknown, StoreOp[]>();
  for (const pending of batch) {
    const key = pending.heartbeat === undefined ? pending.op.key : pending;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [pending]);
    else group.push(pending);
  }
  return [...groups.values()];
}

function rejectAll(batches: readonly (readonly StoreOp[])[], error: StoreError): void {
  for (const batch of batches) for (const pending of batch) pending.reject(error);
}

function settle(batch: readonly StoreOp[], reply: unknown): void {
  let replies: BucketReply[];
  try {
    replies = readReplies(reply, batch);
  } catch (error) {
    for (const pending of batch) pending.reject(error);
    return;
  }
  for (let i = 0; i < batch.length; i++) batch[i]!.resolve(replies[i]!);
}

/**
 * What an adapter's `evalScript` resolved, if it is an array (one reply per call). `undefined` from a
 * custom adapter threw a `TypeError` past the flush, and its ops were never settled: each waited out
 * its caller's timeout, and a background op (a hand-back) waited for ever.
 */
function repliesOf(results: unknown): unknown[] {
  if (!Array.isArray(results))
    throw new Error(`the client adapter's evalScript resolved ${String(results)}, not an array`);
  return results;
}

/**
 * The `StoreError` of a failed call: a `StoreReplyError` naming the code when Redis answered with
 * an error, so that a `failure` listener tells a full server (`OOM`) or a refused ACL (`NOPERM`)
 * from one that did not answer without reading the message.
 */
function failure(command: string, error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const message = `redis ${command} failed: ${error instanceof Error ? error.message : String(error)}`;
  const reply = error instanceof Error ? REPLY_CODE.exec(error.message)?.[1] : undefined;
  return reply === undefined
    ? new StoreError(message, { cause: error })
    : new StoreReplyError(reply, message, { cause: error });
}
