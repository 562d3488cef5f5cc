import type { Decision } from '@tiered-limiter/core';
import type { ScriptedStore } from './store-doubles.js';

/** What the proofs ask of a limiter: any of tiered-limiter's, the synchronous ones included. */
export interface DecidingLimiter {
  tryConsume?(key: string, cost?: number): Decision | undefined;
  consume?(key: string, cost?: number): Promise<Decision>;
  readonly failurePolicy?: string;
  close?(): Promise<void>;
}

/** Store failures a busy machine can cause on a healthy store. */
const TIMING = ['ERR_TL_STORE_TIMEOUT', 'ERR_TL_CIRCUIT_OPEN'];

/** One decision, from `tryConsume` when it answers, else `consume`. */
export async function decide(limiter: DecidingLimiter, key: string): Promise<Decision> {
  const fast = limiter.tryConsume?.(key);
  if (fast !== undefined) return fast;
  if (limiter.consume === undefined) throw new Error('the limiter can neither tryConsume nor consume');
  return limiter.consume(key);
}

/**
 * Shows that a limiter of the 2-token `TINY` limit still limits: three decisions on a fresh key
 * are allowed, allowed, denied, none by a failure policy. Given the `ScriptedStore` it runs on and
 * a `local` failure policy, it then makes the store refuse and shows the fallback bucket denies
 * within four decisions too. Closes the limiter either way.
 */
export async function proveStillLimits(
  limiter: DecidingLimiter,
  store?: ScriptedStore,
  key = 'proof',
): Promise<void> {
  try {
    for (let attempt = 1; ; attempt++) {
      const seen: Decision[] = [];
      for (let i = 0; i < 3; i++) seen.push(await decide(limiter, `${key}-${attempt}`));
      const fallback = seen.find((d) => d.tier === 'fallback');
      // A real Redis may miss a 20 ms timeout on a loaded machine: that is no verdict on the
      // options, so the three decisions run again on a fresh key, twice at most.
      if (fallback !== undefined && attempt < 3 && TIMING.includes(String(fallback.error?.code))) continue;
      const allowed = seen.map((d) => d.allowed).join(',');
      if (allowed !== 'true,true,false')
        throw new Error(`three decisions of a 2-token limit were ${allowed}`);
      if (fallback !== undefined) throw new Error(`a healthy store, yet a policy decided: ${fallback.error}`);
      break;
    }
    if (store !== undefined && limiter.failurePolicy === 'local') {
      store.mode = 'reject';
      const during: Decision[] = [];
      for (let i = 0; i < 4; i++) during.push(await decide(limiter, `${key}-down`));
      if (!during.some((d) => !d.allowed && d.tier === 'fallback' && d.policy === 'local')) {
        throw new Error('the local failure policy admitted 4 of a 2-token limit');
      }
    }
  } finally {
    await limiter.close?.();
  }
}
