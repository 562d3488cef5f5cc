import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** A JavaScript runtime other than Node.js that the packed packages are run on. */
export interface Runtime {
  readonly name: 'Bun' | 'Deno';
  /** The binary, from the platform package the npm release installs beside its stub. */
  readonly binary: string;
  /** What goes between the binary and the script: run it from the project's node_modules alone. */
  readonly args: readonly string[];
  /** What the runtime needs in its environment to keep to the test's temporary folder and offline. */
  env(temp: string): Record<string, string>;
}

const require = createRequire(import.meta.url);
const isWindows = process.platform === 'win32';
// Linux builds of both are for glibc unless marked otherwise; Node reports the glibc it runs on.
const isGlibc =
  process.platform === 'linux' &&
  (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header
    ?.glibcVersionRuntime !== undefined;

/**
 * Bun and Deno as npm releases them (the `bun-npm` and `deno-npm` dev dependencies of this
 * package: pnpm 12 reads a dependency named `bun` as the package manager and one named `deno` as
 * a runtime to download from GitHub, so they are aliased). Each release's postinstall would copy
 * the binary of an optional platform package over a stub; pnpm does not run it here
 * (`allowBuilds`), and the binary is taken from that platform package. Throws, naming the package,
 * on a platform neither publishes a build for.
 */
export function runtimes(): Runtime[] {
  return [
    {
      name: 'Bun',
      binary: platformBinary('bun-npm', bunPlatform(), isWindows ? 'bin/bun.exe' : 'bin/bun'),
      // No auto-install: a package missing from node_modules fails as it does for Node.
      args: ['--no-install'],
      env: (temp) => ({
        BUN_INSTALL_CACHE_DIR: join(temp, 'bun-cache'),
        BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0',
      }),
    },
    {
      name: 'Deno',
      binary: platformBinary('deno-npm', denoPlatform(), isWindows ? 'deno.exe' : 'deno'),
      args: ['run', '--allow-all', '--no-remote'],
      env: (temp) => ({ DENO_DIR: join(temp, 'deno-dir'), DENO_NO_UPDATE_CHECK: '1' }),
    },
  ];
}

function platformBinary(release: string, platformPackage: string, file: string): string {
  const fromRelease = createRequire(require.resolve(`${release}/package.json`));
  let root: string;
  try {
    root = dirname(fromRelease.resolve(`${platformPackage}/package.json`));
  } catch {
    throw new Error(
      `${platformPackage} is not installed: ${release} has no build for ${process.platform}-${process.arch} ` +
        'on npm, or `pnpm install` skipped it',
    );
  }
  const binary = join(root, file);
  if (!existsSync(binary)) throw new Error(`${binary} is missing from ${platformPackage}`);
  return binary;
}

function bunPlatform(): string {
  const os = isWindows ? 'windows' : process.platform;
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  const libc = process.platform === 'linux' && !isGlibc ? '-musl' : '';
  return `@oven/bun-${os}-${arch}${libc}`;
}

function denoPlatform(): string {
  const libc = process.platform === 'linux' ? (isGlibc ? '-glibc' : '-musl') : '';
  return `@deno/${process.platform}-${process.arch}${libc}`;
}
