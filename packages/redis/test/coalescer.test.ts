/**
 * The coalescer's scheduling on its own, over a transport the test answers by hand: which ops
 * leave in which call, and how many calls are out at once. `redis-store.test.ts` runs the same
 * queues against a real server.
 */
import { StoreWithdrawnError } from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';
import { Coalescer } from '../src/coalescer.js';

/** A call the transport has sent and not yet answered: its ops, and a way to answer it. */
interface OpenCall {
  readonly ops: readonly string[];
  answer(): void;
}

/** A coalescer of calls of `maxKeys` one-key ops, `maxInFlight` at once, whose calls wait in `open`. */
function coalescerOf(maxKeys: number, maxInFlight: number) {
  const open: OpenCall[] = [];
  const sent: string[][] = [];
  const coalescer = new Coalescer<string, string>(
    (batches) =>
      new Promise<void>((resolve) => {
        const pending = batches.flat();
        const ops = pending.map((p) => p.op);
        sent.push(ops);
        open.push({
          ops,
          answer: () => {
            for (const p of pending) p.resolve(p.op);
            resolve();
          },
        });
      }),
    maxKeys,
    maxInFlight,
  );
  /** Queues `op` on the bucket key `key` (its own name unless given); `keyOrdered` for a charge. */
  const submit = (
    op: string,
    background: boolean,
    wait?: { gaveUp: boolean },
    key = op,
    keyOrdered = false,
  ) =>
    new Promise<string>((resolve, reject) =>
      coalescer.submit('server', { op, keys: [key], slot: 0, background, keyOrdered, wait, resolve, reject }),
    );
  /** Answers the open call that carries `op`, and lets the coalescer send what follows. */
  const answer = async (op: string) => {
    const index = open.findIndex((call) => call.ops.includes(op));
    const [call] = open.splice(index, 1);
    call!.answer();
    await turn();
  };
  return { submit, answer, sent, open, coalescer };
}

/** One turn of the event loop: the coalescer flushes at the end of the turn its ops came in. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('Coalescer', () => {
  it('sends one call of background ops alone while every slot is taken, and never a second', async () => {
    const { submit, answer, sent, open } = coalescerOf(4, 1);
    const waited = Array.from({ length: 8 }, (_, i) => submit(`w${i}`, false));
    const background = Array.from({ length: 8 }, (_, i) => submit(`b${i}`, true));
    await turn();
    // The slot's call: waited ops first, a quarter kept for background ones. Beside it, background ops alone.
    expect(sent).toEqual([
      ['w0', 'w1', 'w2', 'b0'],
      ['b1', 'b2', 'b3', 'b4'],
    ]);
    // The background call answered: the next one of background ops takes its place, not a waited op's.
    await answer('b1');
    expect(sent[2]).toEqual(['b5', 'b6', 'b7']);
    expect(open).toHaveLength(2);
    // The slot freed: waited ops fill it (no background op is left to keep a quarter for).
    await answer('w0');
    expect(sent[3]).toEqual(['w3', 'w4', 'w5', 'w6']);
    await answer('b5');
    await answer('w3');
    expect(sent[4]).toEqual(['w7']);
    await answer('w7');
    expect(await Promise.all([...waited, ...background])).toHaveLength(16);
    expect(sent.flat().sort()).toEqual([
      ...Array.from({ length: 8 }, (_, i) => `b${i}`),
      ...Array.from({ length: 8 }, (_, i) => `w${i}`),
    ]);
  });

  it('sends no call of its own for background ops while a slot is free', async () => {
    const { submit, sent } = coalescerOf(4, 2);
    for (let i = 0; i < 6; i++) void submit(`b${i}`, true);
    for (let i = 0; i < 2; i++) void submit(`w${i}`, false);
    await turn();
    // Two slots: both calls are regular ones, waited ops leading; nothing rides beside them yet.
    expect(sent).toEqual([
      ['w0', 'w1', 'b0', 'b1'],
      ['b2', 'b3', 'b4', 'b5'],
    ]);
  });

  it('drops an op its caller gave up on while it was queued, and sends the rest', async () => {
    const { submit, answer, sent, coalescer } = coalescerOf(4, 1);
    const first = submit('w0', false);
    await turn();
    // Queued behind the one call out: two callers give up (their guard timed out), one waits on.
    const gone = { gaveUp: false };
    const alsoGone = { gaveUp: false };
    const dropped = submit('w1', false, gone);
    const droppedToo = submit('w3', false, alsoGone);
    const kept = submit('w2', false, { gaveUp: false });
    const droppedOutcomes = Promise.allSettled([dropped, droppedToo]);
    await turn();
    gone.gaveUp = true;
    alsoGone.gaveUp = true;
    await answer('w0');
    // Sent, a reply would have counted tokens after the caller's failure policy decided.
    expect(sent).toEqual([['w0'], ['w2']]);
    for (const outcome of await droppedOutcomes) {
      expect(outcome).toMatchObject({ status: 'rejected', reason: expect.any(StoreWithdrawnError) });
    }
    await answer('w2');
    expect(await Promise.all([first, kept])).toEqual(['w0', 'w2']);
    expect(coalescer.stats()).toMatchObject({ calls: 2, ops: 2, withdrawn: 2 });
  });

  it('never lets an op leave ahead of a queued charge of its key: it takes them along', async () => {
    const { submit, answer, sent, open, coalescer } = coalescerOf(4, 1);
    const replies = [submit('w0', false)];
    await turn();
    replies.push(submit('b0', true));
    await turn();
    // The slot and the background call are out. Queued behind them: an optimistic charge on key
    // `k` and other background ops, then a look at `k` that a request waits on.
    expect(sent).toEqual([['w0'], ['b0']]);
    // A hand-back on `k` may be overtaken (a take before it sees fewer tokens, never more).
    replies.push(submit('b1', true), submit('charge', true, undefined, 'k', true), submit('b2', true));
    replies.push(submit('hand-back', true, undefined, 'k'));
    replies.push(submit('look', false, undefined, 'k'), submit('w1', false));
    await turn();
    await answer('w0');
    // The look leads the call, its key's charge just ahead of it; the quarter kept for background
    // ops goes to the oldest of the rest.
    expect(sent[2]).toEqual(['charge', 'look', 'w1', 'b1']);
    // The charge left once: the background queue skips it.
    await answer('b0');
    expect(sent[3]).toEqual(['b2', 'hand-back']);
    await answer('b2');
    await answer('charge');
    expect(open).toHaveLength(0);
    expect(await Promise.all(replies)).toHaveLength(8);
    expect(sent.flat().sort()).toEqual(['b0', 'b1', 'b2', 'charge', 'hand-back', 'look', 'w0', 'w1']);
    expect(coalescer.stats()).toMatchObject({ calls: 4, ops: 8 });
  });

  it('holds an op whose slot’s earlier ops went to another destination until they are answered', async () => {
    const sent: string[][] = [];
    const open = new Map<string, () => void>();
    const coalescer = new Coalescer<string, string>(
      (batches) =>
        new Promise<void>((resolve) => {
          const pending = batches.flat();
          sent.push(pending.map((p) => p.op));
          open.set(pending[0]!.op, () => {
            for (const p of pending) p.resolve(p.op);
            resolve();
          });
        }),
      4,
      1,
    );
    const submit = (op: string, destination: string, slot: number, background = false) =>
      new Promise<string>((resolve, reject) =>
        coalescer.submit(destination, {
          op,
          keys: [`k${slot}`],
          slot,
          background,
          keyOrdered: background && op === 'charge',
          resolve,
          reject,
        }),
      );
    const answer = async (op: string) => {
      open.get(op)!();
      await turn();
    };
    const replies = [submit('w0', 'old', 1)];
    await turn();
    replies.push(submit('b0', 'old', 2, true));
    await turn();
    // Both of the old master's calls out; a charge on slot 7 waits for them. Then the client maps
    // slot 7 to the new master: a look at the same key names it.
    replies.push(submit('charge', 'old', 7, true));
    await turn();
    replies.push(submit('look', 'new', 7), submit('other', 'new', 8));
    await turn();
    expect(sent).toEqual([['w0'], ['b0'], ['other']]);
    await answer('other');
    // The charge leaves for the old master; the look still waits, for its answer.
    await answer('w0');
    expect(sent.slice(3)).toEqual([['charge']]);
    await answer('charge');
    expect(sent.slice(4)).toEqual([['look']]);
    // Slot 7 is the new master's now: its next op goes there beside the look's call.
    replies.push(submit('later', 'new', 7), submit('w1', 'old', 1));
    await turn();
    await answer('look');
    expect(sent.slice(5)).toEqual([['w1'], ['later']]);
    for (const op of ['b0', 'w1', 'later']) await answer(op);
    expect(await Promise.all(replies)).toEqual(['w0', 'b0', 'charge', 'look', 'other', 'later', 'w1']);
  });

  it('sends an op given up on once it has left: a call on the wire is not called back', async () => {
    const { submit, answer, sent } = coalescerOf(4, 1);
    const wait = { gaveUp: false };
    const reply = submit('w0', false, wait);
    await turn();
    wait.gaveUp = true;
    await answer('w0');
    expect(sent).toEqual([['w0']]);
    expect(await reply).toBe('w0');
  });
});
