// Run by test/gc.test.ts as `node --expose-gc --import tsx test/gc/dropped-limiters.ts` from the
// repository root (tsx follows the root tsconfig's paths to the sources). Prints one JSON line.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { perSecond } from '@tiered-limiter/core';
import { LocalLimiter, MemoryStore, RequestLimiter, TieredLimiter } from '@tiered-limiter/local';
import { acquireSharedClock, releaseSharedClock } from '../../packages/local/src/tiered/shared-clock.js';

const exposed = (globalThis as { gc?: () => void }).gc;
if (exposed === undefined) throw new Error('run with node --expose-gc');
const gc: () => void = exposed;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const DROPPED = 10;

const store = new MemoryStore();
let finalized = 0;
const registry = new FinalizationRegistry(() => {
  finalized++;
});
const refs: WeakRef<object>[] = [];

let heldClock = 0;

/**
 * Builds a limiter, uses it (leases held, a sweep timer running) busily enough that its hot path
 * joins the shared clock thread (`HotClock`), and lets go of it unclosed.
 */
async function useAndDrop(i: number): Promise<void> {
  const limiter = new TieredLimiter({ store, limits: perSecond(100), failurePolicy: 'open' });
  for (let j = 0; j < 20; j++) limiter.tryConsume(`k${j % 3}`) ?? (await limiter.consume(`k${j % 3}`));
  const deadline = performance.now() + 3_000;
  while (!limiter.stats().clockThread && performance.now() < deadline) {
    for (let j = 0; j < 5_000; j++) limiter.tryConsume('k0') ?? (await limiter.consume('k0'));
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (limiter.stats().clockThread) heldClock++;
  registry.register(limiter, i);
  refs.push(new WeakRef(limiter));
}

for (let i = 0; i < DROPPED; i++) await useAndDrop(i);
// The clock the dropped limiters shared: a limiter lets it go at its first quiet tick, or when it is
// collected, whichever comes first.
const shared = acquireSharedClock();
releaseSharedClock();
const sharedAtStart = shared !== undefined;
// Background refills settle, sweep timers tick, then collect until every limiter is gone.
await sleep(50);
let rounds = 0;
// Only the finalizers are watched here: a WeakRef's deref() keeps its target for the rest of the job.
while (rounds < 100 && finalized < DROPPED) {
  await sleep(20);
  gc();
  rounds++;
}
await sleep(20);
const alive = refs.filter((ref) => ref.deref() !== undefined).length;
// A stopped worker writes no more: its clock stands still.
const before = shared?.view[0];
await sleep(50);
const clockStill = shared?.view[0] === before;
// A new user gets a new clock only if the old one was torn down with its last user.
const again = acquireSharedClock();
releaseSharedClock();

// Construction cost at the default maxKeys: 50 of each, kept alive, measured after a full GC.
function retainedBytes(make: () => unknown): { bytesEach: number; msEach: number } {
  const kept: unknown[] = [];
  // One made and dropped first, so that compiling the code is not counted; garbage collected twice.
  make();
  gc();
  gc();
  const { heapUsed, external } = process.memoryUsage();
  const started = performance.now();
  for (let i = 0; i < 50; i++) kept.push(make());
  const msEach = (performance.now() - started) / 50;
  gc();
  const after = process.memoryUsage();
  const bytesEach = (after.heapUsed + after.external - heapUsed - external) / 50;
  if (kept.length !== 50) throw new Error('unreachable');
  return { bytesEach, msEach };
}
const local = retainedBytes(() => new LocalLimiter({ limits: perSecond(10) }));
const tieredKept: TieredLimiter[] = [];
const tiered = retainedBytes(() => {
  const limiter = new TieredLimiter({ store, limits: perSecond(10), failurePolicy: 'open' });
  tieredKept.push(limiter);
  return limiter;
});
const request = retainedBytes(
  () => new RequestLimiter({ store, limits: perSecond(10), failurePolicy: 'open' }),
);
// lru-cache sized up front for 100,000 keys, as every limiter was built before.
const fromLocal = createRequire(new URL('../../packages/local/package.json', import.meta.url));
// The test package does not depend on lru-cache: load local's copy, typed by what is used here.
type UpFront = new (options: { max: number }) => object;
const lruCache = pathToFileURL(fromLocal.resolve('lru-cache')).href;
const { LRUCache } = (await import(lruCache)) as { LRUCache: UpFront };
const upFront = retainedBytes(() => new LRUCache({ max: 100_000 }));
await Promise.all(tieredKept.map((limiter) => limiter.close()));

console.log(
  JSON.stringify({
    dropped: DROPPED,
    alive,
    finalized,
    gcRounds: rounds,
    heldClock,
    sharedAtStart,
    clockStill,
    newClockAfter: again !== shared,
    construction: { local, tiered, request, upFront },
  }),
);
