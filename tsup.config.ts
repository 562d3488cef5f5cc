import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { defineConfig, type Options } from 'tsup';

type Plugin = NonNullable<Options['esbuildPlugins']>[number];

// The one build of every package: each runs `tsup --config ../../tsup.config.ts` from its own folder,
// so `process.cwd()` is the package being built.

interface Manifest {
  name: string;
  version: string;
  type?: string;
  main?: string;
  exports?: unknown;
  dependencies?: Record<string, string>;
}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));

/** The folder of dependency `name` as Node would find it from `fromDir` (pnpm links it beside). */
function packageDir(name: string, fromDir: string): string {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(dir) === dir) throw new Error(`tsup.config: cannot find ${name} from ${fromDir}`);
  }
}

/** ESM with no CommonJS entry: a CommonJS build cannot `require()` it on every Node 20. */
function isEsmOnly(manifest: Manifest): boolean {
  const targets = JSON.stringify(manifest.exports ?? manifest.main ?? 'index.js');
  if (targets.includes('"require"') || targets.includes('.cjs"')) return false;
  return manifest.type === 'module' || targets.includes('.mjs"');
}

interface Bundled extends Manifest {
  dir: string;
}

/** Every package a CommonJS bundle must carry: the ESM-only dependencies and all they import. */
function bundledIntoCjs(dir: string): Bundled[] {
  const own = Object.keys(readManifest(dir).dependencies ?? {});
  const found = new Map<string, Bundled>();
  const visit = (name: string, from: string) => {
    const depDir = packageDir(name, from);
    const manifest = readManifest(depDir);
    const id = `${manifest.name}@${manifest.version}`;
    if (found.has(id)) return;
    found.set(id, { ...manifest, dir: depDir });
    // What a bundled package imports is bundled with it, unless we depend on it ourselves.
    for (const dep of Object.keys(manifest.dependencies ?? {})) if (!own.includes(dep)) visit(dep, depDir);
  };
  for (const dep of own) if (isEsmOnly(readManifest(packageDir(dep, dir)))) visit(dep, dir);
  return [...found.values()];
}

/** The ESM build keeps `import 'p-limit'`: Node loads ESM from ESM, and users can dedupe it. */
const externalInEsm = (names: string[]): Plugin => ({
  name: 'esm-only-dependencies-stay-external-in-esm',
  setup(build) {
    if (build.initialOptions.format !== 'esm' || names.length === 0) return;
    const filter = new RegExp(
      `^(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})(/|$)`,
    );
    build.onResolve({ filter }, (args) => ({ path: args.path, external: true }));
  },
});

/** MIT and friends ask for their notice to travel with the code: one file beside the bundle. */
function writeNotices(bundled: Bundled[]): void {
  if (bundled.length === 0) return;
  const sections = bundled.map((pkg) => {
    const file = ['LICENSE', 'license', 'LICENSE.md', 'license.md'].find((f) => existsSync(join(pkg.dir, f)));
    const text = file
      ? readFileSync(join(pkg.dir, file), 'utf8').trim()
      : `License: see ${pkg.name}@${pkg.version}`;
    return `## ${pkg.name}@${pkg.version}\n\n${text}\n`;
  });
  const header = '# Third-party code bundled into dist/index.cjs\n\n';
  writeFileSync('dist/THIRD-PARTY-LICENSES.md', header + sections.join('\n'));
}

export default defineConfig((): Options => {
  const cwd = process.cwd();
  const bundled = bundledIntoCjs(cwd);
  const direct = Object.keys(readManifest(cwd).dependencies ?? {});
  const esmOnlyDirect = bundled.map((pkg) => pkg.name).filter((name) => direct.includes(name));
  return {
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    sourcemap: true,
    target: 'node20',
    // CommonJS cannot `require()` an ESM-only package on every Node 20 (and where it can, esbuild's
    // interop wraps the namespace: `(0, import_p_limit.default) is not a function`), so the .cjs
    // build carries it. See docs/DECISIONS.md, "Packaging".
    noExternal: esmOnlyDirect,
    esbuildPlugins: [externalInEsm(esmOnlyDirect)],
    banner: ({ format }) =>
      format === 'cjs' && bundled.length > 0
        ? {
            js: `/*! Bundles ${bundled.map((p) => `${p.name}@${p.version}`).join(', ')}: see THIRD-PARTY-LICENSES.md */`,
          }
        : {},
    // Lua scripts are imported as text, so a built package needs no file lookup at run time.
    loader: existsSync(join(cwd, 'lua')) ? { '.lua': 'text' } : undefined,
    onSuccess: async () => writeNotices(bundled),
  };
});
