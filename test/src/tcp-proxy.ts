import { createConnection, createServer, type Socket } from 'node:net';
import { LOOPBACK } from './processes.js';

/** A TCP endpoint in front of a server, as a DNS name or virtual IP is in front of a master. */
export interface TcpProxy {
  readonly host: string;
  readonly port: number;
  /** Where new connections go from now on; open ones keep their server, as after a DNS change. */
  retarget(to: { readonly host: string; readonly port: number }): void;
  /** Closes the endpoint and every connection through it. */
  close(): Promise<void>;
}

/**
 * Starts a TCP proxy on a free loopback port that pipes each connection to `to`. A failover test
 * points clients at it as they would point at a managed service's endpoint, and retargets it when
 * the master changes: a connection opened before then still reaches the old, demoted master.
 * With `delayMs`, every chunk is passed on that long after it arrived, each way, in order: a server
 * that answers, slowly (a round trip of twice the delay and more).
 */
export async function startTcpProxy(
  to: { readonly host: string; readonly port: number },
  { delayMs = 0 }: { readonly delayMs?: number } = {},
): Promise<TcpProxy> {
  let target = to;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    if (delayMs > 0) {
      client.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delayMs));
      upstream.on('data', (chunk) => setTimeout(() => client.write(chunk), delayMs));
    } else {
      client.pipe(upstream);
      upstream.pipe(client);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    host: LOOPBACK,
    port,
    retarget: (next) => {
      target = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
