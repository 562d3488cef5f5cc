import { type BucketOp, type BucketReply, defineLimit, StoreError } from '@tiered-limiter/core';
import { MemoryStore } from '@tiered-limiter/local';
import { describe, expect, it } from 'vitest';
import { CountingStore, fakeTime, limiter } from './sync-kit.js';

// A sync round's ops leave in one guarded attempt per slice (one timer, one place in the refill
// queue), not one each: what a failed or stalled round looks like from outside.

/** A counting store that can be made to fail, or to hang, every op. */
class FaultyStore extends CountingStore {
  mode: 'up' | 'failing' | 'hanging' = 'up';

  override apply(op: BucketOp): Promise<BucketReply> {
    if (this.mode === 'failing') return Promise.reject(new StoreError('down'));
    if (this.mode === 'hanging') return new Promise<BucketReply>(() => {});
    return super.apply(op);
  }
}

const KEYS = Array.from({ length: 40 }, (_, i) => `k${i}`);

/** 100 instances declared (a 556 ms period); 40 keys, each leased at its second hit. */
async function fleetMember(timeoutMs: number) {
  const { clock, advance } = fakeTime();
  const store = new FaultyStore(new MemoryStore({ clock }));
  const l = limiter(store, clock, {
    limits: defineLimit({ capacity: 400, refillPerSecond: 400 }),
    instances: 100,
    timeoutMs,
  });
  for (let hit = 0; hit < 2; hit++) for (const key of KEYS) await l.consume(key);
  expect(l.stats().keys).toBe(KEYS.length);
  const failures: StoreError[] = [];
  l.on('failure', (error) => failures.push(error));
  return { store, l, advance, failures };
}

describe('TieredLimiter sync round', () => {
  it('sends the round in one guarded attempt: a failed round is one failure, and what it carried is counted lost', async () => {
    const { store, l, advance, failures } = await fleetMember(20);
    store.mode = 'failing';
    await advance(556);
    // 40 keys synced in the round: one failure, not 40 (one per op, each with a timer of its own).
    expect(failures).toHaveLength(1);
    expect(failures[0]!.message).toContain('down');
    expect(l.stats().tokensUnreported).toBeGreaterThanOrEqual(KEYS.length);
    expect(l.stats().decisions.fallback).toBe(0);
    // The store is back: the next round sends every key again, and nothing lost is sent twice.
    store.mode = 'up';
    const sent = store.ops.length;
    // The round over 40 keys costs two calls' worth: the period is now 100 × 2 ÷ 180 s.
    expect(l.stats().syncPeriodMs).toBe(1111);
    await advance(1111);
    expect(new Set(store.ops.slice(sent).map((op) => op.key))).toEqual(new Set(KEYS));
    expect(failures).toHaveLength(1);
  });

  it('a request that joins a stalled round gets its policy within the timeout', async () => {
    const { store, l, advance, failures } = await fleetMember(20);
    // Spend k0's lease, so that its next request has to wait for the round's grant.
    while (l.tryConsume('k0') !== undefined);
    store.mode = 'hanging';
    await advance(556);
    const decision = l.consume('k0');
    await advance(25);
    expect(await decision).toMatchObject({ allowed: true, tier: 'fallback' });
    expect(failures).toHaveLength(1);
    expect(failures[0]!.code).toBe('ERR_TL_STORE_TIMEOUT');
    // The round's calls never answer: close() hands back what it can within its own wait.
    const closed = l.close();
    await advance(5000);
    await closed;
  });
});
