import { ArgumentError, ConfigError } from '@tiered-limiter/core';
import type { afterAll, describe, expect, it } from 'vitest';

/**
 * The values every option is tried with (issue 9 §3): absent, null, the numbers a typo or a unit
 * slip makes, a number past exact integers, a number as text, and the wrong kinds of thing.
 */
export const BAD_VALUES: readonly unknown[] = [
  undefined,
  null,
  0,
  -1,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  1.5,
  2 ** 53,
  '10',
  {},
  [],
  Symbol('bad'),
];

/**
 * What an option holds, which decides the values it must refuse whatever its range: a number
 * option refuses text, objects, NaN and ±∞; an integer also 1.5; a boolean everything that is not
 * one; and so on. Values inside the kind (0, −1, 2^53 for a number) are the option's own business:
 * built, the limiter must still limit; refused, the error must name the option.
 */
export type OptionKind =
  | 'integer'
  | 'number'
  | 'boolean'
  | 'object'
  | 'array'
  | 'function'
  | 'clock'
  | 'limits'
  | 'string'
  | 'choice'
  | 'body';

/** How one option is tried. */
export interface OptionCase {
  readonly kind: OptionKind;
  /** `undefined` must be refused too. */
  readonly required?: boolean;
  /** More values to try, judged by the kind (a clock whose `now()` returns NaN, a controller for a signal). */
  readonly extra?: readonly unknown[];
  /** Values that must build a limiter that limits (a copy of a valid limit). */
  readonly valid?: readonly unknown[];
  /** Options set beside this one for its cases (a `fallback.*` option needs `failurePolicy: 'local'`). */
  readonly with?: () => Record<string, unknown>;
  /** Where the option sits, when its name is no dotted path (`routes['/p']` is `['routes', '/p']`). */
  readonly path?: readonly string[];
  /** Other names a refusal may give (an absent `limit` is refused as the missing `limiter`). */
  readonly alsoNamed?: readonly string[];
}

/**
 * One case per option of `T`, every option listed: a new option that is not added here fails the
 * type check (`satisfies OptionTable<…>`), so it cannot go untried.
 */
export type OptionTable<T> = { readonly [K in keyof Required<T> & string]: OptionCase };

/** `table`'s cases under `parent`: `nest('lease', { ttlMs })` is `{ 'lease.ttlMs' }`. */
export function nest(
  parent: string,
  table: Readonly<Record<string, OptionCase>>,
): Record<string, OptionCase> {
  const out: Record<string, OptionCase> = {};
  for (const [name, option] of Object.entries(table)) out[`${parent}.${name}`] = option;
  return out;
}

/** Whether an option of `kind` must refuse `value` (it is not of the kind at all). */
export function mustRefuse(option: OptionCase, value: unknown): boolean {
  if (value === undefined) return option.required === true;
  if (value === null) return option.required === true;
  const isNumber = typeof value === 'number';
  switch (option.kind) {
    case 'integer':
      return !isNumber || !Number.isInteger(value);
    case 'number':
      return !isNumber || !Number.isFinite(value);
    case 'boolean':
      return typeof value !== 'boolean';
    case 'object':
      return typeof value !== 'object' || Array.isArray(value);
    case 'array':
      return !Array.isArray(value);
    case 'function':
    case 'clock':
    case 'limits':
    case 'choice':
      return true;
    case 'string':
      return typeof value !== 'string';
    case 'body':
      return isNumber || typeof value === 'symbol';
  }
}

/** How a value reads in a test name. */
export function show(value: unknown): string {
  if (typeof value === 'symbol') return 'Symbol';
  if (typeof value === 'number' || value === undefined || value === null) return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.length === 0 ? '' : '…'}]`;
  if (typeof value === 'function') return 'function';
  const name = (value as object).constructor?.name;
  if (name !== undefined && name !== 'Object') return name;
  const fields = Object.entries(value as object).map(([k, v]) => `${k}: ${show(v)}`);
  return `{${fields.join(', ')}}`;
}

/** Sets `path` (dotted, or its segments) in a copy of `options`, copying each object on the way down. */
export function withOption(
  options: Record<string, unknown>,
  path: string | readonly string[],
  value: unknown,
): Record<string, unknown> {
  const [head, ...rest] = (typeof path === 'string' ? path.split('.') : path) as [string, ...string[]];
  const out = { ...options };
  if (rest.length === 0) {
    out[head] = value;
    return out;
  }
  const inner = out[head];
  const base = inner !== null && typeof inner === 'object' ? (inner as Record<string, unknown>) : {};
  out[head] = withOption(base, rest, value);
  return out;
}

/** The values `option` is tried with: `BAD_VALUES`, its extras and its valid ones. */
export function valuesOf(option: OptionCase): unknown[] {
  return [...BAD_VALUES, ...(option.extra ?? []), ...(option.valid ?? [])];
}

/**
 * Asserts `error` is the typed error a bad `name` deserves: a `ConfigError` (`argument: false`) or
 * an `ArgumentError` (`argument: true`) with an `ERR_TL_*` code whose `option`/`argument` is `name`
 * or one of its fields (`routes['/p'].limiter` names `routes['/p']`), or one of `alsoNamed`.
 */
export function expectNamed(
  error: unknown,
  name: string,
  options: { argument?: boolean; alsoNamed?: readonly string[] } = {},
): void {
  const type = options.argument ? ArgumentError : ConfigError;
  if (!(error instanceof type)) {
    throw new Error(`expected a ${type.name} naming \`${name}\`, got ${String(error)}`, { cause: error });
  }
  if (!/^ERR_TL_/.test(error.code)) throw new Error(`expected an ERR_TL_* code, got ${error.code}`);
  const named = error instanceof ConfigError ? error.option : (error as ArgumentError).argument;
  const names = [name, ...(options.alsoNamed ?? [])];
  const ok = names.some((n) => named === n || named.startsWith(`${n}.`) || named.startsWith(`${n}[`));
  if (!ok) throw new Error(`expected the error to name \`${names.join('` or `')}\`, it named \`${named}\``);
}

/** The outcome of one try: built (and shown to limit), or refused with a typed error. */
export type Outcome = 'built' | 'refused';

/**
 * Tries `value` for option `path`: `build` makes the subject from the options (and may throw);
 * `prove` shows a built subject still limits (a few decisions with a tiny limit, one denied) and
 * releases it. A value of the wrong kind must be refused; a refusal must be typed and named.
 */
export async function tryOption<B>(
  path: string,
  option: OptionCase,
  value: unknown,
  base: Record<string, unknown>,
  build: (options: Record<string, unknown>) => B,
  prove: (built: B) => Promise<void>,
  argument = false,
): Promise<Outcome> {
  const options = withOption({ ...base, ...option.with?.() }, option.path ?? path, value);
  let built: B;
  try {
    built = build(options);
  } catch (error) {
    expectNamed(error, path, { argument, alsoNamed: option.alsoNamed ?? [] });
    if (option.valid?.includes(value)) throw new Error(`\`${path}\`: ${show(value)} is valid, yet refused`);
    return 'refused';
  }
  await prove(built);
  if (mustRefuse(option, value) && !option.valid?.includes(value)) {
    throw new Error(`\`${path}\`: ${show(value)} is not a ${option.kind}, yet it was accepted`);
  }
  return 'built';
}

/** Counts cases across a file, for the report (issue 9 asks for the property test's case count). */
export class CaseCount {
  built = 0;
  refused = 0;

  add(outcome: Outcome): void {
    this[outcome]++;
  }

  get total(): number {
    return this.built + this.refused;
  }
}

/** What the option matrix tries options on: fresh base options, how to build, how to prove it limits. */
export interface Subject<B> {
  /** Fresh valid options (a new store, a new clock) for each case. */
  readonly base: () => Record<string, unknown>;
  /** Builds the subject from options, or throws. */
  readonly build: (options: Record<string, unknown>) => B;
  /** Shows the subject still limits (a denial among a few decisions) and releases it. */
  readonly prove: (built: B) => Promise<void>;
  /** Refusals are `ArgumentError`s (call arguments, `acquire` options) rather than `ConfigError`s. */
  readonly argument?: boolean;
}

/**
 * Tries every value on option `path` of `subject`; resolves what went wrong, one line per value
 * (an empty list when every value was refused by name or built a limiter that limits).
 */
export async function tryEveryValue<B>(
  subject: Subject<B>,
  path: string,
  option: OptionCase,
  count?: CaseCount,
): Promise<string[]> {
  const failures: string[] = [];
  for (const value of valuesOf(option)) {
    try {
      const outcome = await tryOption(
        path,
        option,
        value,
        subject.base(),
        subject.build,
        subject.prove,
        subject.argument,
      );
      count?.add(outcome);
    } catch (error) {
      failures.push(`${path} = ${show(value)}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return failures;
}

/**
 * Tries every value as the whole options argument (`new RequestLimiter(null)`): refused with a
 * typed error naming `options` (or what `alsoNamed` allows), or built and shown to limit. An options
 * object is always required unless `optional` (`new MemoryStore()` takes none).
 */
export async function tryWholeOptions<B>(
  subject: Subject<B>,
  count?: CaseCount,
  optional = false,
  alsoNamed: readonly string[] = [],
): Promise<string[]> {
  const option: OptionCase = { kind: 'object', required: !optional, alsoNamed };
  const failures: string[] = [];
  for (const value of BAD_VALUES) {
    try {
      let built: B;
      try {
        built = subject.build(value as Record<string, unknown>);
      } catch (error) {
        // An object (an array too) is refused for the first field it lacks, by that field's name.
        const fields = value !== null && typeof value === 'object';
        const named = fields ? [...alsoNamed, namedBy(error)] : alsoNamed;
        expectNamed(error, 'options', { argument: subject.argument ?? false, alsoNamed: named });
        count?.add('refused');
        continue;
      }
      await subject.prove(built);
      if (mustRefuse(option, value))
        throw new Error(`${show(value)} is no options object, yet it was accepted`);
      count?.add('built');
    } catch (error) {
      failures.push(`options = ${show(value)}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return failures;
}

function namedBy(error: unknown): string {
  if (error instanceof ConfigError) return error.option;
  if (error instanceof ArgumentError) return error.argument;
  return 'options';
}

/** One option set to one value, as a combination picks it. */
export interface Pick {
  readonly path: string;
  readonly value: unknown;
}

/**
 * Sets several options at once (each with the options its case needs beside it): the subject is
 * refused with a typed error naming one of them (or an option inside or around one of them), or
 * it builds and still limits; and if any value is of the wrong kind, it must be refused.
 */
export async function tryCombination<B>(
  subject: Subject<B>,
  table: Readonly<Record<string, OptionCase>>,
  picks: readonly Pick[],
): Promise<Outcome> {
  let options = subject.base();
  for (const { path } of picks) options = { ...options, ...table[path]!.with?.() };
  for (const { path, value } of picks) options = withOption(options, table[path]!.path ?? path, value);
  let built: B;
  try {
    built = subject.build(options);
  } catch (error) {
    const named = namedBy(error);
    const near = (path: string) =>
      named === path || named.startsWith(`${path}.`) || path.startsWith(`${named}.`);
    const names = picks.flatMap(({ path }) => [path, ...(table[path]!.alsoNamed ?? [])]);
    expectNamed(error, named, { argument: subject.argument ?? false });
    if (!names.some(near)) throw new Error(`refused for \`${named}\`, which is none of ${names.join(', ')}`);
    return 'refused';
  }
  await subject.prove(built);
  const wrong = picks.find(
    ({ path, value }) => mustRefuse(table[path]!, value) && !table[path]!.valid?.includes(value),
  );
  if (wrong !== undefined)
    throw new Error(`\`${wrong.path}\` = ${show(wrong.value)} was accepted among ${picks.length}`);
  return 'built';
}

/**
 * The option matrix's tests for one subject, as `[name, run]` rows for vitest's `it.each`: one
 * row per option of `table` (every value of it), and one for the options argument itself unless
 * `whole` is `false`. `run` resolves what went wrong, one line per value: an empty list passes.
 */
export function optionTests<B>(
  table: Readonly<Record<string, OptionCase>>,
  subject: Subject<B>,
  count?: CaseCount,
  whole: { optional: boolean } | false = { optional: false },
): [string, () => Promise<string[]>][] {
  const rows: [string, () => Promise<string[]>][] = Object.keys(table).map((path) => [
    path,
    () => tryEveryValue(subject, path, table[path]!, count),
  ]);
  if (whole !== false) {
    rows.push(['the options argument itself', () => tryWholeOptions(subject, count, whole.optional)]);
  }
  return rows;
}

/** The parts of vitest the option matrix uses, passed in: the harness never imports vitest itself. */
export interface VitestApi {
  readonly describe: typeof describe;
  readonly it: typeof it;
  readonly expect: typeof expect;
  readonly afterAll: typeof afterAll;
}

/**
 * One test file's option matrix: `describeOptions(name, table, subject)` adds one test per option
 * of `table` (and one for the options object unless `whole` is false), and the file's case count
 * is logged once at the end, as `option matrix (label): N cases, B built, R refused`.
 */
export function optionMatrix(label: string, vitest: VitestApi) {
  const count = new CaseCount();
  vitest.afterAll(() => {
    console.log(
      `option matrix (${label}): ${count.total} cases, ${count.built} built, ${count.refused} refused`,
    );
  });
  return {
    count,
    describeOptions<B>(
      name: string,
      table: Readonly<Record<string, OptionCase>>,
      subject: Subject<B>,
      whole?: { optional: boolean } | false,
    ): void {
      vitest.describe(name, () => {
        vitest.it.each(optionTests(table, subject, count, whole))('%s', async (_, run) => {
          vitest.expect(await run()).toEqual([]);
        });
      });
    },
  };
}
