/**
 * The file-system seam: the only way ferry's disk formats touch files.
 *
 * Writes and reads are synchronous (they copy into or out of the page cache
 * and return quickly); every flush to stable storage (`datasync`, `syncDir`) is
 * asynchronous and runs on libuv's thread pool, never on the event loop's
 * thread. Each call carries the name of the step it performs (`record`,
 * `header`, …) so the fault-injecting double in `faulty.ts` can fail one named
 * step, and a trace can show the order of steps.
 */
import * as fs from 'node:fs';
import { dirname } from 'node:path';
import { lockDirectory, type DirectoryLock } from './lock.js';
import { preallocate } from './preallocate.js';
import { assertRegularFile, danglingLinkError, notADirectoryError, notRegularFileError } from '../regular-file.js';

/** The named steps a write or sync performs; used for fault injection and tracing. */
export type WriteStep = 'record' | 'header' | 'allocate' | 'cursor';
export type SyncStep = 'data' | 'header' | 'file';

/** An open file. Positions and lengths are bytes. */
export interface FileHandle {
  readonly path: string;
  /** Writes all of `buf` at `position`; throws the system error on failure (a short write then throws). */
  pwrite(buf: Uint8Array, position: number, step: WriteStep): void;
  /** Reads up to `buf.length` bytes at `position`; returns how many were read (0 at end of file). */
  pread(buf: Uint8Array, position: number): number;
  /** Current file length in bytes. */
  size(): number;
  /** fdatasync on the thread pool. */
  datasync(step: SyncStep): Promise<void>;
  /** Sets the file length. */
  truncate(length: number): void;
  /**
   * Reserves `[0, length)` on disk so later writes in that range cannot fail for
   * lack of space; throws `ENOSPC` now instead.
   */
  allocate(length: number): void;
  close(): void;
}

/** Segment files are private to their owner unless asked otherwise: queued records are often sensitive. */
export const DEFAULT_FILE_MODE = 0o600;
/** A queue directory likewise. */
export const DEFAULT_DIR_MODE = 0o700;

/** How to open a file: read-only, read-write (must exist), or create (must not exist). */
export type OpenMode = 'r' | 'rw' | 'create';

/** The directory-level half of the seam. Paths are absolute or relative to the process. */
export interface FileSystem {
  /**
   * Opens `path`. `perm` is the permission bits a `create` gives the new file
   * (the process umask still applies, so it is never looser than the umask
   * allows); default {@link DEFAULT_FILE_MODE}.
   */
  open(path: string, mode: OpenMode, perm?: number): FileHandle;
  /** Names in `dir`, unsorted. */
  readdir(dir: string): string[];
  /** Creates `dir` and missing parents with `perm` (umask applied; default {@link DEFAULT_DIR_MODE}); existing ones are left as they are. */
  mkdirp(dir: string, perm?: number): void;
  unlink(path: string): void;
  /**
   * Removes `path` on the thread pool, so a large file's pages are freed off
   * the event loop (a page-cached 8 MiB segment takes milliseconds). Optional:
   * a file system without it (the tests' in-memory one) is used through
   * {@link unlink}, synchronously. The spool uses it for retired segments
   * and the DiskQueue for reclaimed ones; each makes sure a file that a
   * crash keeps (the unlink had not run) is never delivered again.
   */
  unlinkAsync?(path: string): Promise<void>;
  rename(from: string, to: string): void;
  /** fsync of the directory itself, so created, renamed and removed names are durable. */
  syncDir(dir: string): Promise<void>;
  /** Exclusive, non-blocking lock on `dir`; throws `LockedError` when held elsewhere. */
  lock(dir: string): DirectoryLock;
}

class NodeFileHandle implements FileHandle {
  constructor(
    readonly path: string,
    private fd: number,
  ) {}

  pwrite(buf: Uint8Array, position: number, _step: WriteStep): void {
    let done = 0;
    while (done < buf.length) {
      const n = fs.writeSync(this.fd, buf, done, buf.length - done, position + done);
      if (n <= 0) throw Object.assign(new Error(`short write to ${this.path}`), { code: 'EIO' });
      done += n;
    }
  }

  pread(buf: Uint8Array, position: number): number {
    let done = 0;
    while (done < buf.length) {
      const n = fs.readSync(this.fd, buf, done, buf.length - done, position + done);
      if (n === 0) break;
      done += n;
    }
    return done;
  }

  size(): number {
    return fs.fstatSync(this.fd).size;
  }

  datasync(_step: SyncStep): Promise<void> {
    return new Promise((resolve, reject) => fs.fdatasync(this.fd, (err) => (err ? reject(err) : resolve())));
  }

  truncate(length: number): void {
    fs.ftruncateSync(this.fd, length);
  }

  allocate(length: number): void {
    preallocate(this.fd, length);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

// O_NONBLOCK: a segment's name taken by a FIFO would otherwise block the
// open until a writer came (`ferry verify` hung); on a regular file it does
// nothing, and `open` below refuses the FIFO.
const FLAGS: Record<OpenMode, number> = {
  r: fs.constants.O_RDONLY | fs.constants.O_NONBLOCK,
  rw: fs.constants.O_RDWR | fs.constants.O_NONBLOCK,
  create: fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL,
};

/** The real file system. Files are created 0600 and directories 0700: queued records are nobody else's business. */
export const nodeFileSystem: FileSystem = {
  open(path, mode, perm = DEFAULT_FILE_MODE) {
    let fd: number;
    try {
      fd = fs.openSync(path, FLAGS[mode], perm);
    } catch (err) {
      // A directory opened for writing, or a socket, fails here rather than below: named the same way.
      // A create (O_EXCL) on a link to nothing fails with EEXIST, which reads as if the file were there.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'EEXIST') throw danglingLinkError(path) ?? err;
      throw notRegularFileError(path, err) ?? err;
    }
    // A FIFO, socket or device under a segment's name is no segment: refused
    // here, before a write lands in a pipe's buffer and a read fails (ESPIPE).
    try {
      assertRegularFile(fd, path);
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    return new NodeFileHandle(path, fd);
  },
  readdir: (dir) => fs.readdirSync(dir),
  mkdirp(dir, perm = DEFAULT_DIR_MODE) {
    try {
      fs.mkdirSync(dir, { recursive: true, mode: perm });
    } catch (err) {
      // A link to nothing under the name: mkdir says only ENOENT, naming the link.
      throw notADirectoryError(dir, err) ?? ((err as NodeJS.ErrnoException).code === 'ENOENT' ? danglingLinkError(dir) : undefined) ?? err;
    }
  },
  unlink: (path) => fs.unlinkSync(path),
  unlinkAsync: (path) => fs.promises.unlink(path),
  rename: (from, to) => fs.renameSync(from, to),
  syncDir(dir) {
    return new Promise((resolve, reject) => {
      fs.open(dir, fs.constants.O_RDONLY, (err, fd) => {
        if (err) return reject(err);
        fs.fsync(fd, (syncErr) => fs.close(fd, () => (syncErr ? reject(syncErr) : resolve())));
      });
    });
  },
  lock: (dir) => lockDirectory(dir),
};

/** The directory holding `path`. */
export function parentDir(path: string): string {
  return dirname(path);
}
