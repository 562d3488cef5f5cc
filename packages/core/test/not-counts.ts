/** A value a test passes in, with how an error message shows it. */
export type Shown = [value: unknown, shown: string];

/**
 * Values that are no count (a whole number from 1 up), each with how an error message shows it:
 * 0, -1, the `fraction` given, NaN and Infinity, then the test's `more`. Shared by the tests of
 * every check of a count, so that each refuses at least these.
 */
export function notCounts(fraction: Shown, ...more: Shown[]): Shown[] {
  return [
    [0, '0'],
    [-1, '-1'],
    fraction,
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    ...more,
  ];
}
