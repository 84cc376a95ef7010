/**
 * Refusing paths that are not regular files. Shared by the file-system seam
 * (segments and cursors) and the SQLite store (its database file): a FIFO,
 * socket or device under such a name is never a store of records.
 */
import { fstatSync, type Stats } from 'node:fs';

/**
 * Throws an error with code `EFTYPE`, naming what the file is (a FIFO, a
 * directory, a socket, a device), unless the open `fd` is a regular file.
 * The caller keeps `fd` and closes it.
 */
export function assertRegularFile(fd: number, path: string): void {
  const st = fstatSync(fd);
  if (!st.isFile()) throw Object.assign(new Error(`${path} is not a regular file (${fileKind(st)})`), { code: 'EFTYPE', path });
}

/** What a file that is not a regular one is, for a message. */
function fileKind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}
