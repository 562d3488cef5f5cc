import { setTimeout as sleep } from 'node:timers/promises';
import type { Histogram } from 'hdr-histogram-js';
import { type Decider, newHistogram, type Outcome } from './loop.js';

/** How often the paced loop wakes up to issue the decisions that fell due: a server's turn of the loop. */
export const PACED_TICK_MS = 1;

/** What a paced run measured. Latencies are in nanoseconds. */
export interface PacedResult {
  /** Decisions issued in the run's time, every one answered before it returned. */
  readonly decisions: number;
  /** Decisions by outcome, as `LoopResult.tally`. */
  readonly tally: readonly [number, number, number, number];
  /** Decisions that had to await (`sync` gave no answer). */
  readonly awaited: number;
  /** The time the decisions fell due over, ms: to the last tick that issued any (the wait for the last answers not included). */
  readonly elapsedMs: number;
  /** How long each awaited decision took, from its request to its answer. */
  readonly awaitedNs: Histogram;
  /** Index of the next key in turn, for the next run to carry on from. */
  readonly cursor: number;
}

/**
 * Drives `decider` over `keys` (in turn) at `perSecond` decisions a second for `ms`, as a service
 * at a steady load meets it: every `PACED_TICK_MS` the decisions that fell due are issued, each
 * answered synchronously when it can, else started and left to answer while the next ones go
 * out. Unlike `runLoop`'s closed loop, the work offered does not depend on how fast the limiter
 * answers, so the CPU and garbage collection it costs compare from limiter to limiter and from
 * run to run. Resolves once every decision issued has answered; rejects with the first error.
 */
export async function runPaced(
  decider: Decider,
  keys: readonly string[],
  perSecond: number,
  ms: number,
  startAt = 0,
): Promise<PacedResult> {
  const { sync, async } = decider;
  const histogram = newHistogram();
  const tally: [number, number, number, number] = [0, 0, 0, 0];
  const keyCount = keys.length;
  let cursor = startAt % keyCount;
  let issued = 0;
  let awaited = 0;
  let outstanding = 0;
  let failure: unknown;
  let drained: (() => void) | undefined;
  const answered = () => {
    if (--outstanding === 0) drained?.();
  };
  const start = performance.now();
  let elapsedMs = 0;
  for (;;) {
    const nowMs = performance.now() - start;
    if (nowMs >= ms) break;
    elapsedMs = nowMs;
    const due = Math.floor((nowMs * perSecond) / 1000) - issued;
    for (let i = 0; i < due; i++) {
      const key = keys[cursor]!;
      cursor = cursor + 1 === keyCount ? 0 : cursor + 1;
      const outcome = sync === undefined ? undefined : sync(key);
      if (outcome !== undefined) {
        tally[outcome]++;
        continue;
      }
      awaited++;
      outstanding++;
      const before = performance.now();
      async(key).then(
        (late: Outcome) => {
          tally[late]++;
          histogram.recordValue(Math.max(1, Math.round((performance.now() - before) * 1e6)));
          answered();
        },
        (error: unknown) => {
          failure ??= error;
          answered();
        },
      );
    }
    issued += due;
    await sleep(PACED_TICK_MS);
  }
  if (outstanding > 0) await new Promise<void>((resolve) => (drained = resolve));
  if (failure !== undefined) throw failure;
  return { decisions: issued, tally, awaited, elapsedMs, awaitedNs: histogram, cursor };
}
