/** How often the stall watch's timer is due. */
const TICK_MS = 5;
/** Lateness below this is the timer's own jitter, not a stall. */
const JITTER_MS = 1;

/** A span of time, in `performance.now()` ms, and what it was, for a message. */
export interface Span {
  readonly fromMs: number;
  readonly toMs: number;
}

/**
 * Stalls of this process's event loop, as the spells a timer due every `TICK_MS` waited past its
 * time. A stall is judged once it is over: a decision answered in the same turn of the loop as the
 * end of a long stall (the poll phase that read a hundred replies, say) ends before the watch's
 * next tick has seen that stall, so a span is weighed only after `settle()`, not as it ends. Kept
 * apart from the guard's own `StallLog`: what a test checks the limiter by is not the limiter's.
 */
export class LoopStalls {
  /** Disjoint spells, oldest first: [from, to], when the tick was due and when it ran. */
  readonly #spells: [number, number][] = [];
  #last = performance.now();
  readonly #timer = setInterval(() => {
    const now = performance.now();
    const dueAt = this.#last + TICK_MS;
    this.#last = now;
    if (now - dueAt > JITTER_MS) this.#spells.push([dueAt, now]);
  }, TICK_MS);

  /** The ms of `span` the loop spent stalled (its overlap with every spell seen). */
  during(span: Span): number {
    const spells = this.#spells;
    // The first spell that ends at or after the span begins.
    let lo = 0;
    let hi = spells.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (spells[mid]![1] < span.fromMs) lo = mid + 1;
      else hi = mid;
    }
    let total = 0;
    for (let i = lo; i < spells.length && spells[i]![0] < span.toMs; i++) {
      const [from, to] = spells[i]!;
      total += Math.min(to, span.toMs) - Math.max(from, span.fromMs);
    }
    return total;
  }

  /** Waits for the ticks that see a stall the last span ended in, then stops the watch. */
  async settle(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 2 * TICK_MS));
    clearInterval(this.#timer);
  }

  /** Stops the watch at once (a soak that failed). */
  stop(): void {
    clearInterval(this.#timer);
  }
}
