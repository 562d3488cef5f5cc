import {
  type Decision,
  defineLimit,
  MAX_CAPACITY,
  MAX_REFILL_PER_SECOND,
  MIN_REFILL_PER_SECOND,
  type SyncLimiter,
} from '@tiered-limiter/core';
import {
  LocalLimiter,
  MemoryStore,
  RequestLimiter,
  TieredLimiter,
  type TieredLimiterOptions,
} from '@tiered-limiter/local';
import {
  acquireOptions,
  FakeClock,
  localLimiterOptions,
  memoryStoreOptions,
  type OptionCase,
  optionMatrix,
  proveStillLimits,
  requestLimiterOptions,
  ScriptedStore,
  type Subject,
  TINY,
  tieredLimiterOptions,
  tryCombination,
  tryEveryValue,
  valuesOf,
} from '@tiered-limiter/test-harness';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';

// Issue 9 §3: every option of every constructor × the bad values of `BAD_VALUES` (and each
// option's own extras): a value is refused with a typed error naming the option, or it builds a
// limiter that still limits. The tables (test/src/option-tables.ts) are typed against the options'
// interfaces, so an option added to a constructor and not to its table fails the type check.

const { count, describeOptions } = optionMatrix('local', { describe, it, expect, afterAll });

/** Fresh options of a limiter over a store: a `ScriptedStore` over a `MemoryStore`, a fake clock. */
function storeBase(): Record<string, unknown> {
  const clock = new FakeClock(1_000);
  return {
    store: new ScriptedStore(new MemoryStore({ clock })),
    limits: TINY,
    failurePolicy: 'closed',
    clock,
  };
}

interface Built<L> {
  readonly limiter: L;
  readonly store: unknown;
}

function storeSubject<L extends RequestLimiter | TieredLimiter>(
  make: (options: Record<string, unknown>) => L,
): Subject<Built<L>> {
  return {
    base: storeBase,
    build: (options) => ({ limiter: make(options), store: options.store }),
    prove: ({ limiter, store }) =>
      proveStillLimits(limiter, store instanceof ScriptedStore ? store : undefined),
  };
}

describeOptions('LocalLimiter', localLimiterOptions, {
  base: () => ({ limits: TINY, clock: new FakeClock(1_000) }),
  build: (options) => new LocalLimiter(options as never),
  prove: (limiter) => proveStillLimits(limiter),
});

describeOptions(
  'RequestLimiter',
  requestLimiterOptions,
  storeSubject((options) => new RequestLimiter(options as never)),
);

describeOptions(
  'TieredLimiter',
  tieredLimiterOptions,
  storeSubject((options) => new TieredLimiter(options as never)),
);

describeOptions(
  'MemoryStore',
  memoryStoreOptions,
  {
    base: () => ({ clock: new FakeClock(1_000) }),
    build: (options) => new MemoryStore(options as never),
    // The store is what limits: three takes of one token from a 2-token bucket.
    prove: async (store) => {
      const oks: boolean[] = [];
      for (let i = 0; i < 3; i++) oks.push((await store.apply({ key: 'k', limits: [TINY], take: 1 })).ok);
      expect(oks).toEqual([true, true, false]);
    },
  },
  { optional: true },
);

/** A two-tier limiter of `TINY` with its first `acquire` made with the options tried. */
interface Acquiring {
  readonly limiter: TieredLimiter;
  readonly options: Record<string, unknown>;
  readonly first: ReturnType<TieredLimiter['acquire']>;
}

describeOptions(
  'TieredLimiter.acquire options',
  acquireOptions,
  {
    base: () => ({}),
    argument: true,
    build: (options): Acquiring => {
      const limiter = new TieredLimiter(storeBase() as unknown as TieredLimiterOptions);
      try {
        return { limiter, options, first: limiter.acquire('k', 1, options as never) };
      } catch (error) {
        void limiter.close();
        throw error;
      }
    },
    prove: async ({ limiter, options, first }) => {
      const results = [await first];
      for (let i = 0; i < 2; i++) results.push(await limiter.acquire('k', 1, options as never));
      await limiter.close();
      // The third waits for a token 1,000 s away: beyond any wait allowed, it gives up at once.
      expect(results.map((r) => r.reason)).toEqual(['acquired', 'acquired', 'timeout']);
    },
  },
  false,
);

// ---- the arguments of the limiters' calls ----

/** Each call's arguments in order, with a valid value for each. */
const CALLS = {
  tryConsume: ['key', 'cost'],
  consume: ['key', 'cost'],
  peek: ['key'],
  reset: ['key'],
  reward: ['key', 'tokens'],
  penalty: ['key', 'tokens'],
  block: ['key', 'ms'],
  setLimits: ['limits'],
  acquire: ['key', 'cost', 'options'],
} as const satisfies Record<
  Exclude<keyof SyncLimiter, 'limits' | 'stats' | 'close'> | 'acquire',
  readonly string[]
>;

type Argument = (typeof CALLS)[keyof typeof CALLS][number];

const ARGUMENTS: Record<Argument, OptionCase & { readonly fine: unknown }> = {
  key: { kind: 'string', required: true, fine: 'other' },
  cost: { kind: 'integer', extra: [3, 1e9], fine: 1 },
  tokens: { kind: 'integer', required: true, extra: [1e9 + 1], fine: 1 },
  ms: { kind: 'integer', required: true, extra: [2 ** 31], fine: 1000 },
  limits: { kind: 'limits', required: true, valid: [{ ...TINY }], fine: TINY },
  options: { kind: 'object', extra: [{ signal: new AbortController() }], alsoNamed: ['signal'], fine: {} },
};

type AnyLimiter = LocalLimiter | RequestLimiter | TieredLimiter;
type Call = (...args: unknown[]) => Decision | Promise<unknown> | undefined;

const LIMITERS: Record<string, () => { limiter: AnyLimiter; store?: ScriptedStore }> = {
  LocalLimiter: () => ({ limiter: new LocalLimiter({ limits: TINY, clock: new FakeClock(1_000) }) }),
  RequestLimiter: () => {
    const options = storeBase();
    return { limiter: new RequestLimiter(options as never), store: options.store as ScriptedStore };
  },
  TieredLimiter: () => {
    const options = storeBase();
    return { limiter: new TieredLimiter(options as never), store: options.store as ScriptedStore };
  },
};

for (const [limiterName, make] of Object.entries(LIMITERS)) {
  describe(`${limiterName} call arguments`, () => {
    const probe = make().limiter;
    void probe.close?.();
    const has = (method: string) =>
      typeof (probe as unknown as Record<string, unknown>)[method] === 'function';
    const cases = Object.entries(CALLS).flatMap(([method, args]) =>
      (has(method) ? args : []).map(
        (argument, at) => [`${method}(${args.join(', ')}): ${argument}`, method, at] as const,
      ),
    );
    it.each(cases)('%s', async (_, method, at) => {
      const args = CALLS[method as keyof typeof CALLS] as readonly Argument[];
      const argument = args[at]!;
      const option = ARGUMENTS[argument];
      const subject: Subject<{ made: ReturnType<typeof make>; result: unknown }> = {
        base: () => Object.fromEntries(args.map((a) => [a, ARGUMENTS[a].fine])),
        // `limits` of setLimits is a configuration, refused as such; the rest are arguments.
        argument: argument !== 'limits',
        build: (options) => {
          const made = make();
          const call = (made.limiter as unknown as Record<string, Call | undefined>)[method];
          if (call === undefined) throw new Error(`${limiterName} has no ${method}`);
          try {
            return {
              made,
              result: call.apply(
                made.limiter,
                args.map((a) => options[a]),
              ),
            };
          } catch (error) {
            void made.limiter.close?.();
            throw error;
          }
        },
        prove: async ({ made, result }) => {
          // A programming error throws at once: a promise that rejects instead is a failure here.
          if (result instanceof Promise) await result;
          await proveStillLimits(made.limiter, made.store, 'after');
        },
      };
      expect(await tryEveryValue(subject, argument, option, count)).toEqual([]);
    });
  });
}

// ---- several options at once ----

/** Two to four options of `table`, each set to one of its values. */
function picksOf(table: Readonly<Record<string, OptionCase>>) {
  const paths = Object.keys(table);
  return fc.uniqueArray(
    fc
      .constantFrom(...paths)
      .chain((path) => fc.constantFrom(...valuesOf(table[path]!)).map((value) => ({ path, value }))),
    // One per top-level option: `breaker` set after `breaker.cooldownMs` would erase it.
    { minLength: 2, maxLength: 4, selector: (pick) => pick.path.split('.')[0] },
  );
}

describe('several options at once', () => {
  const subjects: [string, Readonly<Record<string, OptionCase>>, Subject<unknown>][] = [
    [
      'RequestLimiter',
      requestLimiterOptions,
      storeSubject((o) => new RequestLimiter(o as never)) as Subject<unknown>,
    ],
    [
      'TieredLimiter',
      tieredLimiterOptions,
      storeSubject((o) => new TieredLimiter(o as never)) as Subject<unknown>,
    ],
  ];
  it.each(subjects)('%s: refused naming one of them, or built and limiting', async (_, table, subject) => {
    await fc.assert(
      fc.asyncProperty(picksOf(table), async (picks) => {
        count.add(await tryCombination(subject, table, picks));
      }),
      { numRuns: 300 },
    );
  });
});

describe('any valid limit divides into a working local fallback', () => {
  it('a 1-per-day limit shared by 12 instances (issue 9 §3)', async () => {
    const daily = defineLimit({ capacity: 1, refillPerSecond: 1 / 86_400, name: 'daily' });
    const store = new ScriptedStore(new MemoryStore());
    const limiter = new TieredLimiter({ store, limits: daily, failurePolicy: 'local', instances: 12 });
    store.mode = 'reject';
    const decisions = [await limiter.consume('k'), await limiter.consume('k')];
    expect(decisions.map((d) => [d.allowed, d.tier, d.policy])).toEqual([
      [true, 'fallback', 'local'],
      [false, 'fallback', 'local'],
    ]);
    await limiter.close();
  });

  it('every capacity, rate and instance count builds, and its fallback denies past its share', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: MAX_CAPACITY }),
        fc.double({ min: MIN_REFILL_PER_SECOND, max: MAX_REFILL_PER_SECOND, noNaN: true }),
        fc.integer({ min: 1, max: 1_000_000 }),
        async (capacity, refillPerSecond, instances) => {
          const limits = defineLimit({ capacity, refillPerSecond, name: 'any' });
          const store = new ScriptedStore(new MemoryStore());
          const clock = new FakeClock(0);
          const limiter = new RequestLimiter({
            store,
            limits,
            clock,
            failurePolicy: 'local',
            fallback: { instances },
          });
          store.mode = 'reject';
          const share = Math.max(1, Math.floor(capacity / instances));
          // The whole share at once, then one more token with the clock still.
          expect((await limiter.consume('k', share)).allowed).toBe(true);
          expect((await limiter.consume('k')).allowed).toBe(false);
          await limiter.close();
        },
      ),
      { numRuns: 200 },
    );
  });
});
