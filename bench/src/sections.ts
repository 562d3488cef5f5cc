import type { AnySection } from './section.js';

/**
 * Every part of the bench, in the order it runs and reports, each loaded on demand (a row's
 * process loads only its own). A new kind of row is a new entry.
 */
export const SECTION_LOADERS: Readonly<Record<string, () => Promise<AnySection>>> = {
  micro: async () => (await import('./micro.js')).microSection,
  neighbours: async () => (await import('./neighbours.js')).neighboursSection,
  throughput: async () => (await import('./throughput.js')).throughputSection,
  keys: async () => (await import('./keys.js')).keysSection,
  cold: async () => (await import('./cold.js')).coldSection,
  cluster: async () => (await import('./cluster.js')).clusterSection,
  load: async () => (await import('./load.js')).loadSection,
  accuracy: async () => (await import('./accuracy.js')).accuracySection,
  fleet: async () => (await import('./fleet-sim.js')).fleetSection,
};

export function loadSections(): Promise<AnySection[]> {
  return Promise.all(Object.values(SECTION_LOADERS).map((load) => load()));
}
