import type { Cluster, Redis } from 'ioredis';

/** One line of `INFO commandstats`. */
export interface CommandStat {
  /** `calls` plus `rejected_calls` (refused before running, e.g. NOSCRIPT or OOM): each was a round trip. */
  readonly calls: number;
  /** Microseconds of server time (`usec`); a script's includes the commands it ran inside. */
  readonly usec: number;
}

/** Redis's own per-command counters, by lower-case command name (`evalsha`, `client|list`). */
export type CommandStats = ReadonlyMap<string, CommandStat>;

/**
 * Commands left out of every delta: the `INFO` that reads these counters, and what a client
 * sends once while it connects (ioredis's ready check is an `INFO` too).
 */
const NOT_DECISIONS = /^(?:info|hello|auth|select|ping|client\|.*)$/;

/**
 * Commands that are one round trip each whatever they run: a Lua script or function, or a
 * transaction's `EXEC`. Redis also counts each command a script runs inside (`TIME`, `HMGET`,
 * `HSET`, …), which are no round trips: summing every command would count one EVALSHA four or
 * five times.
 */
export const ROUND_TRIP_COMMANDS: ReadonlySet<string> = new Set([
  'evalsha',
  'eval',
  'evalsha_ro',
  'eval_ro',
  'fcall',
  'fcall_ro',
  'exec',
]);

/** Parses the text of `INFO commandstats` (Redis 6 and 7 formats). */
export function parseCommandStats(info: string): Map<string, CommandStat> {
  const stats = new Map<string, CommandStat>();
  for (const match of info.matchAll(/^cmdstat_([^:\s]+):(.*)$/gm)) {
    const fields = new Map(match[2]!.split(',').map((pair) => pair.split('=') as [string, string]));
    stats.set(match[1]!, {
      calls: Number(fields.get('calls') ?? 0) + Number(fields.get('rejected_calls') ?? 0),
      usec: Number(fields.get('usec') ?? 0),
    });
  }
  return stats;
}

/** The counters of a server, or summed over every master of a Cluster. */
export async function readCommandStats(client: Redis | Cluster): Promise<CommandStats> {
  const servers = 'nodes' in client ? client.nodes('master') : [client];
  const total = new Map<string, CommandStat>();
  for (const server of servers) {
    for (const [command, stat] of parseCommandStats(await server.info('commandstats'))) {
      const seen = total.get(command);
      total.set(command, seen ? { calls: seen.calls + stat.calls, usec: seen.usec + stat.usec } : stat);
    }
  }
  return total;
}

/** What Redis ran between two readings. */
export interface CommandDelta {
  /** Script calls and transactions: the round trips a limiter made. */
  readonly roundTrips: number;
  /** Server µs spent in those round trips (their inner commands included). */
  readonly roundTripUsec: number;
  /** Every command counted, those run inside scripts included. */
  readonly commands: number;
  /** `commands` by name. */
  readonly byCommand: Readonly<Record<string, number>>;
}

/** The change between two readings, connection chatter (`INFO`, `PING`, `CLIENT …`) left out. */
export function commandDelta(before: CommandStats, after: CommandStats): CommandDelta {
  let roundTrips = 0;
  let roundTripUsec = 0;
  let commands = 0;
  const byCommand: Record<string, number> = {};
  for (const [command, stat] of after) {
    const calls = stat.calls - (before.get(command)?.calls ?? 0);
    if (calls <= 0 || NOT_DECISIONS.test(command)) continue;
    commands += calls;
    byCommand[command] = calls;
    if (ROUND_TRIP_COMMANDS.has(command)) {
      roundTrips += calls;
      roundTripUsec += stat.usec - (before.get(command)?.usec ?? 0);
    }
  }
  return { roundTrips, roundTripUsec, commands, byCommand };
}
