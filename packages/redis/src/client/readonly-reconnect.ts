/** Least time between two reconnects that `READONLY` replies ask of a node-redis client. */
export const READONLY_RECONNECT_EVERY_MS = 500;

/** What a reconnect uses of a node-redis v5 client (`createClient`). */
export interface ReconnectableNodeRedis {
  sendCommand(args: string[]): Promise<unknown>;
  readonly isOpen: boolean;
  readonly options?: { readonly socket?: { readonly reconnectStrategy?: unknown } };
}

/** Whether `error` is a demoted master's refusal of a write. */
export function isReadonlyError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('READONLY');
}

/**
 * A reconnect of a node-redis client whose connection reached a master demoted under it (its
 * writes answer `READONLY`), for node-redis has no `reconnectOnError` as ioredis does. Behind one
 * endpoint (a managed service's DNS name, a virtual IP, a proxy) the connection otherwise stays
 * on the replica for as long as it lives: every call by the policy, for good.
 *
 * It sends `QUIT`: the server answers and closes the connection, which node-redis takes as any
 * dropped connection: it rejects what it had written after the `QUIT` (Redis ran none of it) and
 * reconnects by its own `reconnectStrategy`, to whatever the endpoint names now. Nothing is sent
 * again. `destroy()` and `connect()` would do it too, but `destroy()` also drops the client's
 * metrics registration and credentials subscription for good and emits `end`, as when the
 * application closes it. At most one `QUIT` in flight and one per `READONLY_RECONNECT_EVERY_MS`
 * (calls already sent answer `READONLY` too; an endpoint not yet moved names the replica again);
 * none for a closed client, nor for one whose `reconnectStrategy` is `false`, which would stay
 * closed.
 */
export function readonlyReconnector(client: ReconnectableNodeRedis): () => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  let inFlight = false;
  return () => {
    const now = performance.now();
    if (inFlight || now - lastAt < READONLY_RECONNECT_EVERY_MS) return;
    if (!client.isOpen || client.options?.socket?.reconnectStrategy === false) return;
    lastAt = now;
    inFlight = true;
    client
      .sendCommand(['QUIT'])
      .catch(() => {})
      .finally(() => {
        inFlight = false;
      });
  };
}
