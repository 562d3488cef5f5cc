import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** Every server the harness starts listens here, and only here. */
export const LOOPBACK = '127.0.0.1';

/** How long a server may take to say it is ready before the harness gives up on it. */
export const SERVER_START_TIMEOUT_MS = 15_000;
/** How long a server may take to exit on SIGTERM before it gets SIGKILL. */
export const SERVER_STOP_TIMEOUT_MS = 5_000;

const OUTPUT_KEPT = 8_192;
const running = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let exitHooked = false;

/**
 * The safety net behind every `stop()`: when the test process exits, however it exits short of
 * SIGKILL, each server still running is killed and each temporary directory removed.
 */
function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once('exit', () => {
    for (const child of running) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
}

/** The path of an executable on PATH, or `undefined`. */
export function findBinary(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const path = join(dir, name);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A new directory under the OS's temporary directory, removed by `removeTempDir` or at exit. */
export function makeTempDir(label: string): string {
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), `tl-${label}-`));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/** A loopback port that was free a moment ago (the OS's pick). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

/** Whether `port` can be bound on loopback right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, LOOPBACK, () => server.close(() => resolve(true)));
  });
}

/** How a `RedisProcess` is started beyond its port and directory. */
export interface RedisProcessOptions {
  /** A config file, passed first (a Sentinel needs one it can rewrite). */
  readonly configFile?: string;
  /** The line that says the server is ready. @default 'Ready to accept connections' */
  readonly readyLine?: string;
}

/**
 * One `redis-server` process on a loopback port, with its own directory and nothing saved to
 * disk. It can be stopped, killed and started again on the same port.
 */
export class RedisProcess {
  readonly binary: string;
  readonly port: number;
  readonly dir: string;
  readonly #extraArgs: readonly string[];
  readonly #options: RedisProcessOptions;
  #child: ChildProcess | undefined;
  #output = '';

  constructor(
    binary: string,
    port: number,
    dir: string,
    extraArgs: readonly string[] = [],
    options: RedisProcessOptions = {},
  ) {
    this.binary = binary;
    this.port = port;
    this.dir = dir;
    this.#extraArgs = extraArgs;
    this.#options = options;
  }

  get running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** What the server last printed (the end of it), for error messages. */
  get output(): string {
    return this.#output;
  }

  /** Starts the server and resolves once it accepts connections; rejects if it exits first. */
  start(): Promise<void> {
    if (this.running) return Promise.resolve();
    hookExit();
    this.#output = '';
    const args = [
      ...(this.#options.configFile === undefined ? [] : [this.#options.configFile]),
      '--port',
      String(this.port),
      '--bind',
      LOOPBACK,
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      this.dir,
      '--daemonize',
      'no',
      ...this.#extraArgs,
    ];
    const child = spawn(this.binary, args, { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        this.#output = (this.#output + chunk.toString()).slice(-OUTPUT_KEPT);
        if (this.#output.includes(this.#options.readyLine ?? 'Ready to accept connections')) settle();
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('error', (error) => settle(error));
      child.once('exit', (code, signal) =>
        settle(new Error(`redis-server on port ${this.port} exited (${code ?? signal}):\n${this.#output}`)),
      );
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        settle(new Error(`redis-server on port ${this.port} not ready in ${SERVER_START_TIMEOUT_MS} ms`));
      }, SERVER_START_TIMEOUT_MS);
    });
  }

  /** Sends `signal` and waits for the exit; SIGKILL after `SERVER_STOP_TIMEOUT_MS`. */
  stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), SERVER_STOP_TIMEOUT_MS);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill(signal);
    });
  }
}
