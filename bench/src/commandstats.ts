import type { Redis } from 'ioredis';

/** Calls per command as Redis counts them (`INFO commandstats`): `calls` plus `rejected_calls`. */
export type CommandCalls = ReadonlyMap<string, number>;

/**
 * Commands left out of everything: the `INFO` that reads these counters, and what a client sends
 * once while it connects (ioredis's ready check is an `INFO` too).
 */
const NOT_DECISIONS = /^(?:info|hello|auth|select|client\|.*)$/;

/**
 * Commands that are one round trip each whatever they run: a Lua script (every limiter measured
 * here, the peer included, decides with one), or a transaction's `EXEC`. `INFO commandstats` also
 * counts each command a script runs inside (`TIME`, `HMGET`, `HSET`, `PEXPIRE`; the peer's `SET`,
 * `INCRBY`, `PTTL`), which are no round trips: summing every command would count one EVALSHA
 * four or five times.
 */
const ROUND_TRIPS = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro', 'exec']);

export function parseCommandStats(info: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)(?:.*?rejected_calls=(\d+))?/gm)) {
    calls.set(match[1]!, Number(match[2]) + Number(match[3] ?? 0));
  }
  return calls;
}

export async function readCommandCalls(admin: Redis): Promise<CommandCalls> {
  return parseCommandStats(await admin.info('commandstats'));
}

/** What Redis ran between two readings. */
export interface CommandDelta {
  /** Script calls and transactions: the round trips. */
  readonly roundTrips: number;
  /** Every command counted, those run inside scripts included. */
  readonly commands: number;
  /** `commands` by name, for the JSON results. */
  readonly byCommand: Readonly<Record<string, number>>;
}

export function commandDelta(before: CommandCalls, after: CommandCalls): CommandDelta {
  let roundTrips = 0;
  let commands = 0;
  const byCommand: Record<string, number> = {};
  for (const [command, calls] of after) {
    const delta = calls - (before.get(command) ?? 0);
    if (delta <= 0 || NOT_DECISIONS.test(command)) continue;
    commands += delta;
    if (ROUND_TRIPS.has(command)) roundTrips += delta;
    byCommand[command] = delta;
  }
  return { roundTrips, commands, byCommand };
}
