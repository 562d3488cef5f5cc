import { startRedis, uniquePrefix } from '@tiered-limiter/test-harness';
import { describe, expect, it } from 'vitest';

describe('startRedis', () => {
  it('starts a throwaway server that can be killed, restarted on its port, and stopped', async () => {
    const server = await startRedis();
    try {
      const client = server.client({ maxRetriesPerRequest: 0, retryStrategy: () => 20 });
      expect(await client.ping()).toBe('PONG');
      if (server.source === 'env') return; // an external server is not the harness's to kill
      const key = `${uniquePrefix('harness')}:k`;
      await client.set(key, '1');
      await server.kill();
      await expect(client.get(key)).rejects.toThrow();
      await server.restart();
      await new Promise<void>((resolve) =>
        client.status === 'ready' ? resolve() : client.once('ready', resolve),
      );
      expect(await client.get(key)).toBeNull(); // nothing was saved: a restart starts empty
      expect(server.url).toBe(`redis://${server.host}:${server.port}`);
    } finally {
      await server.stop();
    }
  });
});
