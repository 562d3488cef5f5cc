/**
 * What a take cut under it by a dropped connection must come to, on one server or on a Cluster:
 * the checks both suites run on their own `cutDuringTake`.
 */
import { StoreError } from '@tiered-limiter/core';
import type { CutOutcome } from '@tiered-limiter/test-harness';
import { expect } from 'vitest';

/** A take whose connection was cut under it: its reply or error, and the tokens it took in the end. */
export type CutTake = CutOutcome & { taken: number };

/**
 * Cuts a take in three rounds; each must fail with a `StoreError` (the limiter decides) and take
 * at most its one token: the client never sent it again.
 */
export async function expectNeverResent(cutDuringTake: () => Promise<CutTake>): Promise<void> {
  for (let round = 0; round < 3; round++) {
    const { reply, error, taken } = await cutDuringTake();
    expect(reply).toBeUndefined();
    expect(error).toBeInstanceOf(StoreError);
    expect(taken).toBeLessThanOrEqual(1);
  }
}

/**
 * Cuts a take until one is counted twice, in at most five rounds (whether the cut lands before
 * the command reached Redis is a race); each must succeed, and one must have taken 2 tokens: the
 * client sent it again.
 */
export async function expectResentAndCountedTwice(cutDuringTake: () => Promise<CutTake>): Promise<void> {
  let counts: number[] = [];
  for (let round = 0; round < 5 && !counts.includes(2); round++) {
    const { reply, taken } = await cutDuringTake();
    expect(reply?.ok).toBe(true);
    counts = [...counts, taken];
  }
  expect(counts).toContain(2);
}
