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
