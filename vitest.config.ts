import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      '@tiered-limiter/core': src('./packages/core/src/index.ts'),
      '@tiered-limiter/http': src('./packages/http/src/index.ts'),
      '@tiered-limiter/local': src('./packages/local/src/index.ts'),
      '@tiered-limiter/otel': src('./packages/otel/src/index.ts'),
      '@tiered-limiter/redis': src('./packages/redis/src/index.ts'),
      '@tiered-limiter/test-harness': src('./test/src/index.ts'),
    },
  },
  plugins: [
    {
      // Lua scripts are imported as text, as tsup's `.lua: text` loader does for the build.
      name: 'lua-as-text',
      transform(code, id) {
        if (id.endsWith('.lua')) return { code: `export default ${JSON.stringify(code)};`, map: null };
        return undefined;
      },
    },
  ],
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
