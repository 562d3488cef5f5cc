/** An op that waits for its slot's ops at another destination, and the destination it named. */
export interface ParkedOp<P> {
  readonly destination: string;
  readonly pending: P;
}

/** A slot's ops out: the destination they went to, how many, and the ops waiting for them. */
interface SlotState<P> {
  destination: string;
  /** Ops of the slot queued for `destination` or in a call to it, not yet answered. */
  outstanding: number;
  /** Later ops of the slot, named for another destination, in arrival order. */
  parked: ParkedOp<P>[] | undefined;
}

/**
 * Keeps each Cluster slot's ops in one destination at a time. The client names a slot's master
 * when each op is made; once the slot has moved and the client knows it, the slot's new ops wait
 * here until every op of it queued for the old master, or sent there and redirected, is answered,
 * and then go to the new master in the order they came. A look at a key sent to the new master at
 * once ran ahead of a charge still queued for the old one, or on its way there to be answered
 * MOVED: calls on one connection run in order, calls on two do not.
 */
export class SlotOrder<P> {
  /**
   * Every slot seen, at most 16,384 on a Cluster (one on a single server), kept when none of its
   * ops is out: dropped and made again, they cost about 60 ns an op on 1,000 slots.
   */
  readonly #slots = new Map<number, SlotState<P>>();

  /**
   * Whether `pending`, an op of `slot` named for `destination`, may be queued there now; if not,
   * it is kept, and `answered` hands it back once its slot's earlier ops are all answered.
   */
  admit(slot: number, destination: string, pending: P): boolean {
    const state = this.#slots.get(slot);
    if (state === undefined) {
      this.#slots.set(slot, { destination, outstanding: 1, parked: undefined });
      return true;
    }
    if (state.outstanding === 0) {
      // Nothing of the slot is out (so nothing kept either): it goes wherever it is named.
      state.destination = destination;
      state.outstanding = 1;
      return true;
    }
    if (state.parked === undefined && state.destination === destination) {
      state.outstanding++;
      return true;
    }
    if (state.parked === undefined) state.parked = [{ destination, pending }];
    else state.parked.push({ destination, pending });
    return false;
  }

  /**
   * `count` ops of `slot` were answered, or dropped unsent. Once none is out, the ops kept for
   * the slot, in arrival order, to be submitted again; else `undefined`.
   */
  answered(slot: number, count: number): readonly ParkedOp<P>[] | undefined {
    const state = this.#slots.get(slot)!;
    state.outstanding -= count;
    const { parked } = state;
    if (state.outstanding > 0 || parked === undefined) return undefined;
    state.parked = undefined;
    return parked;
  }
}
