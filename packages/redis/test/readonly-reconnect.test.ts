/**
 * A node-redis plain client whose calls answer `READONLY` (a master demoted under its connection)
 * is made to reconnect with `QUIT`: the failed call is not sent again, one `QUIT` at a time and
 * one per `READONLY_RECONNECT_EVERY_MS`, none for other errors, a closed client, a client that
 * would not reconnect, or a Sentinel client. `test/failover.test.ts` runs it behind a real endpoint.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { nodeRedisAdapter } from '../src/client/node-redis.js';
import { READONLY_RECONNECT_EVERY_MS } from '../src/client/readonly-reconnect.js';

const SCRIPT = { lua: 'return 1', sha1: 'e0e1f9fabfc9d4800c877a703b823ac0578ff8db' };
const READONLY = "READONLY You can't write against a read only replica.";

/** A node-redis client double: answers every call with `reply`, and holds each QUIT until told. */
function fakeClient(
  reply: () => unknown,
  { isOpen = true, reconnectStrategy }: { isOpen?: boolean; reconnectStrategy?: unknown } = {},
) {
  const sent: string[][] = [];
  const quits: (() => void)[] = [];
  return {
    sent,
    quits,
    isOpen,
    options: { socket: { reconnectStrategy } },
    sendCommand(args: string[]): Promise<unknown> {
      sent.push(args);
      if (args[0] === 'QUIT') return new Promise((resolve) => quits.push(() => resolve('OK')));
      const value = reply();
      return value instanceof Error ? Promise.reject(value) : Promise.resolve(value);
    },
  };
}

const commands = (sent: readonly string[][], name: string) => sent.filter((args) => args[0] === name).length;

describe('node-redis adapter: reconnect on READONLY', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers the READONLY error, sends the call once, and QUITs once at a time and once per 500 ms', async () => {
    const client = fakeClient(() => new Error(READONLY));
    const adapter = nodeRedisAdapter(client);
    const replies = await adapter.evalScript(SCRIPT, [
      [1, 'k1', 1],
      [1, 'k2', 1],
    ]);
    expect(replies.map((r) => (r as Error).message)).toEqual([READONLY, READONLY]);
    expect(commands(client.sent, 'EVALSHA')).toBe(2);
    expect(commands(client.sent, 'EVAL')).toBe(0);
    expect(commands(client.sent, 'QUIT')).toBe(1);
    // Its QUIT still in flight past 500 ms (a slow server): more READONLY answers send no other.
    vi.advanceTimersByTime(READONLY_RECONNECT_EVERY_MS + 100);
    await adapter.evalScript(SCRIPT, [[1, 'k3', 1]]);
    expect(commands(client.sent, 'QUIT')).toBe(1);
    client.quits[0]!();
    await settle();
    await adapter.evalScript(SCRIPT, [[1, 'k4', 1]]);
    expect(commands(client.sent, 'QUIT')).toBe(2);
    // The second answered at once, but within 500 ms of it none (an endpoint not moved yet names the replica again).
    client.quits[1]!();
    await settle();
    vi.advanceTimersByTime(READONLY_RECONNECT_EVERY_MS - 1);
    await adapter.evalScript(SCRIPT, [[1, 'k5', 1]]);
    expect(commands(client.sent, 'QUIT')).toBe(2);
    vi.advanceTimersByTime(1);
    await adapter.evalScript(SCRIPT, [[1, 'k6', 1]]);
    expect(commands(client.sent, 'QUIT')).toBe(3);
    expect(commands(client.sent, 'EVALSHA')).toBe(6);
  });

  it('sends no QUIT for other errors, a closed client, or a client whose reconnectStrategy is false', async () => {
    const cases = [
      fakeClient(() => new Error('ERR something else')),
      fakeClient(() => new Error('Socket closed unexpectedly')),
      fakeClient(() => new Error(READONLY), { isOpen: false }),
      fakeClient(() => new Error(READONLY), { reconnectStrategy: false }),
    ];
    for (const client of cases) {
      const [reply] = await nodeRedisAdapter(client).evalScript(SCRIPT, [[1, 'k', 1]]);
      expect(reply).toBeInstanceOf(Error);
      expect(commands(client.sent, 'QUIT')).toBe(0);
      expect(commands(client.sent, 'EVALSHA')).toBe(1);
    }
  });

  it('leaves a Sentinel client alone: it finds the master itself', async () => {
    const sent: unknown[][] = [];
    const sentinel = {
      isOpen: true,
      getMasterNode: () => undefined,
      sendCommand(isReadonly: boolean, args: string[]): Promise<unknown> {
        sent.push([isReadonly, ...args]);
        return Promise.reject(new Error(READONLY));
      },
    };
    const [reply] = await nodeRedisAdapter(sentinel).evalScript(SCRIPT, [[1, 'k', 1]]);
    expect((reply as Error).message).toBe(READONLY);
    expect(sent.map((args) => args[1])).toEqual(['EVALSHA']);
  });
});

/** Lets the QUIT's settling run (a few microtasks). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}
