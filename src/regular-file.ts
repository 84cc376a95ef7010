/**
 * Refusing paths that are not regular files. Shared by the file-system seam
 * (segments and cursors) and the SQLite store (its database file): a FIFO,
 * socket or device under such a name is never a store of records.
 */
import { fstatSync, lstatSync, readlinkSync, statSync, type Stats } from 'node:fs';

/**
 * Throws an error with code `EFTYPE`, naming what the file is (a FIFO, a
 * directory, a socket, a device), unless the open `fd` is a regular file.
 * The caller keeps `fd` and closes it.
 */
export function assertRegularFile(fd: number, path: string): void {
  const st = fstatSync(fd);
  if (!st.isFile()) throw notRegular(path, fileKind(st));
}

/**
 * For an error of opening `path` that comes from what the path is (EISDIR: a
 * directory; ENXIO: a socket, a device with nothing behind it), the `EFTYPE`
 * error naming it as `assertRegularFile` does; otherwise undefined.
 */
export function notRegularFileError(path: string, err: unknown): Error | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (code !== 'EISDIR' && code !== 'ENXIO') return undefined;
  let kind = code === 'EISDIR' ? 'a directory' : 'not a regular file';
  try {
    kind = fileKind(statSync(path));
  } catch {
    // Gone meanwhile: the errno's own reading stands.
  }
  return notRegular(path, kind, err);
}

/**
 * Throws `assertRegularFile`'s error when something other than a regular
 * file is at `path` (it is not opened, so a FIFO cannot hold the call), and
 * an `ENOENT` error naming the target when `path` is a symbolic link to
 * nothing; a missing path passes.
 */
export function assertRegularIfPresent(path: string): void {
  const st = statSync(path, { throwIfNoEntry: false });
  if (st !== undefined && !st.isFile()) throw notRegular(path, fileKind(st));
  if (st === undefined) {
    const dangling = danglingLinkError(path);
    if (dangling !== undefined) throw dangling;
  }
}

/**
 * When `path` is a symbolic link whose target does not exist, an `ENOENT`
 * error that says so and names the target (an errno names only the link,
 * which a listing shows as present); otherwise undefined.
 */
export function danglingLinkError(path: string): Error | undefined {
  try {
    if (!lstatSync(path).isSymbolicLink() || statSync(path, { throwIfNoEntry: false }) !== undefined) return undefined;
    return Object.assign(new Error(`${path} is a symbolic link to ${readlinkSync(path)}, which does not exist`), { code: 'ENOENT', path });
  } catch {
    return undefined;
  }
}

/**
 * For `mkdir`'s EEXIST at `path` where something other than a directory
 * is, an `ENOTDIR` error naming what is there; otherwise undefined.
 */
export function notADirectoryError(path: string, err: unknown): Error | undefined {
  if ((err as { code?: unknown } | null)?.code !== 'EEXIST') return undefined;
  const st = statSync(path, { throwIfNoEntry: false });
  if (st === undefined || st.isDirectory()) return undefined;
  return Object.assign(new Error(`${path} exists and is not a directory (${fileKind(st)})`), { code: 'ENOTDIR', path, cause: err });
}

/** The `EFTYPE` error for `path`, which is `kind` rather than a regular file. */
function notRegular(path: string, kind: string, cause?: unknown): Error {
  return Object.assign(new Error(`${path} is not a regular file (${kind})`), { code: 'EFTYPE', path, ...(cause === undefined ? {} : { cause }) });
}

/** What the file is, for a message ("a regular file", "a FIFO", "a directory", ...). */
export function fileKind(st: Stats): string {
  if (st.isFile()) return 'a regular file';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}
