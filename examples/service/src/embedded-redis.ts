import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How long `redis-server` may take to accept connections. */
const START_TIMEOUT_MS = 10_000;
/** How long it may take to exit on SIGTERM before it gets SIGKILL. */
const STOP_TIMEOUT_MS = 5_000;

/** A throwaway `redis-server` on a loopback port. */
export interface EmbeddedRedis {
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` from PATH on a free loopback port, saving nothing to disk, for trying
 * the service without a Redis of your own. Rejects, saying what to do, when there is none.
 */
export async function startEmbeddedRedis(): Promise<EmbeddedRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tl-example-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
  ];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'ignore'] });
  // However this process ends, short of SIGKILL, its Redis ends with it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  try {
    await ready(child);
    child.stdout?.resume(); // keep draining the log, or the server would block on a full pipe
  } catch (error) {
    child.kill('SIGKILL');
    process.off('exit', killOnExit);
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      'Could not start redis-server from PATH. Install Redis (apt-get install redis-server, brew install redis) ' +
        'or set REDIS_URL=redis://host:port.',
      { cause: error },
    );
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      process.off('exit', killOnExit);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function ready(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => finish(new Error(`not ready in ${START_TIMEOUT_MS} ms: ${output}`)),
      START_TIMEOUT_MS,
    );
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4096);
      if (output.includes('Ready to accept connections')) finish();
    };
    const onExit = (code: number | null) => finish(new Error(`redis-server exited (${code}): ${output}`));
    const onError = (error: Error) => finish(error);
    function finish(error?: Error) {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      if (error) reject(error);
      else resolve();
    }
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}
