import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createAdaptorServer, type HttpBindings } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import {
  createRateLimit,
  expressRateLimit,
  type FastifyRequestLike,
  type FetchRateLimitOptions,
  fastifyRateLimit,
  fetchRateLimit,
  type RateLimitOptions,
} from '@tiered-limiter/http';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { type Context, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { type Listening, listen } from './helpers.js';

/** Options as the contract writes them: functions of the request read its headers only. */
export type ContractOptions = RateLimitOptions<{ readonly headers: IncomingHttpHeaders }>;

/**
 * One framework, as the adapter contract drives it: an app with the same routes everywhere —
 * `GET /items`, `GET /report`, `POST /login`, `GET /status/:code` (answers that status),
 * `GET /other` — each answering `{ rateLimit }` (the request property the middleware set) as
 * JSON, and `GET /stall`, which never answers; limited by the adapter's middleware made from
 * `options`.
 */
export interface Adapter {
  readonly name: string;
  /** Makes the middleware, to check what it refuses; the app is not started. */
  make(options: ContractOptions): unknown;
  /** Starts the app on a loopback port. */
  start(options: ContractOptions, extra?: { customHandler?: boolean }): Promise<App>;
  /**
   * The status the server answers a path with a backslash in it before any app code runs, or
   * `undefined` when it routes such a path (and the middleware must limit it as the route).
   */
  readonly refusesBackslash?: number;
  /**
   * Whether a pipelined request whose response waits in Node's queue behind another's is seen as
   * failed when its client leaves. Node's own adapters watch the request's socket. A Fetch adapter
   * sees the `Request`'s signal and its own `finish` only: @hono/node-server aborts the signal when
   * the response closes, and a queued response never does, so the request counts by the status
   * its handler answered.
   */
  readonly seesQueuedClientLeave: boolean;
  /**
   * Whether a pipelined request queued behind another is seen as failed when its client left before
   * either decision came. Node's own adapters watch the socket. @hono/node-server on Node.js 24 and
   * 26 has aborted the queued request's signal by the time its decision lands, so `finish` counts
   * it as failed; on Node.js 20 and 22 it has not, and the request counts by its handler's status.
   */
  readonly seesQueuedLeaveBeforeDecision: boolean;
}

/** A running app of the contract. */
export interface App {
  readonly url: string;
  /** Requests the route handlers ran (the middleware let through), `/stall` included. */
  readonly handled: () => number;
  /**
   * `/stall` requests whose connection has closed. Counted by a listener added after the
   * middleware's own, so when it counts, the middleware has seen the close.
   */
  readonly abandoned: () => number;
}

/** The body of a denial by every adapter's `handler` in the contract: 418 and `custom`. */
export const CUSTOM = { status: 418, body: 'custom' };

const running: Listening[] = [];

/** Closes every app the contract started. */
export async function closeApps(): Promise<void> {
  await Promise.all(running.splice(0).map((app) => app.close()));
}

function statusOf(path: string): number {
  const match = /^\/status\/(\d{3})/.exec(path);
  return match ? Number(match[1]) : 200;
}

/** What one framework brings to the contract; `adapter` adds the rest, the same for all. */
interface Framework<Options extends { handler?: unknown }, Middleware> {
  readonly name: string;
  /** The package's middleware for the framework. */
  limit(options: Options): Middleware;
  /** The contract's `handler` in the framework's signature: answers `CUSTOM` and the denial's status. */
  readonly customHandler: NonNullable<Options['handler']>;
  /**
   * Serves the contract's app behind `middleware` on a loopback port; a route handler calls
   * `handle`, and `/stall` calls `stall` with Node's response (and never answers).
   */
  serve(middleware: Middleware, handle: () => void, stall: (res: ServerResponse) => void): Promise<Listening>;
}

/** The contract's `Adapter` for a framework: the handled count and closing the app are the same for all. */
function adapter<Options extends { handler?: unknown }, Middleware>(
  framework: Framework<Options, Middleware>,
  traits: Pick<Adapter, 'refusesBackslash' | 'seesQueuedClientLeave' | 'seesQueuedLeaveBeforeDecision'> = {
    seesQueuedClientLeave: true,
    seesQueuedLeaveBeforeDecision: true,
  },
): Adapter {
  const { name, limit, customHandler, serve } = framework;
  return {
    ...traits,
    name,
    make: (options) => limit(options as unknown as Options),
    async start(options, extra) {
      let handled = 0;
      let abandoned = 0;
      const middleware = limit({
        ...(options as unknown as Options),
        ...(extra?.customHandler ? { handler: customHandler } : {}),
      });
      const app = await serve(
        middleware,
        () => handled++,
        (res) => {
          handled++;
          res.once('close', () => abandoned++);
        },
      );
      running.push(app);
      return { url: app.url, handled: () => handled, abandoned: () => abandoned };
    },
  };
}

/** The contract's routes but `POST /login`, as paths the frameworks match. */
const GET_PATHS = ['/', '/items', '/report', '/status/:code', '/other'];

const nodeAdapter = adapter({
  name: 'node:http',
  limit: createRateLimit,
  customHandler: (_req, res, denial) => {
    res.statusCode = CUSTOM.status;
    res.end(`${CUSTOM.body} ${denial.status}`);
  },
  serve: (rateLimit, handle, stall) =>
    listen(
      createServer(async (req, res) => {
        try {
          if (!(await rateLimit(req, res))) return;
        } catch (error) {
          res.statusCode = 500;
          res.end(String(error));
          return;
        }
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        if (path === '/stall') return stall(res);
        handle();
        res.statusCode = statusOf(path);
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ rateLimit: (req as { rateLimit?: unknown }).rateLimit ?? null }));
      }),
    ),
});

function expressAdapter(name: string, express: typeof express5): Adapter {
  return adapter({
    name,
    limit: expressRateLimit<IncomingMessage>,
    customHandler: (_req, res, _next, denial) => {
      res.statusCode = CUSTOM.status;
      res.end(`${CUSTOM.body} ${denial.status}`);
    },
    serve: (rateLimit, handle, stall) => {
      const app = express();
      app.use(rateLimit);
      const answer = (req: express5.Request, res: express5.Response) => {
        handle();
        res
          .status(statusOf(req.path))
          .json({ rateLimit: (req as { rateLimit?: unknown }).rateLimit ?? null });
      };
      for (const path of GET_PATHS) app.get(path, answer);
      app.post('/login', answer);
      app.get('/stall', (_req, res) => stall(res));
      app.use(
        (error: Error, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
          res.status(500).send(error.message);
        },
      );
      return listen(createServer(app));
    },
  });
}

const fastifyAdapter = adapter({
  name: 'fastify',
  limit: fastifyRateLimit<FastifyRequestLike>,
  customHandler: (_request, reply, denial) => {
    reply.code(CUSTOM.status);
    reply.send(`${CUSTOM.body} ${denial.status}`);
  },
  serve: async (rateLimit, handle, stall) => {
    // Closes every connection on close, as `listen` does for the others: after an aborted request
    // the client may hold a connection that never sent one, which would hold close() for seconds.
    const app = Fastify({ forceCloseConnections: true });
    app.addHook('onRequest', rateLimit);
    const answer = async (
      request: { url: string; rateLimit?: unknown },
      reply: { code(n: number): void },
    ) => {
      handle();
      reply.code(statusOf(new URL(request.url, 'http://x').pathname));
      return { rateLimit: request.rateLimit ?? null };
    };
    for (const path of GET_PATHS) app.get(path, answer);
    app.post('/login', answer);
    // A synchronous handler that never sends: Fastify waits for the reply.
    app.get('/stall', (_request, reply) => {
      stall(reply.raw);
    });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    return { url, close: () => app.close() };
  },
});

/**
 * The contract's options for a Fetch adapter: its functions read `req.headers[name]` of Node's
 * message, so each is handed the `Request`'s headers as a plain record. The `Request` itself still
 * reaches `fetchRateLimit`, which is what the contract tests.
 */
function onFetchRequests(options: FetchRateLimitOptions): FetchRateLimitOptions {
  type AsNode = (req: { headers: Record<string, string> }, ...rest: unknown[]) => unknown;
  const viaHeaders = (fn: unknown) =>
    typeof fn === 'function'
      ? (request: Request, ...rest: unknown[]) =>
          (fn as AsNode)({ headers: Object.fromEntries(request.headers) }, ...rest)
      : fn;
  // What is no options object goes as it is: the option checks name it.
  if (options === null || typeof options !== 'object') return options;
  const wrapped: Record<string, unknown> = { ...options };
  for (const name of ['key', 'cost', 'skip', 'limit', 'message', 'onExceeded']) {
    if (name in options) wrapped[name] = viaHeaders(wrapped[name]);
  }
  return wrapped as FetchRateLimitOptions;
}

/** Hono on `@hono/node-server`: the Fetch adapter, as a Hono middleware written the way its TSDoc shows. */
const honoAdapter = adapter(
  {
    name: 'hono (fetch)',
    limit: (options: FetchRateLimitOptions) => fetchRateLimit(onFetchRequests(options)),
    customHandler: (_request, denial) =>
      new Response(`${CUSTOM.body} ${denial.status}`, { status: CUSTOM.status }),
    serve: async (rateLimit, handle, stall) => {
      const app = new Hono<{ Bindings: HttpBindings }>();
      app.use(async (c, next) => {
        const limited = await rateLimit(c.req.raw, getConnInfo(c).remote.address);
        if (limited.response) return limited.response;
        await next();
        c.res = limited.finish(c.res);
      });
      app.onError((error, c) => c.text(error.message, 500));
      const answer = (c: Context) => {
        handle();
        const rateLimit = (c.req.raw as { rateLimit?: unknown }).rateLimit ?? null;
        return c.json({ rateLimit }, statusOf(c.req.path) as ContentfulStatusCode);
      };
      for (const path of GET_PATHS) app.get(path, answer);
      app.post('/login', answer);
      // Never answers: the client's leaving aborts the request's signal.
      app.get('/stall', (c) => {
        stall(c.env.outgoing as ServerResponse);
        return new Promise<Response>(() => {});
      });
      return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    },
  },
  // @hono/node-server answers 400 to a path with a backslash ("Backslash in request path").
  {
    refusesBackslash: 400,
    seesQueuedClientLeave: false,
    seesQueuedLeaveBeforeDecision: Number(process.versions.node.split('.')[0]) >= 24,
  },
);

/** Every adapter the contract runs against. */
export const ADAPTERS: readonly Adapter[] = [
  nodeAdapter,
  expressAdapter('express 4', express4 as unknown as typeof express5),
  expressAdapter('express 5', express5),
  fastifyAdapter,
  honoAdapter,
];
