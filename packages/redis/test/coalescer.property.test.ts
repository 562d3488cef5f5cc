/**
 * The coalescer's promises under any schedule of submits, replies, failed calls and callers giving
 * up, over a transport the test answers by hand: every op leaves once or is withdrawn unsent, never
 * both; ops that requests wait on leave in arrival order, and so do a key's background ops (a
 * charge taken along by a request's op may pass the key's others); no op
 * leaves ahead of a charge of its key queued before it (a look behind an optimistic charge);
 * at most `maxInFlight` calls and one call of background ops alone are out; a call over
 * `maxKeysPerCall` carries one key's ops only; once every call is answered, nothing is left queued.
 */
import { StoreWithdrawnError } from '@tiered-limiter/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Coalescer } from '../src/coalescer.js';

/** One op the schedule submitted: what it is, and what became of it. */
interface Submitted {
  readonly id: number;
  readonly key: string;
  readonly keys: readonly string[];
  readonly background: boolean;
  /** A charge: no later op of its key may leave ahead of it. */
  readonly keyOrdered: boolean;
  readonly wait: { gaveUp: boolean } | undefined;
  /** Where it left: the index of its call and its place in the order ops left. */
  sentAt: { call: number; position: number } | undefined;
  settled: 'resolved' | 'rejected' | 'withdrawn' | undefined;
}

const action = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('submit' as const),
      background: fc.boolean(),
      charge: fc.boolean(),
      key: fc.integer({ min: 0, max: 3 }),
      limits: fc.integer({ min: 1, max: 2 }),
      waits: fc.boolean(),
    }),
    weight: 6,
  },
  { arbitrary: fc.record({ kind: fc.constant('turn' as const) }), weight: 2 },
  {
    arbitrary: fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(), fails: fc.boolean() }),
    weight: 3,
  },
  { arbitrary: fc.record({ kind: fc.constant('giveUp' as const), pick: fc.nat() }), weight: 1 },
);

function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('Coalescer under any schedule', () => {
  it('keeps its order, its limits, and every op once', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(action, { minLength: 1, maxLength: 60 }),
        async (maxKeys, maxInFlight, actions) => {
          const ops: Submitted[] = [];
          const open: { index: number; settle(fails: boolean): void }[] = [];
          const calls: Submitted[][] = [];
          let position = 0;
          let mostOut = 0;
          const coalescer = new Coalescer<Submitted, number>(
            (batches) =>
              new Promise<void>((resolve) => {
                const pending = batches.flat();
                const index = calls.length;
                calls.push(pending.map((p) => p.op));
                for (const p of pending) {
                  // Sent twice would count its tokens twice.
                  expect(p.op.sentAt).toBeUndefined();
                  p.op.sentAt = { call: index, position: position++ };
                }
                open.push({
                  index,
                  settle: (fails) => {
                    for (const p of pending) {
                      if (fails) p.reject(new Error('call failed'));
                      else p.resolve(p.op.id);
                    }
                    resolve();
                  },
                });
                mostOut = Math.max(mostOut, open.length);
              }),
            maxKeys,
            maxInFlight,
          );
          const submit = (
            background: boolean,
            charge: boolean,
            key: string,
            limits: number,
            waits: boolean,
          ) => {
            const keys = Array.from({ length: limits }, (_, i) => `${key}:${i}`);
            const op: Submitted = {
              id: ops.length,
              key,
              keys,
              background,
              keyOrdered: background && charge,
              wait: !background && waits ? { gaveUp: false } : undefined,
              sentAt: undefined,
              settled: undefined,
            };
            ops.push(op);
            coalescer.submit('server', {
              op,
              keys,
              slot: 0,
              background,
              keyOrdered: op.keyOrdered,
              wait: op.wait,
              resolve: () => {
                op.settled = 'resolved';
              },
              reject: (error) => {
                op.settled = error instanceof StoreWithdrawnError ? 'withdrawn' : 'rejected';
              },
            });
          };
          const answer = async (pick: number, fails: boolean) => {
            if (open.length === 0) return;
            const [call] = open.splice(pick % open.length, 1);
            call!.settle(fails);
            await turn();
          };

          for (const step of actions) {
            if (step.kind === 'submit')
              submit(step.background, step.charge, `k${step.key}`, step.limits, step.waits);
            else if (step.kind === 'turn') await turn();
            else if (step.kind === 'answer') await answer(step.pick, step.fails);
            else {
              const waiting = ops.filter((op) => op.wait !== undefined && op.sentAt === undefined);
              const chosen = waiting[step.pick % Math.max(1, waiting.length)];
              if (chosen?.wait !== undefined) chosen.wait.gaveUp = true;
            }
          }
          // Drain: answer every call until nothing is out or queued.
          for (let round = 0; round < 1_000 && (open.length > 0 || ops.some((op) => !op.settled)); round++) {
            if (open.length > 0) await answer(0, false);
            else await turn();
          }

          // Every op settled: sent once and answered, or withdrawn unsent because its caller gave up.
          for (const op of ops) {
            expect(op.settled).toBeDefined();
            if (op.settled === 'withdrawn') {
              expect(op.sentAt).toBeUndefined();
              expect(op.wait?.gaveUp).toBe(true);
            } else {
              expect(op.sentAt).toBeDefined();
            }
          }
          const sent = ops.filter((op) => op.sentAt !== undefined);
          const before = (a: Submitted, b: Submitted) => a.sentAt!.position < b.sentAt!.position;
          for (const a of sent) {
            for (const b of sent) {
              if (a.id >= b.id) continue;
              // Requests' ops in arrival order; a key's background ops too, but that a charge taken
              // along by a request's op passes the key's others (which then see fewer tokens).
              if (!a.background && !b.background) expect(before(a, b)).toBe(true);
              if (a.background && b.background && a.key === b.key && (a.keyOrdered || !b.keyOrdered)) {
                expect(before(a, b)).toBe(true);
              }
              // Nothing overtakes a charge of its key queued before it.
              if (a.keyOrdered && a.key === b.key) expect(before(a, b)).toBe(true);
            }
          }
          // maxInFlight calls, and one of background ops alone beside them.
          expect(mostOut).toBeLessThanOrEqual(maxInFlight + 1);
          for (const call of calls) {
            expect(call.length).toBeGreaterThan(0);
            const keys = call.reduce((sum, op) => sum + op.keys.length, 0);
            if (keys > maxKeys) expect(new Set(call.map((op) => op.key)).size).toBe(1);
          }
          expect(coalescer.stats()).toMatchObject({
            calls: calls.length,
            ops: sent.length,
            withdrawn: ops.length - sent.length,
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
