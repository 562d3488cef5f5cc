import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const SERVICE_DIR = fileURLToPath(new URL('../../examples/service', import.meta.url));
const START_TIMEOUT_MS = 45_000;
/** How long the service may take to exit on a signal before it gets SIGKILL. */
const STOP_TIMEOUT_MS = 10_000;
/** How much of the service's stdout and stderr is kept, from the end. */
const OUTPUT_KEPT = 16_384;

/** One HTTP reply of the example service, with the headers the tests read. */
export interface ServiceReply {
  readonly status: number;
  /** `ratelimit*`, `retry-after` and `content-type`, by lower-case name. */
  readonly headers: Record<string, string>;
  readonly body: string;
  /** The pid of the worker that answered (`X-Served-By`). */
  readonly worker: string;
}

/** The example service (examples/service) running in a process of its own, from `startExampleService`. */
export interface ExampleService {
  /** `http://127.0.0.1:PORT`. */
  readonly base: string;
  /** The service's stdout and stderr so far (the last 16 KB). */
  output(): string;
  /** One request on a new connection, so that the cluster hands it to any of its workers. */
  call(path: string, method?: string): Promise<ServiceReply>;
  /**
   * Sends `signal` to the primary and resolves its exit code (null if it had to be SIGKILLed after
   * 10 s). Resolves at once if it has exited.
   */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Where and how `startExampleService` runs the service. */
export interface ExampleServiceOptions {
  /** The Redis the workers share (`REDIS_URL`). */
  readonly redisUrl: string;
  /** Worker processes (`WORKERS`). */
  readonly workers: number;
  /** The start of every Redis key (`LIMIT_PREFIX`). */
  readonly prefix: string;
}

/**
 * Starts `src/main.ts` of the example service on 127.0.0.1 and a free port, and resolves once it
 * prints `listening http://127.0.0.1:PORT`; rejects if it exits first or does not listen within
 * 45 s. Every limiter's store timeout is 1 s (`STORE_TIMEOUT_MS`): a loaded machine's slow reply
 * must not pass for Redis being away (a 503 on a closed route, a degraded header on the open one),
 * and with Redis stopped, calls fail at once whatever it is.
 */
export function startExampleService(options: ExampleServiceOptions): Promise<ExampleService> {
  const env = {
    REDIS_URL: options.redisUrl,
    HOST: '127.0.0.1',
    PORT: '0',
    WORKERS: String(options.workers),
    LIMIT_PREFIX: options.prefix,
    STORE_TIMEOUT_MS: '1000',
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: SERVICE_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service not listening in ${START_TIMEOUT_MS} ms:\n${output}`));
    }, START_TIMEOUT_MS);
    const onData = () => {
      const match = /^listening (http:\/\/127\.0\.0\.1:\d+)$/m.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.off('exit', onExit);
      resolve(service(child, match[1]!, () => output));
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${signal ?? code}) before listening:\n${output}`));
    };
    child.stdout!.on('data', onData);
    child.once('exit', onExit);
  });
}

function service(child: ChildProcess, base: string, output: () => string): ExampleService {
  return {
    base,
    output,
    async call(path, method = 'GET') {
      const response = await fetch(base + path, { method, headers: { connection: 'close' } });
      const body = await response.text();
      const headers: Record<string, string> = {};
      for (const [name, value] of response.headers) {
        if (/^(ratelimit|retry-after|content-type)/.test(name)) headers[name] = value;
      }
      return { status: response.status, headers, body, worker: response.headers.get('x-served-by') ?? '' };
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      const [code] = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
