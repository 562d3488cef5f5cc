import { EventEmitter } from 'node:events';
import { ConfigError } from '@tiered-limiter/core';
import { whenReady } from '@tiered-limiter/redis';
import { describe, expect, it } from 'vitest';

/** An ioredis-shaped client still connecting, that becomes ready when told. */
function connecting() {
  return Object.assign(new EventEmitter(), { status: 'connecting' });
}

describe('whenReady timeoutMs', () => {
  it.each([Number.POSITIVE_INFINITY, 2 ** 31, Number.NaN, -1, 0, 1.5, '1000'])(
    'refuses %s by a ConfigError naming timeoutMs, before waiting',
    async (timeoutMs) => {
      const client = connecting();
      await expect(whenReady(client, timeoutMs as number)).rejects.toBeInstanceOf(ConfigError);
      await expect(whenReady(client, timeoutMs as number)).rejects.toMatchObject({
        code: 'ERR_TL_CONFIG',
        option: 'timeoutMs',
      });
    },
  );

  it('waits the whole of a long timeout: a client ready 50 ms later resolves', async () => {
    const client = connecting();
    setTimeout(() => {
      client.status = 'ready';
      client.emit('ready');
    }, 50);
    await expect(whenReady(client, 2 ** 31 - 1)).resolves.toBeUndefined();
  });
});

// Each waiting call added a `ready` and an `end` listener of its own to the client: 11 callers of
// one client still connecting (a service making its limiters at start-up, each awaiting the
// shared client) made Node warn of a leak on the application's client. Each went as its wait
// ended: there was no leak.
describe('whenReady callers sharing one client', () => {
  it('12 of them raise no leak warning; each ends on its own timeout or with the client', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const client = connecting();
      const short = whenReady(client, 20);
      const waiting = Array.from({ length: 11 }, () => whenReady(client, 5_000));
      await expect(short).rejects.toThrow('client not ready in 20 ms');
      client.status = 'ready';
      client.emit('ready');
      await expect(Promise.all(waiting)).resolves.toHaveLength(11);
      expect([client.listenerCount('ready'), client.listenerCount('end')]).toEqual([0, 0]);
      await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on a later tick
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a client that ends fails every wait, and keeps no listener of ours', async () => {
    const client = connecting();
    const waiting = Array.from({ length: 3 }, () => whenReady(client, 5_000));
    client.emit('end');
    for (const wait of waiting) await expect(wait).rejects.toThrow('the client ended before it was ready');
    expect([client.listenerCount('ready'), client.listenerCount('end')]).toEqual([0, 0]);
  });
});
