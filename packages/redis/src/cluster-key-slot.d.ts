/** cluster-key-slot (a dependency of ioredis) ships no types: the CRC16 slot of a key, 0–16383. */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string | Buffer): number;
}
