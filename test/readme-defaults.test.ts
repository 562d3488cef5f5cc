/**
 * The README's table of limiter options states each default; the packages export the constants
 * the code resolves them from. This holds the two together: a default changed in the code and not
 * in the README (or the other way round) fails here, not in a user's capacity plan.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_ASSUMED_INSTANCES,
  DEFAULT_CLOSE_TIMEOUT_MS,
  DEFAULT_CLOSED_RETRY_AFTER_MS,
  DEFAULT_COOLDOWN_MS,
  DEFAULT_FAILURE_THRESHOLD,
  DEFAULT_HORIZON_MS,
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOW_WATER,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_CONCURRENT_REFILLS,
  DEFAULT_MAX_KEYS,
  DEFAULT_MIN_BATCH,
  DEFAULT_TIMEOUT_MS,
} from '@tiered-limiter/local';
import {
  DEFAULT_KEEP_AFTER_FULL_MS,
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_MAX_KEYS_PER_CALL,
  DEFAULT_PREFIX,
} from '@tiered-limiter/redis';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FLEET_CALLS_PER_SECOND } from '../packages/local/src/defaults.js';

const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

/** The README's "Limiter options" table: each row's option cell and default cell. */
function defaultsTable(): Map<string, string> {
  const table = README.split('### Limiter options')[1]!.split('\n\n')[1]!;
  const rows = table.split('\n').slice(2);
  return new Map(
    rows.map((row) => {
      const [option, , defaultCell] = row.split(/ (?<!\\)\| /).map((cell) => cell.replace(/^\| /, '').trim());
      return [option!, defaultCell!];
    }),
  );
}

const grouped = (n: number) => n.toLocaleString('en-US');

describe("the README's defaults are the code's", () => {
  const table = defaultsTable();

  it.each([
    ['`timeoutMs`', `${DEFAULT_TIMEOUT_MS}`],
    ['`breaker`', `\`{ ${DEFAULT_FAILURE_THRESHOLD}, ${DEFAULT_COOLDOWN_MS} }\``],
    ['`closedRetryAfterMs`', `${DEFAULT_CLOSED_RETRY_AFTER_MS}`],
    ['`instances`', `the live count (sync), else ${DEFAULT_ASSUMED_INSTANCES} for sizing`],
    ['`sync`', `\`{ ${DEFAULT_FLEET_CALLS_PER_SECOND} }\``],
    [
      '`lease`',
      `\`{ ${DEFAULT_LEASE_TTL_MS}, ${DEFAULT_HORIZON_MS}, ${DEFAULT_MIN_BATCH}, ${DEFAULT_MAX_BATCH}, ${DEFAULT_LOW_WATER} }\``,
    ],
    ['`maxKeys`', grouped(DEFAULT_MAX_KEYS)],
    ['`maxConcurrentRefills`', `${DEFAULT_MAX_CONCURRENT_REFILLS}`],
    ['`closeTimeoutMs`', `${DEFAULT_CLOSE_TIMEOUT_MS}`],
    ['`redis`, `prefix`', `required, \`'${DEFAULT_PREFIX}'\``],
    ['`coalesce`, `shards`', `\`{ ${DEFAULT_MAX_KEYS_PER_CALL}, ${DEFAULT_MAX_IN_FLIGHT} }\``],
    ['`keepAfterFullMs`', `${DEFAULT_KEEP_AFTER_FULL_MS}`],
  ])('%s: %s', (option, stated) => {
    expect(table.has(option)).toBe(true);
    // The whole cell, or its first part where an explanation follows (after a space or a `;`).
    const cell = table.get(option)!;
    expect(cell === stated || cell.startsWith(`${stated} `) || cell.startsWith(`${stated};`)).toBe(true);
  });
});
