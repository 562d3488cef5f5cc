import type { FnOptions } from 'tinybench';

/** Adds one task to the run, unless `--filter` leaves it out. */
export type AddTask = (name: string, fn: () => unknown, options?: FnOptions) => void;

/**
 * One file's worth of tasks (`local.ts`, later the Redis tiers). It adds its tasks with `add`,
 * named `<limiter> · <scenario>`, and may return (or resolve to) a function that releases what
 * it set up, such as connections, once every task has run.
 */
export type Suite = (add: AddTask) => unknown;

/**
 * Where tasks put their results so the JIT cannot drop the work as unused. `main` reads it once
 * at the end.
 */
export const sink: { value: unknown } = { value: undefined };
