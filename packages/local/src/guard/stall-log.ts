/** How many separate stalls the log keeps: a request's budget looks back one timeout or so. */
const KEPT = 32;

/**
 * The spells (in `performance.now()` ms) during which this process's event loop was seen stalled:
 * a timer due at one moment ran at a later one. Overlapping spells, as the timers of many calls
 * caught by one stall report, merge into one, so that a stall counts once however many saw it.
 */
export class StallLog {
  /** Disjoint spells, oldest first: [from, to] pairs. */
  readonly #spells: [number, number][] = [];

  /** Records that the loop was stalled from `fromMs` to `toMs`. */
  record(fromMs: number, toMs: number): void {
    const last = this.#spells.at(-1);
    if (last !== undefined && fromMs <= last[1]) {
      last[0] = Math.min(last[0], fromMs);
      last[1] = Math.max(last[1], toMs);
      return;
    }
    this.#spells.push([fromMs, toMs]);
    if (this.#spells.length > KEPT) this.#spells.shift();
  }

  /**
   * When a budget of `budgetMs` begun at `startedAtMs` runs out, given the stalls seen since: each
   * lengthens it by as long as it lasted, as the stall was not the store's. And a stall leaves at
   * least as long again after it (up to `budgetMs`), for the answers that waited in the socket to
   * be read and one more call to be made: the timer saw the stall only from when it was due, so it
   * may have begun that much earlier (a 200 ms stall seen by a 20 ms timer reads 180 ms late).
   */
  deadline(startedAtMs: number, budgetMs: number): number {
    let stalledMs = 0;
    let afterStallMs = Number.NEGATIVE_INFINITY;
    for (let i = this.#spells.length - 1; i >= 0; i--) {
      const [from, to] = this.#spells[i] as [number, number];
      if (to <= startedAtMs) break;
      const lastedMs = to - Math.max(from, startedAtMs);
      stalledMs += lastedMs;
      afterStallMs = Math.max(afterStallMs, to + Math.min(budgetMs, lastedMs));
    }
    return Math.max(startedAtMs + budgetMs + stalledMs, afterStallMs);
  }
}
