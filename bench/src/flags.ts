import { parseArgs } from 'node:util';

export interface Flags {
  readonly quick: boolean;
  readonly filter: string | undefined;
  readonly json: boolean;
  /** Where to write latest.{md,json,svg}; undefined: results/ after a full unfiltered run, else nowhere. */
  readonly out: string | undefined;
  readonly processes: number;
}

export const USAGE = `Usage: pnpm bench [--quick] [--filter <substring>] [--json] [--out <dir>] [--processes <n>]

  --quick               short runs (under a minute in all): checks the bench works, numbers are rough
  --filter <substring>  only the tasks whose name contains it (their peer rows and the section's
                        baseline run too), e.g. --filter "1 hot key · 100 at 10/s" or --filter LocalLimiter
  --json                print the results as JSON on stdout (progress still goes to stderr)
  --out <dir>           write latest.md, latest.json and latest.svg there (default: bench/results/,
                        and only after a full run without --filter)
  --processes <n>       processes in the accuracy runs (default 8)

Redis: REDIS_URL if set (only this run's keys are touched), else a throwaway redis-server from PATH,
else a testcontainers redis:7.`;

export function parseFlags(argv: readonly string[] = process.argv.slice(2)): Flags {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        quick: { type: 'boolean', default: false },
        filter: { type: 'string' },
        json: { type: 'boolean', default: false },
        out: { type: 'string' },
        processes: { type: 'string', default: '8' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
    if (values.help) {
      console.log(USAGE);
      process.exit(0);
    }
    const processes = Number(values.processes);
    if (!Number.isInteger(processes) || processes < 1 || processes > 64) {
      throw new Error(`--processes expects a whole number from 1 to 64, got ${values.processes}`);
    }
    return { quick: values.quick, filter: values.filter, json: values.json, out: values.out, processes };
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}
