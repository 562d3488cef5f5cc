import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  createRateLimit,
  expressRateLimit,
  type FastifyRateLimitOptions,
  fastifyRateLimit,
  type RateLimitDenied,
  type RateLimitOptions,
} from '@tiered-limiter/http';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { type Listening, listen } from './helpers.js';

/** Options as the contract writes them: functions of the request read its headers only. */
export type ContractOptions = RateLimitOptions<{ readonly headers: IncomingHttpHeaders }>;

/**
 * One framework, as the adapter contract drives it: an app with the same routes everywhere —
 * `GET /items`, `GET /report`, `POST /login`, `GET /status/:code` (answers that status),
 * `GET /other` — each answering `{ rateLimit }` (the request property the middleware set) as
 * JSON, limited by the adapter's middleware made from `options`.
 */
export interface Adapter {
  readonly name: string;
  /** Makes the middleware, to check what it refuses; the app is not started. */
  make(options: ContractOptions): unknown;
  /** Starts the app on a loopback port. */
  start(options: ContractOptions, extra?: { customHandler?: boolean }): Promise<App>;
}

/** A running app of the contract. */
export interface App {
  readonly url: string;
  /** Requests the route handlers ran (the middleware let through). */
  readonly handled: () => number;
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

function nodeAdapter(): Adapter {
  return {
    name: 'node:http',
    make: (options) => createRateLimit(options as unknown as RateLimitOptions),
    async start(options, extra) {
      let handled = 0;
      const rateLimit = createRateLimit({
        ...(options as unknown as RateLimitOptions),
        ...(extra?.customHandler
          ? {
              handler: (_req: IncomingMessage, res: ServerResponse, denial: RateLimitDenied) => {
                res.statusCode = CUSTOM.status;
                res.end(`${CUSTOM.body} ${denial.status}`);
              },
            }
          : {}),
      });
      const server = createServer(async (req, res) => {
        try {
          if (!(await rateLimit(req, res))) return;
        } catch (error) {
          res.statusCode = 500;
          res.end(String(error));
          return;
        }
        handled++;
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        res.statusCode = statusOf(path);
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ rateLimit: (req as { rateLimit?: unknown }).rateLimit ?? null }));
      });
      const app = await listen(server);
      running.push(app);
      return { url: app.url, handled: () => handled };
    },
  };
}

function expressAdapter(name: string, express: typeof express5): Adapter {
  return {
    name,
    make: (options) => expressRateLimit(options as unknown as RateLimitOptions),
    async start(options, extra) {
      let handled = 0;
      const app = express();
      app.use(
        expressRateLimit({
          ...(options as unknown as RateLimitOptions),
          ...(extra?.customHandler
            ? {
                handler: (_req, res, _next, denial) => {
                  res.statusCode = CUSTOM.status;
                  res.end(`${CUSTOM.body} ${denial.status}`);
                },
              }
            : {}),
        }),
      );
      const answer = (req: express5.Request, res: express5.Response) => {
        handled++;
        res
          .status(statusOf(req.path))
          .json({ rateLimit: (req as { rateLimit?: unknown }).rateLimit ?? null });
      };
      for (const path of ['/', '/items', '/report', '/status/:code', '/other']) app.get(path, answer);
      app.post('/login', answer);
      app.use(
        (error: Error, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
          res.status(500).send(error.message);
        },
      );
      const server = await listen(createServer(app));
      running.push(server);
      return { url: server.url, handled: () => handled };
    },
  };
}

function fastifyAdapter(): Adapter {
  return {
    name: 'fastify',
    make: (options) => fastifyRateLimit(options as unknown as FastifyRateLimitOptions),
    async start(options, extra) {
      let handled = 0;
      const app = Fastify();
      app.addHook(
        'onRequest',
        fastifyRateLimit({
          ...(options as unknown as FastifyRateLimitOptions),
          ...(extra?.customHandler
            ? {
                handler: (_request, reply, denial) => {
                  reply.code(CUSTOM.status);
                  reply.send(`${CUSTOM.body} ${denial.status}`);
                },
              }
            : {}),
        }),
      );
      const answer = async (
        request: { url: string; rateLimit?: unknown },
        reply: { code(n: number): void },
      ) => {
        handled++;
        reply.code(statusOf(new URL(request.url, 'http://x').pathname));
        return { rateLimit: request.rateLimit ?? null };
      };
      for (const path of ['/', '/items', '/report', '/status/:code', '/other']) app.get(path, answer);
      app.post('/login', answer);
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      running.push({ url, close: () => app.close() });
      return { url, handled: () => handled };
    },
  };
}

/** Every adapter the contract runs against. */
export const ADAPTERS: readonly Adapter[] = [
  nodeAdapter(),
  expressAdapter('express 4', express4 as unknown as typeof express5),
  expressAdapter('express 5', express5),
  fastifyAdapter(),
];
