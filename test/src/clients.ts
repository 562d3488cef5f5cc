import type { Cluster, Redis } from 'ioredis';
import { SERVER_START_TIMEOUT_MS } from './processes.js';

/**
 * Resolves once `client` is ready for commands (needed with `enableOfflineQueue: false`, where a
 * command sent before then fails at once); rejects if it ends or takes longer than `timeoutMs`.
 * For a `Cluster` it also opens the connection to every master: those open lazily, and with the
 * Cluster's offline queue off, a command for a master whose connection is still opening fails.
 */
export async function whenReady(client: Redis | Cluster, timeoutMs = SERVER_START_TIMEOUT_MS): Promise<void> {
  await statusReady(client, timeoutMs);
  if ('nodes' in client) await Promise.all(client.nodes('master').map((node) => node.ping()));
}

function statusReady(client: Redis | Cluster, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = (error?: Error) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('end', onEnd);
      if (error) reject(error);
      else resolve();
    };
    const onReady = () => done();
    const onEnd = () => done(new Error('the client ended before it was ready'));
    const timer = setTimeout(() => done(new Error(`client not ready in ${timeoutMs} ms`)), timeoutMs);
    client.once('ready', onReady);
    client.once('end', onEnd);
  });
}

/** The clients a server handle made, so that its `stop()` can disconnect them all. */
export class ClientSet {
  readonly #clients = new Set<Redis | Cluster>();

  add<C extends Redis | Cluster>(client: C): C {
    // A test that stops a server on purpose sees the failures through its commands; without a
    // listener, the client's 'error' events would be unhandled and fail the run.
    client.on('error', () => {});
    this.#clients.add(client);
    return client;
  }

  disconnectAll(): void {
    for (const client of this.#clients) client.disconnect();
    this.#clients.clear();
  }
}
