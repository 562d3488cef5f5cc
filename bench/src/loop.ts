import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { build, type Histogram } from 'hdr-histogram-js';

/**
 * What one decision came to, as an index into `LoopResult.tally`: bit 0 set when admitted, bit 1
 * when the failure policy decided (`tier: 'fallback'`), not the limit.
 */
export type Outcome = 0 | 1 | 2 | 3;
export const DENIED = 0;
export const ADMITTED = 1;

/** The outcome of a `Decision`-like value. */
export function outcomeOf(decision: { readonly allowed: boolean; readonly tier: string }): Outcome {
  return ((decision.allowed ? 1 : 0) | (decision.tier === 'fallback' ? 2 : 0)) as Outcome;
}

/**
 * One limiter seen through the loop: `sync` answers without a promise when it can (`undefined`
 * when it cannot), `async` always can.
 */
export interface Decider {
  readonly sync: ((key: string) => Outcome | undefined) | undefined;
  readonly async: (key: string) => Promise<Outcome>;
}

/** When a loop stops: whichever comes first. */
export interface LoopBounds {
  readonly maxDecisions: number;
  readonly maxMs: number;
}

/** What one loop measured. Latencies are in nanoseconds. */
export interface LoopResult {
  readonly decisions: number;
  /** Decisions by outcome: denied, admitted, denied by the policy, admitted by the policy. */
  readonly tally: readonly [number, number, number, number];
  /** Decisions that had to await (`sync` gave no answer, or there is no `sync`). */
  readonly awaited: number;
  readonly elapsedMs: number;
  readonly latencyNs: Histogram;
  /** Index of the next key in turn: pass it to the next loop to carry on where this one stopped. */
  readonly cursor: number;
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
  startAt = 0,
): Promise<LoopResult> {
  const histogram = newHistogram();
  const { sync, async } = decider;
  const keyCount = keys.length;
  let cursor = startAt % keys.length;
  let decisions = 0;
  const tally: [number, number, number, number] = [0, 0, 0, 0];
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
        let outcome = sync === undefined ? undefined : sync(key);
        if (outcome === undefined) {
          const before = performance.now();
          outcome = await async(key);
          const waited = performance.now() - before;
          awaitedMs += waited;
          awaitedHere++;
          histogram.recordValue(nanos(waited));
        }
        tally[outcome]++;
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
  return { decisions, tally, awaited, elapsedMs: performance.now() - start, latencyNs: histogram, cursor };
}

function nanos(ms: number): number {
  const ns = Math.round(ms * 1e6);
  return ns > 1 ? ns : 1;
}
