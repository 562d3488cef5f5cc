import type { Cluster, Redis } from 'ioredis';

/**
 * Seconds of CPU a Redis server has used, its main thread and every other (`used_cpu_user` plus
 * `used_cpu_sys` of `INFO cpu`), from the text of `INFO cpu`. Unlike `INFO commandstats`' `usec`,
 * which times commands alone, this includes reading requests and writing replies, and the expiry
 * of keys: all the server spends, so what a client costs every other user of it.
 */
export function parseServerCpuSeconds(info: string): number {
  const field = (name: string) => {
    const value = new RegExp(`^${name}:([0-9.]+)\\s*$`, 'm').exec(info)?.[1];
    if (value === undefined) throw new Error(`INFO cpu has no ${name}`);
    return Number(value);
  };
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** The CPU seconds of a server, or summed over every master of a Cluster (`parseServerCpuSeconds`). */
export async function readServerCpuSeconds(client: Redis | Cluster): Promise<number> {
  const servers = 'nodes' in client ? client.nodes('master') : [client];
  let seconds = 0;
  for (const server of servers) seconds += parseServerCpuSeconds(await server.info('cpu'));
  return seconds;
}
