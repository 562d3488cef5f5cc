import {
  applyBucketOp,
  type BucketOp,
  defineLimit,
  freshSharedBucket,
  internal,
  type LimitSpec,
  type SharedBucketState,
} from '@tiered-limiter/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const { heldTokens, TOKEN_EPSILON } = internal;

// The store's side of the accuracy proof (docs/ACCURACY.md), with no limiter in the way: whatever
// order takes, leases, spends, hand-backs and releases come in, a bucket never holds more than
// `capacity − held` nor owes more than the refill borrowed (`rate × aheadMs`), and what is
// admitted (takes, and leaseholders spending their leases before release) in any window of W ms
// stays within `capacity + rate × (W + aheadMs)`: `capacity + rate × W` when nothing borrows.

/** A leaseholder's lease as the test sees it: what it got, spent and has not reported. */
interface HeldLease {
  generation: number;
  unspent: number;
  spentUnreported: number;
  reported: boolean;
}

const limitArb = fc
  .record({
    capacity: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 10_000 })),
    refillPerSecond: fc.oneof(
      fc.integer({ min: 1, max: 200 }),
      fc.double({ min: 0.01, max: 1e5, noNaN: true }),
    ),
  })
  .map((o) => defineLimit(o));

const stepArb = fc.record({
  advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 3000 })),
  kind: fc.constantFrom('take', 'reserve', 'spend', 'report', 'peek'),
  a: fc.nat(),
  b: fc.nat(),
  holdMs: fc.integer({ min: 1, max: 2000 }),
});

function admissionsWithinBound(
  admitted: { atUs: number; n: number }[],
  spec: LimitSpec,
  aheadMs: number,
): string | undefined {
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += admitted[j]!.n;
      const windowMs = (admitted[j]!.atUs - admitted[i]!.atUs) / 1000;
      const bound = spec.capacity + spec.refillPerMs * (windowMs + aheadMs);
      if (sum > bound + TOKEN_EPSILON * (j - i + 1))
        return `${sum} admitted in ${windowMs} ms, bound ${bound}`;
    }
  }
  return undefined;
}

describe('applyBucketOp over a fleet of leaseholders', () => {
  it('keeps tokens + held ≤ capacity and every window within capacity + rate × (W + aheadMs)', () => {
    const aheadArb = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 }));
    fc.assert(
      fc.property(
        limitArb,
        fc.array(stepArb, { minLength: 1, maxLength: 150 }),
        aheadArb,
        (spec, steps, aheadMs) => {
          let nowUs = 1_700_000_000_000_000;
          const state: SharedBucketState = freshSharedBucket(spec, nowUs);
          const leases: HeldLease[] = [];
          const admitted: { atUs: number; n: number }[] = [];
          const apply = (op: Omit<BucketOp, 'key' | 'limits'>) =>
            applyBucketOp([state], [spec], { key: 'k', limits: [spec], aheadMs, ...op }, nowUs);

          for (const step of steps) {
            nowUs += step.advanceMs * 1000;
            const live = leases.filter((l) => !l.reported && l.generation > nowUs && l.unspent > 0);
            const open = leases.filter((l) => !l.reported);
            if (step.kind === 'take') {
              const cost = 1 + (step.a % spec.capacity);
              const reply = apply({ take: cost });
              if (reply.ok) admitted.push({ atUs: nowUs, n: cost });
            } else if (step.kind === 'reserve') {
              const want = 1 + (step.a % spec.capacity);
              const min = 1 + (step.b % want);
              const reply = apply({ reserve: { want, min, holdMs: step.holdMs } });
              expect(reply.granted === 0 || (reply.granted >= min && reply.granted <= want)).toBe(true);
              if (reply.granted > 0) {
                expect(reply.generation).toBeGreaterThanOrEqual(nowUs + step.holdMs * 1000);
                leases.push({
                  generation: reply.generation,
                  unspent: reply.granted,
                  spentUnreported: 0,
                  reported: false,
                });
              }
            } else if (step.kind === 'spend' && live.length > 0) {
              // A leaseholder spends only before its lease's release, as the local tier does.
              const lease = live[step.a % live.length]!;
              const n = 1 + (step.b % lease.unspent);
              lease.unspent -= n;
              lease.spentUnreported += n;
              admitted.push({ atUs: nowUs, n });
            } else if (step.kind === 'report' && open.length > 0) {
              const lease = open[step.a % open.length]!;
              apply({
                reports: [
                  { generation: lease.generation, spent: lease.spentUnreported, returned: lease.unspent },
                ],
              });
              lease.reported = true;
            } else {
              apply({});
            }
            const held = heldTokens(state);
            expect(state.tokens + held).toBeLessThanOrEqual(spec.capacity + TOKEN_EPSILON);
            expect(state.tokens).toBeGreaterThanOrEqual(-spec.refillPerMs * aheadMs - TOKEN_EPSILON);
            for (const generation of state.held) expect(generation.count).toBeGreaterThan(0);
          }
          const over = admissionsWithinBound(admitted, spec, aheadMs);
          expect(over).toBeUndefined();
        },
      ),
      { numRuns: 3000 },
    );
  });
});
