import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { build, type Histogram } from 'hdr-histogram-js';

/**
 * One limiter seen through the loop: `sync` answers without a promise when it can (`undefined`
 * when it cannot), `async` always can. Both say whether the request was admitted.
 */
export interface Decider {
  readonly sync: ((key: string) => boolean | undefined) | undefined;
  readonly async: (key: string) => Promise<boolean>;
}

/** When a loop stops: whichever comes first. */
export interface LoopBounds {
  readonly maxDecisions: number;
  readonly maxMs: number;
}

/** What one loop measured. Latencies are in nanoseconds. */
export interface LoopResult {
  readonly decisions: number;
  readonly admitted: number;
  /** Decisions that had to await (`sync` gave no answer, or there is no `sync`). */
  readonly awaited: number;
  readonly elapsedMs: number;
  readonly latencyNs: Histogram;
}

/**
 * Decisions between two yields to the event loop. A server yields between requests; a loop
 * that never did would starve what the limiter does in the background (a lease refill's reply
 * is read from the socket only when the loop turns).
 */
export const DECISIONS_PER_YIELD = 128;

export function newHistogram(): Histogram {
  return build({
    bitBucketSize: 64,
    autoResize: true,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
  });
}

/**
 * Runs `inFlight` workers over `keys` (in turn, one shared cursor) until `bounds` stop them, and
 * times every decision:
 * - a decision that awaited is timed on its own, from the call to the resumed `await`, so a
 *   request's wait for a Redis reply (and for the other workers that ran meanwhile) is in it;
 * - decisions answered synchronously are timed as a group, between two yields, and each is
 *   recorded at the group's mean: a clock read around a 10 ns call would cost more than the call.
 */
export async function runLoop(
  decider: Decider,
  keys: readonly string[],
  inFlight: number,
  bounds: LoopBounds,
): Promise<LoopResult> {
  const histogram = newHistogram();
  const { sync, async } = decider;
  const keyCount = keys.length;
  let cursor = 0;
  let decisions = 0;
  let admitted = 0;
  let awaited = 0;
  const start = performance.now();
  const deadline = start + bounds.maxMs;

  async function worker(): Promise<void> {
    while (decisions < bounds.maxDecisions && performance.now() < deadline) {
      const groupStart = performance.now();
      let awaitedMs = 0;
      let awaitedHere = 0;
      for (let i = 0; i < DECISIONS_PER_YIELD; i++) {
        const key = keys[cursor]!;
        cursor = cursor + 1 === keyCount ? 0 : cursor + 1;
        let allowed = sync === undefined ? undefined : sync(key);
        if (allowed === undefined) {
          const before = performance.now();
          allowed = await async(key);
          const waited = performance.now() - before;
          awaitedMs += waited;
          awaitedHere++;
          histogram.recordValue(nanos(waited));
        }
        if (allowed) admitted++;
      }
      const syncHere = DECISIONS_PER_YIELD - awaitedHere;
      if (syncHere > 0) {
        const meanMs = (performance.now() - groupStart - awaitedMs) / syncHere;
        histogram.recordValueWithCount(nanos(meanMs), syncHere);
      }
      decisions += DECISIONS_PER_YIELD;
      awaited += awaitedHere;
      await yieldToLoop();
    }
  }

  await Promise.all(Array.from({ length: inFlight }, worker));
  return { decisions, admitted, awaited, elapsedMs: performance.now() - start, latencyNs: histogram };
}

function nanos(ms: number): number {
  const ns = Math.round(ms * 1e6);
  return ns > 1 ? ns : 1;
}
