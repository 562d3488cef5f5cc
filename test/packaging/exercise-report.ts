import { expect } from 'vitest';

/** One package's part of what `exerciseAll` (exercises.mjs) reports, in any runtime. */
export interface PackageReport {
  exports: Record<string, string>;
  constants: Record<string, string>;
  results: Record<string, string>;
  missing: string[];
  stale: string[];
}

/** What `consumer.mjs` or `consumer.cjs` writes: a `PackageReport` per package name. */
export type ExerciseReport = Record<string, PackageReport>;

/**
 * Holds one package's report to the exercise table's promise: every exported function and class
 * has a case (and every case an export), each case passed, and every function ran (core's
 * `internal` namespace, an object, too).
 */
export function expectEveryExportExercised(name: string, report: PackageReport): void {
  expect(Object.keys(report.exports).length).toBeGreaterThan(0);
  // A new export needs an entry in test/packaging/exercises.mjs; a removed one loses its entry.
  expect(report.missing, `exports of ${name} with no case in exercises.mjs`).toEqual([]);
  expect(report.stale, `cases in exercises.mjs for functions ${name} no longer exports`).toEqual([]);
  const failed = Object.entries(report.results).filter(([, outcome]) => outcome !== 'ok');
  expect(Object.fromEntries(failed)).toEqual({});
  expect(Object.keys(report.results).length).toBe(
    Object.entries(report.exports).filter(([export_, type]) => type === 'function' || export_ === 'internal')
      .length,
  );
}
