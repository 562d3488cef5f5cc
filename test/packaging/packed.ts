import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The workspace's root folder. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The folders under `packages/` of the published packages, in dependency order. */
export const PACKAGES = ['core', 'local', 'redis', 'http', 'otel'] as const;
export type PackageDir = (typeof PACKAGES)[number];

/** A package as `pnpm pack` wrote it. */
export interface Tarball {
  readonly dir: PackageDir;
  readonly name: string;
  readonly version: string;
  /** Absolute path of the `.tgz`. */
  readonly file: string;
  /** Paths inside the tarball, as pnpm lists them (`dist/index.js`, `LICENSE`, …). */
  readonly files: readonly string[];
}

/** The tarballs and a consumer project that has them installed, under one temporary folder. */
export interface PackedWorkspace {
  readonly tarballs: readonly Tarball[];
  /** A project folder whose `node_modules` holds the tarballs' contents and their dependencies. */
  readonly project: string;
  /** Removes the temporary folder. */
  remove(): void;
}

/** The fields of a packed package.json that the tests read. */
export interface Manifest {
  name: string;
  version: string;
  description?: string;
  keywords?: string[];
  homepage?: string;
  bugs?: { url?: string };
  files?: string[];
  exports?: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/**
 * Packs every package with `pnpm pack` (which rewrites `workspace:` ranges, as publishing does)
 * and installs the tarballs into a fresh project, offline: each tarball is unpacked into
 * `node_modules/<name>`, and each of its declared dependencies and peers from outside the
 * workspace is linked to the copy the workspace resolved from the lockfile. Nothing else is
 * reachable from the project, so a file missing from `files` or an undeclared dependency fails
 * here as it would for a user. Needs `pnpm build` first.
 */
export async function packWorkspace(label: string): Promise<PackedWorkspace> {
  for (const dir of PACKAGES) {
    if (!existsSync(join(ROOT, 'packages', dir, 'dist', 'index.js'))) {
      throw new Error(`packages/${dir}/dist is missing: run \`pnpm build\` before this test`);
    }
  }
  const temp = mkdtempSync(join(tmpdir(), `tl-${label}-`));
  const tarballs: Tarball[] = [];
  for (const dir of PACKAGES) {
    const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', join(temp, 'tarballs')], {
      cwd: join(ROOT, 'packages', dir),
    });
    const packed = JSON.parse(stdout) as {
      name: string;
      version: string;
      filename: string;
      files: { path: string }[];
    };
    tarballs.push({
      dir,
      name: packed.name,
      version: packed.version,
      file: packed.filename,
      files: packed.files.map((f) => f.path),
    });
  }
  const project = join(temp, 'consumer');
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
  for (const tarball of tarballs) await install(project, tarball);
  return { tarballs, project, remove: () => rmSync(temp, { recursive: true, force: true }) };
}

/** The manifest of an installed package, as it was packed. */
export function installedManifest(project: string, name: string): Manifest {
  return JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8'));
}

/**
 * A second consumer project beside `packed.project`, for a user who installed none of the optional
 * peers (ioredis, redis, iovalkey, express, fastify, @opentelemetry/api): each package copied (not
 * linked, so that nothing resolves from the first project) with only its `dependencies` linked.
 */
export function bareProject(packed: PackedWorkspace): string {
  const project = join(dirname(packed.project), 'bare');
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'bare', private: true }));
  for (const tarball of packed.tarballs) {
    const installed = join(packed.project, 'node_modules', tarball.name);
    cpSync(installed, join(project, 'node_modules', tarball.name), { recursive: true });
    for (const dep of Object.keys(installedManifest(packed.project, tarball.name).dependencies ?? {})) {
      if (dep.startsWith('@tiered-limiter/')) continue;
      link(join(project, 'node_modules', dep), realpathSync(join(packed.project, 'node_modules', dep)));
    }
  }
  return project;
}

async function install(project: string, tarball: Tarball): Promise<void> {
  const target = join(project, 'node_modules', tarball.name);
  mkdirSync(target, { recursive: true });
  await run('tar', ['-xzf', tarball.file, '-C', target, '--strip-components=1']);
  const manifest = installedManifest(project, tarball.name);
  const wanted = { ...manifest.peerDependencies, ...manifest.dependencies };
  for (const dep of Object.keys(wanted)) {
    if (dep.startsWith('@tiered-limiter/')) continue; // installed from its own tarball
    const resolved = join(ROOT, 'packages', tarball.dir, 'node_modules', dep);
    if (!existsSync(resolved)) {
      if (manifest.peerDependenciesMeta?.[dep]?.optional) continue;
      throw new Error(`${tarball.name} needs ${dep}, which the workspace did not install for it`);
    }
    link(join(project, 'node_modules', dep), realpathSync(resolved));
  }
}

function link(at: string, to: string): void {
  if (existsSync(at)) {
    if (realpathSync(at) !== to) throw new Error(`${at} is already ${realpathSync(at)}, not ${to}`);
    return;
  }
  mkdirSync(dirname(at), { recursive: true });
  symlinkSync(to, at, 'dir');
}
