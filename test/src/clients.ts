import { whenReady as redisWhenReady } from '@tiered-limiter/redis';
import type { Cluster, Redis } from 'ioredis';
import { SERVER_START_TIMEOUT_MS } from './processes.js';

/**
 * `whenReady` of `@tiered-limiter/redis` with the harness's start timeout: resolves once
 * `client` (ioredis, iovalkey or node-redis; server or Cluster) can take commands.
 */
export function whenReady(client: object, timeoutMs = SERVER_START_TIMEOUT_MS): Promise<void> {
  return redisWhenReady(client, timeoutMs);
}

/** A client the harness can close: ioredis and iovalkey `disconnect()`, node-redis `destroy()`. */
export type Closable = { disconnect(): unknown } | { destroy(): unknown };

/** The clients a server handle made, so that its `stop()` can disconnect them all. */
export class ClientSet {
  readonly #clients = new Set<Closable>();

  add<C extends Redis | Cluster | (Closable & { on(event: 'error', listener: () => void): unknown })>(
    client: C,
  ): C {
    // A test that stops a server on purpose sees the failures through its commands; without a
    // listener, the client's 'error' events would be unhandled and fail the run.
    client.on('error', () => {});
    this.#clients.add(client);
    return client;
  }

  disconnectAll(): void {
    for (const client of this.#clients) closeClient(client);
    this.#clients.clear();
  }
}

/** Closes a client of any of the three libraries at once, whatever it is doing. */
export function closeClient(client: Closable): void {
  try {
    if ('disconnect' in client && typeof client.disconnect === 'function' && !('destroy' in client)) {
      client.disconnect();
    } else if ('destroy' in client) client.destroy();
    else client.disconnect();
  } catch {
    // already closed
  }
}
