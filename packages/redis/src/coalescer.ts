import { StoreWithdrawnError } from '@tiered-limiter/core';
import Queue from 'yocto-queue';
import type { Destination, Pending, Send } from './pending-ops.js';
import { SlotOrder } from './slot-order.js';

/** Counters of a coalescer since it was made. */
export interface CoalescerStats {
  /** Round trips sent. */
  readonly calls: number;
  /** Ops carried by them. */
  readonly ops: number;
  /** Bucket keys carried by them (an op carries one per limit). */
  readonly keys: number;
  /** Ops dropped unsent: their caller's deadline passed while they were queued. */
  readonly withdrawn: number;
}

/**
 * A queue per destination with self-clocked flushing. Ops submitted in one turn of the event
 * loop leave together at the end of it (once its promise jobs have run, no timer); while
 * `maxInFlight` calls are out, later ops wait for a reply and then leave together, up to
 * `maxKeysPerCall` keys a call. So a lone request pays no added latency, and a burst (a periodic
 * sync, many requests in flight) costs a few calls instead of one per op. Ops that requests wait
 * on lead each call, ahead of background ops queued before them, except their own key's charges
 * (`keyOrdered`), which go along just ahead of them; a quarter of the call stays for background
 * ops, and while every slot is taken one call of background ops alone leaves beside them, so that
 * a stream of requests never starves the sync that keeps their leases.
 */
export class Coalescer<Op, Reply> {
  readonly #send: Send<Op, Reply>;
  readonly #maxKeys: number;
  readonly #maxInFlight: number;
  readonly #destinations = new Map<string, Destination<Op, Reply>>();
  readonly #due = new Set<string>();
  readonly #slotOrder = new SlotOrder<Pending<Op, Reply>>();
  #scheduled = false;
  #calls = 0;
  #ops = 0;
  #keys = 0;
  #withdrawn = 0;

  constructor(send: Send<Op, Reply>, maxKeysPerCall: number, maxInFlight: number) {
    this.#send = send;
    this.#maxKeys = maxKeysPerCall;
    this.#maxInFlight = maxInFlight;
  }

  /**
   * Queues `pending` for `destination`; it leaves at the end of this tick at the latest. Unless its
   * slot's earlier ops went to another destination and are not all answered (the slot moved): then
   * it waits for them, and goes once they are (`SlotOrder`).
   */
  submit(destination: string, pending: Pending<Op, Reply>): void {
    if (!this.#slotOrder.admit(pending.slot, destination, pending)) return;
    let queue = this.#destinations.get(destination);
    if (queue === undefined) {
      queue = {
        waited: new Queue(),
        background: new Queue(),
        inFlight: 0,
        backgroundCallOut: false,
        backgroundByKey: new Map(),
        sentAhead: new Set(),
      };
      this.#destinations.set(destination, queue);
    }
    if (pending.background) {
      queue.background.enqueue(pending);
      const key = pending.keys[0];
      if (pending.keyOrdered === true && key !== undefined) {
        const sameKey = queue.backgroundByKey.get(key);
        if (sameKey === undefined) queue.backgroundByKey.set(key, [pending]);
        else sameKey.push(pending);
      }
    } else {
      queue.waited.enqueue(pending);
    }
    this.#due.add(destination);
    if (!this.#scheduled) {
      this.#scheduled = true;
      // Once every promise job of this turn has run, not at the next one: a sync's ops and its
      // heartbeat reach here a few promise hops apart (the guard, the concurrency queue), and a
      // flush between them cost a sync three calls instead of one. A tick queued from a promise
      // job runs when the job queue is empty, still in this turn of the event loop.
      queueMicrotask(() => process.nextTick(() => this.#flushDue()));
    }
  }

  /** Most bucket keys one call carries. */
  get maxKeysPerCall(): number {
    return this.#maxKeys;
  }

  /**
   * `count` more round trips than the one a flush counted: its send went to more than one node (a
   * slot moved since its ops were queued), or sent a part again alone.
   */
  countCalls(count: number): void {
    this.#calls += count;
  }

  /** Counters since the coalescer was made. */
  stats(): CoalescerStats {
    return { calls: this.#calls, ops: this.#ops, keys: this.#keys, withdrawn: this.#withdrawn };
  }

  /**
   * Moves waited ops from the head of the queue to `taken` while the call's keys stay within
   * `budget` (a call's first op goes whatever its keys); returns the call's keys. `keyOrdered` ops
   * of an op's key that are queued go along, ahead of it: a look sent after an optimistic charge
   * was queued read the bucket without it whenever a saturated coalescer let the look lead the call.
   * An op its caller gave up on is dropped on the way: sent now, its tokens would count after the
   * caller's failure policy decided the request (a `local` fallback's admission charged to the
   * global bucket too), and a hand-back kept owing would be sent twice.
   */
  #takeWaited(
    destination: Destination<Op, Reply>,
    taken: Pending<Op, Reply>[],
    keys: number,
    budget: number,
  ): number {
    const { waited, backgroundByKey, sentAhead } = destination;
    let total = keys;
    for (let next = waited.peek(); next !== undefined; next = waited.peek()) {
      if (next.wait?.gaveUp === true) {
        waited.dequeue();
        this.#withdrawn++;
        next.reject(new StoreWithdrawnError());
        this.#answered(next.slot, 1);
        continue;
      }
      const key = next.keys[0];
      const ahead = backgroundByKey.size > 0 && key !== undefined ? backgroundByKey.get(key) : undefined;
      let needed = next.keys.length;
      if (ahead !== undefined) for (const op of ahead) needed += op.keys.length;
      if (taken.length > 0 && total + needed > budget) break;
      total += needed;
      if (ahead !== undefined) {
        backgroundByKey.delete(key!);
        for (const op of ahead) {
          sentAhead.add(op);
          taken.push(op);
        }
      }
      taken.push(waited.dequeue()!);
    }
    return total;
  }

  /** Moves background ops from the head of the queue to `taken`, as `#takeWaited` does. */
  #takeBackground(
    destination: Destination<Op, Reply>,
    taken: Pending<Op, Reply>[],
    keys: number,
    budget: number,
  ): number {
    const { background, backgroundByKey, sentAhead } = destination;
    let total = keys;
    for (let next = background.peek(); next !== undefined; next = background.peek()) {
      if (sentAhead.size > 0 && sentAhead.delete(next)) {
        background.dequeue();
        continue;
      }
      if (taken.length > 0 && total + next.keys.length > budget) break;
      total += next.keys.length;
      taken.push(background.dequeue()!);
      if (next.keyOrdered !== true) continue;
      // The queue and its key's list are both in arrival order, so this op heads its list.
      const key = next.keys[0];
      const sameKey = key === undefined ? undefined : backgroundByKey.get(key);
      if (sameKey !== undefined) {
        sameKey.shift();
        if (sameKey.length === 0) backgroundByKey.delete(key!);
      }
    }
    return total;
  }

  /** `count` ops of `slot` are answered: once none is out, its ops kept for another destination go. */
  #answered(slot: number, count: number): void {
    const parked = this.#slotOrder.answered(slot, count);
    if (parked !== undefined)
      for (const { destination, pending } of parked) this.submit(destination, pending);
  }

  #flushDue(): void {
    this.#scheduled = false;
    for (const destination of this.#due) this.#flush(destination);
    this.#due.clear();
  }

  #flush(name: string): void {
    const destination = this.#destinations.get(name);
    if (destination === undefined) return;
    const { waited, background } = destination;
    for (;;) {
      // With every slot taken, background ops may have one call of their own out beside them: a
      // quarter of each call was all a sync round got while requests kept the slots full, and at
      // 256 requests in flight on 100,000 Zipf keys a round took 9.6 s against its 5 s period, so
      // grants ran dry before their next sync and the refills that cost filled the calls.
      let backgroundOnly = false;
      const slotsTaken = destination.inFlight - (destination.backgroundCallOut ? 1 : 0);
      if (slotsTaken >= this.#maxInFlight || waited.size + background.size === 0) {
        if (destination.backgroundCallOut || background.size === 0) break;
        backgroundOnly = true;
      }
      // While a sync round queued a thousand ops, a request's refill behind them waited for 30
      // calls: its p99 was 19 ms, against 10 ms when it leads (100,000 keys, 64 in flight).
      const taken: Pending<Op, Reply>[] = [];
      const reserved = background.size > 0 ? Math.floor(this.#maxKeys / 4) : 0;
      let keys = backgroundOnly ? 0 : this.#takeWaited(destination, taken, 0, this.#maxKeys - reserved);
      keys = this.#takeBackground(destination, taken, keys, this.#maxKeys);
      if (!backgroundOnly) keys = this.#takeWaited(destination, taken, keys, this.#maxKeys);
      // Every op at the head had been given up on: nothing to send, see what is left.
      if (taken.length === 0) continue;
      const bySlot = new Map<number, Pending<Op, Reply>[]>();
      for (const pending of taken) {
        const batch = bySlot.get(pending.slot);
        if (batch === undefined) bySlot.set(pending.slot, [pending]);
        else batch.push(pending);
      }
      this.#calls++;
      this.#ops += taken.length;
      this.#keys += keys;
      destination.inFlight++;
      if (backgroundOnly) destination.backgroundCallOut = true;
      const done = () => {
        destination.inFlight--;
        if (backgroundOnly) destination.backgroundCallOut = false;
        // By key: `[slot, batch]` entries cost 100 ns an op on 1,000 slots (a 10,000-op tick).
        for (const slot of bySlot.keys()) this.#answered(slot, bySlot.get(slot)!.length);
        if (waited.size + background.size > 0) this.#flush(name);
        else if (destination.inFlight === 0) this.#destinations.delete(name);
      };
      this.#send([...bySlot.values()]).then(done, done);
    }
  }
}
