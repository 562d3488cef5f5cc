/**
 * Calls Redis answered with an error: the `StoreError` names the reply (`StoreReplyError`) and a
 * client's own error stays a plain `StoreError`; a call refused for one key's value (`WRONGTYPE`)
 * goes again as a call per user key, so that only that key's ops fail.
 */
import { defineLimit, StoreError, StoreReplyError } from '@tiered-limiter/core';
import { describe, expect, it } from 'vitest';
import type { RedisClientAdapter, ScriptCall } from '../src/index.js';
import { RedisStore } from '../src/index.js';

const limits = [defineLimit({ capacity: 10, refillPerSecond: 1, name: 'x' })];
// A take of 1 on one limit is answered short (apply.lua's header): admitted, 9 left (+1), full in
// 100 ms. A heartbeat in 7 integers: 1, the live count (1), five zeros.
const TAKE_REPLY = [10, 100];
const HEARTBEAT_REPLY = [1, 1, 0, 0, 0, 0, 0];

/** The keys a script call carries (after `numkeys`). */
const keysOf = (call: ScriptCall): string[] => call.slice(1, 1 + Number(call[0])).map(String);

/** A single-server adapter that answers `refuse(call)` when it gives an error, else a granted take (or heartbeat) per entry. */
function scriptedAdapter(refuse: (call: ScriptCall) => Error | undefined) {
  const sent: string[][] = [];
  const adapter: RedisClientAdapter = {
    client: 'scripted',
    isCluster: false,
    nodeOf: () => '',
    evalScript: async (_script, calls) =>
      calls.map((call) => {
        sent.push(keysOf(call));
        const refusal = refuse(call);
        if (refusal !== undefined) return refusal;
        // One key an entry here (one limit, or the fleet's set).
        return keysOf(call).flatMap((key) => (key.includes('%fleet') ? HEARTBEAT_REPLY : TAKE_REPLY));
      }),
  };
  return { adapter, sent };
}

/** Every op of `keys` submitted in one tick (one call), settled. */
function applyAll(store: RedisStore, keys: readonly string[]) {
  return Promise.allSettled(keys.map((key) => store.apply({ key, limits, take: 1 })));
}

describe('a call refused for one key’s value (WRONGTYPE)', () => {
  it('goes again as a call per user key, each key’s ops in order, and fails only that key’s', async () => {
    const { adapter, sent } = scriptedAdapter((call) =>
      keysOf(call).some((key) => key.includes('{bad}'))
        ? new Error('WRONGTYPE tl:{bad}:x holds no tiered-limiter bucket')
        : undefined,
    );
    const store = new RedisStore({ redis: adapter, prefix: 'tl' });
    const beat = store.heartbeat('instance-1', 1000);
    const outcomes = await applyAll(store, ['a', 'b', 'bad', 'a']);
    expect(await beat).toBe(1);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const refused = (outcomes[2] as PromiseRejectedResult).reason;
    expect(refused).toBeInstanceOf(StoreReplyError);
    expect(refused).toMatchObject({ code: 'ERR_TL_STORE_REPLY', reply: 'WRONGTYPE' });
    // The call, then one per user key (a's two ops together, in their order) and the heartbeat alone.
    expect(sent.slice(1).sort()).toEqual(
      [['tl:{a}:x', 'tl:{a}:x'], ['tl:{b}:x'], ['tl:{bad}:x'], ['tl:{%fleet}']].sort(),
    );
    expect(store.stats()).toMatchObject({ calls: 5, ops: 5 });
  });

  it('fails at once, sent no more, when the call carried one key', async () => {
    const { adapter, sent } = scriptedAdapter(
      () => new Error('WRONGTYPE tl:{bad}:x holds no tiered-limiter bucket'),
    );
    const store = new RedisStore({ redis: adapter, prefix: 'tl' });
    const outcomes = await applyAll(store, ['bad', 'bad']);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(sent).toHaveLength(1);
  });
});

describe('the StoreError of a failed call', () => {
  it.each([
    ['OOM', "OOM command not allowed when used memory > 'maxmemory'. script: 8d91, on @user_script:263."],
    ['NOPERM', "NOPERM this user has no permissions to run the 'evalsha' command"],
    ['BUSY', 'BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.'],
    ['LOADING', 'LOADING Redis is loading the dataset in memory'],
    ['MISCONF', 'MISCONF Redis is configured to save RDB snapshots, but it is currently unable to persist'],
    ['ERR', "ERR The user executing the script can't run this command or subcommand script: 8d91"],
  ])('names the reply %s, and the call is not sent again', async (reply, message) => {
    const { adapter, sent } = scriptedAdapter(() => new Error(message));
    const store = new RedisStore({ redis: adapter, prefix: 'tl' });
    const outcomes = await applyAll(store, ['a', 'b']);
    for (const outcome of outcomes) {
      const error = (outcome as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(StoreReplyError);
      expect(error).toMatchObject({ code: 'ERR_TL_STORE_REPLY', reply });
      expect((error as StoreError).cause).toEqual(new Error(message));
    }
    expect(sent).toHaveLength(1);
  });

  it.each([
    "Stream isn't writeable and enableOfflineQueue options is false",
    'Connection is closed.',
    'The client is closed',
    'Socket closed unexpectedly',
  ])('is a plain StoreError for a client’s own error: %s', async (message) => {
    const { adapter } = scriptedAdapter(() => new Error(message));
    const store = new RedisStore({ redis: adapter, prefix: 'tl' });
    const [outcome] = await applyAll(store, ['a']);
    const error = (outcome as PromiseRejectedResult).reason;
    expect(error).toBeInstanceOf(StoreError);
    expect(error).not.toBeInstanceOf(StoreReplyError);
    expect(error).toMatchObject({ code: 'ERR_TL_STORE' });
  });
});
