/**
 * The README's table of limiter options states each default; the packages export the constants
 * the code resolves them from. This holds the two together: a default changed in the code and not
 * in the README (or the other way round) fails here, not in a user's capacity plan.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_DEGRADED_HEADER,
  DEFAULT_FAIL_CLOSED_STATUS,
  DEFAULT_IPV6_SUBNET,
  DEFAULT_MAX_LIMITERS,
  DEFAULT_REQUEST_PROPERTY,
  DEFAULT_STANDARD_HEADERS,
  DEFAULT_STATUS_CODE,
  DEFAULT_TRUST_PROXY,
} from '@tiered-limiter/http';
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
  MIN_LEASE_GRACE_MS,
} from '@tiered-limiter/local';
import {
  DEFAULT_KEEP_AFTER_FULL_MS,
  DEFAULT_MAX_IN_FLIGHT,
  DEFAULT_MAX_KEYS_PER_CALL,
  DEFAULT_PREFIX,
  KEY_TTL_MARGIN_MS,
} from '@tiered-limiter/redis';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FLEET_CALLS_PER_SECOND } from '../packages/local/src/defaults.js';
import { IDLE_BEAT_MS } from '../packages/local/src/tiered/fleet-registry.js';

const readme = (path: string) => readFileSync(fileURLToPath(new URL(path, import.meta.url)), 'utf8');

/**
 * The options table under `heading` (its first table): each row's option cell and the cell of the
 * column titled `Default`/`default`.
 */
function defaultsTable(markdown: string, heading: string): Map<string, string> {
  const table = markdown
    .split(heading)[1]!
    .split('\n')
    .filter((line) => line.startsWith('|'));
  const cells = (row: string) =>
    row.split(/ (?<!\\)\| /).map((cell) => cell.replace(/^\| |\s*\|$/g, '').trim());
  const column = cells(table[0]!).findIndex((title) => title.toLowerCase() === 'default');
  const rows = table.slice(2).map(cells);
  return new Map(rows.map((row) => [row[0]!, row[column]!]));
}

const grouped = (n: number) => n.toLocaleString('en-US');

/** The whole cell, or its first part where an explanation follows (after a space or a `;`). */
function expectStated(table: Map<string, string>, option: string, stated: string): void {
  expect(table.has(option)).toBe(true);
  const cell = table.get(option)!;
  expect(cell === stated || cell.startsWith(`${stated} `) || cell.startsWith(`${stated};`), cell).toBe(true);
}

describe("the README's defaults are the code's", () => {
  const table = defaultsTable(readme('../README.md'), '### Limiter options');

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
  ])('%s: %s', (option, stated) => expectStated(table, option, stated));
});

describe("the HTTP README's defaults are the code's", () => {
  const table = defaultsTable(readme('../packages/http/README.md'), '## API');

  it.each([
    ['`maxLimiters`', `\`${DEFAULT_MAX_LIMITERS}\``],
    ['`trustProxy`', `\`${DEFAULT_TRUST_PROXY}\``],
    ['`ipv6Subnet`', `\`${DEFAULT_IPV6_SUBNET}\``],
    ['`standardHeaders`', `\`'${DEFAULT_STANDARD_HEADERS}'\``],
    ['`degradedHeader`', `\`'${DEFAULT_DEGRADED_HEADER}'\``],
    ['`statusCode`', `\`${DEFAULT_STATUS_CODE}\``],
    ['`failClosedStatus`', `\`${DEFAULT_FAIL_CLOSED_STATUS}\``],
    ['`requestPropertyName`', `\`'${DEFAULT_REQUEST_PROPERTY}'\``],
  ])('%s: %s', (option, stated) => expectStated(table, option, stated));
});

describe("the README's figures in its prose are the code's, and both are the figures written here", () => {
  // Prose wraps where the editor pleases: a phrase may span two lines.
  const prose = readme('../README.md').replace(/\s+/g, ' ');

  // The figure is written out, not read from the constant: a table row built from the constant
  // follows it wherever it goes, and these numbers are promises (the fleet's bound leans on the
  // grace, a key's life on the margin, an idle limiter's cost on the beat) that a change to either
  // side must break here.
  it.each([
    [
      'the lease grace (MIN_LEASE_GRACE_MS)',
      250,
      MIN_LEASE_GRACE_MS,
      (ms: number) => `by a grace of at least ${ms} ms`,
    ],
    [
      'the key TTL margin (KEY_TTL_MARGIN_MS)',
      50,
      KEY_TTL_MARGIN_MS,
      (ms: number) => `0 to a day), plus ${ms} ms.`,
    ],
    [
      'the idle heartbeat (IDLE_BEAT_MS)',
      250,
      IDLE_BEAT_MS,
      (ms: number) => `an instance holding no key does so every ${ms} ms at most`,
    ],
  ])('%s: %i ms', (_, figure, constant, phrase) => {
    // Named, not matched against the whole README: a failure shows the phrase, not 40 kB of text.
    expect(prose.includes(phrase(figure)), phrase(figure)).toBe(true);
    expect(constant).toBe(figure);
  });
});

describe("the otel README's figures are the code's", () => {
  const prose = readme('../packages/otel/README.md').replace(/\s+/g, ' ');

  it('a RedisStore call carries at most coalesce.maxKeysPerCall keys, 32 by default', () => {
    const phrase = `(up to \`coalesce.maxKeysPerCall\` keys, ${DEFAULT_MAX_KEYS_PER_CALL} by default)`;
    expect(prose.includes(phrase), phrase).toBe(true);
    expect(DEFAULT_MAX_KEYS_PER_CALL).toBe(32);
  });
});
