/**
 * A fault-injecting, in-memory {@link FileSystem} for tests.
 *
 * Every file keeps two images: what a reader sees now, and what survived the
 * last completed `datasync`. Directory entries likewise keep the set that
 * survived the last `syncDir`. {@link FaultyFileSystem.powerCut} throws away
 * everything not covered by a completed sync, which is what a power cut does to
 * a real disk with a volatile page cache. Any named step can be made to fail
 * with `EIO`, `ENOSPC`, or a short write, once or every time.
 */
import { dirname } from 'node:path';
import { LockedError } from '../errors.js';
import type { DirectoryLock } from './lock.js';
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, type FileHandle, type FileSystem, type OpenMode, type SyncStep, type WriteStep } from './fs.js';

/** Steps that can be failed. Writes and syncs are named by what they carry. */
export type FaultStep =
  | `write:${WriteStep}`
  | `sync:${SyncStep}`
  | 'sync:dir'
  | 'read'
  | 'open'
  | 'unlink';

/** A rule that makes matching steps fail. */
export interface Fault {
  step: FaultStep;
  /** `short` writes half the buffer, then fails with ENOSPC. */
  error: 'EIO' | 'ENOSPC' | 'EACCES' | 'short';
  /** Let this many matching steps succeed first (default 0). */
  after?: number;
  /** How many matching steps fail (default 1; `Infinity` for all). */
  times?: number;
  /** Only steps on paths containing this text. */
  path?: string;
}

function sysError(code: string, syscall: string, path: string): NodeJS.ErrnoException {
  const err = new Error(`${code}: ${syscall} ${path} (injected)`) as NodeJS.ErrnoException;
  err.code = code;
  err.syscall = syscall;
  err.path = path;
  return err;
}

class Inode {
  data = new Uint8Array(0);
  size = 0;
  durable = new Uint8Array(0);

  ensure(len: number): void {
    if (len <= this.data.length) return;
    const next = new Uint8Array(Math.max(len, this.data.length * 2, 4096));
    next.set(this.data.subarray(0, this.size));
    this.data = next;
  }

  setSize(len: number): void {
    this.ensure(len);
    if (len < this.size) this.data.fill(0, len, this.size);
    this.size = len;
  }
}

/** Which unsynced blocks a power cut leaves behind; see {@link FaultyFileSystem.crashImage}. */
export interface Tear {
  /** Block size in bytes (a disk sector or a page). */
  block: number;
  keep(path: string, block: number): boolean;
}

/** A file's contents after a cut that kept some of its unsynced blocks. */
function torn(path: string, ino: Inode, tear: Tear): Uint8Array {
  const now = ino.data.subarray(0, ino.size);
  const out = new Uint8Array(Math.max(ino.durable.length, ino.size));
  out.set(ino.durable);
  let size = ino.durable.length;
  for (let b = 0; b * tear.block < now.length; b++) {
    const from = b * tear.block;
    const to = Math.min(from + tear.block, now.length);
    const synced = ino.durable.subarray(from, Math.min(to, ino.durable.length));
    const dirty = synced.length !== to - from || synced.some((x, i) => x !== now[from + i]);
    if (!dirty || !tear.keep(path, b)) continue;
    out.set(now.subarray(from, to), from);
    size = Math.max(size, to);
  }
  return out.slice(0, size);
}

interface Rule extends Fault {
  seen: number;
  fired: number;
}

/** Options of {@link FaultyFileSystem}. */
export interface FaultyOptions {
  /**
   * When a new file's name becomes durable. `dir-sync` (the default): only at
   * the next `syncDir`, the least a POSIX file system promises. `create`: at
   * once, as ext4 in its default mode often does (the name rides an earlier
   * journal commit), so a power cut can leave a file whose name survived while
   * none, or only some, of its unsynced blocks did.
   */
  names?: 'dir-sync' | 'create';
}

/** The in-memory, fault-injecting file system. */
export class FaultyFileSystem implements FileSystem {
  constructor(readonly options: FaultyOptions = {}) {}

  private names = new Map<string, Inode>();
  private durableNames = new Map<string, Inode>();
  private dirs = new Set<string>();
  private locks = new Set<string>();
  private rules: Rule[] = [];
  private epoch = 0;
  /** Every step in order, e.g. `write:record data.00000001@64+17`. */
  readonly trace: string[] = [];
  /** Total space in bytes; writes and allocations past it fail with ENOSPC. */
  capacity = Infinity;
  /** Steps completed so far (the ones in {@link trace} whose effect took place). */
  steps = 0;
  /**
   * Called after each completed step with the running count, synchronously,
   * before control returns to the caller: the place to take a
   * {@link crashImage} "between step n and step n + 1".
   */
  onStep: ((steps: number) => void) | undefined;
  /**
   * Decides when each asynchronous completion (an fdatasync, a directory
   * fsync) takes effect: the step waits for the promise this returns. A test
   * hands it to fast-check's `scheduler()` so the order in which syncs finish,
   * relative to each other and to the queue's own promises, is part of the
   * generated case. Reads and writes are synchronous in the seam, so their
   * completion order is already the call order.
   */
  delay: ((label: string) => Promise<unknown>) | undefined;

  /** Adds a fault rule. */
  inject(fault: Fault): this {
    this.rules.push({ after: 0, times: 1, ...fault, seen: 0, fired: 0 });
    return this;
  }

  /** Removes every fault rule. */
  clearFaults(): void {
    this.rules = [];
  }

  /** Bytes in use by every file that currently has a name. */
  usedBytes(): number {
    let n = 0;
    for (const ino of new Set(this.names.values())) n += ino.size;
    return n;
  }

  /**
   * Simulates a power cut: every byte and every name not covered by a completed
   * sync is gone, locks are dropped, and handles opened before it fail with EBADF.
   * With `tear`, some unsynced blocks survive anyway (see {@link crashImage}).
   */
  powerCut(tear?: Tear): void {
    this.epoch++;
    this.locks.clear();
    const img = this.crashImage(tear);
    this.names = img.names;
    this.durableNames = img.durableNames;
  }

  /**
   * A new file system holding what a power cut right now would leave: only
   * bytes and names covered by a completed sync. This one is not changed, so a
   * queue can keep running on it while a test reopens the image.
   *
   * A real disk writes back dirty blocks in no particular order, so a cut can
   * also leave some unsynced blocks and not others. `tear` models that: every
   * `tear.block`-byte block of a surviving file whose unsynced contents differ
   * from its synced ones is kept when `tear.keep(path, block)` says so (a file
   * grows to cover the blocks kept past its synced length). Names still need
   * a directory sync.
   */
  crashImage(tear?: Tear): FaultyFileSystem {
    const img = new FaultyFileSystem(this.options);
    for (const d of this.dirs) img.dirs.add(d);
    for (const [name, ino] of this.durableNames) {
      const fresh = new Inode();
      const bytes = tear ? torn(name, ino, tear) : ino.durable;
      fresh.setSize(bytes.length);
      fresh.data.set(bytes);
      fresh.durable = bytes.slice();
      img.names.set(name, fresh);
      img.durableNames.set(name, fresh);
    }
    return img;
  }

  /** Simulates a killed process: the page cache survives, only locks and handles go. */
  processCrash(): void {
    this.epoch++;
    this.locks.clear();
  }

  /** Current contents of a file (a copy), or undefined. */
  readFile(path: string): Uint8Array | undefined {
    const ino = this.names.get(path);
    return ino?.data.slice(0, ino.size);
  }

  /** Replaces a file's contents now, durably (for damage tests). */
  writeFile(path: string, bytes: Uint8Array): void {
    let ino = this.names.get(path);
    if (!ino) {
      ino = new Inode();
      this.names.set(path, ino);
      this.durableNames.set(path, ino);
      this.dirs.add(dirname(path));
    }
    ino.setSize(bytes.length);
    ino.data.set(bytes);
    ino.durable = bytes.slice();
  }

  /** Removes a name now (as another process's `rm` would). */
  remove(path: string): void {
    this.names.delete(path);
    this.durableNames.delete(path);
  }

  /** Checks the rules for `step`; throws when one fires. Returns 'short' for a short write. */
  private check(step: FaultStep, path: string, syscall: string): 'short' | undefined {
    this.trace.push(`${step} ${path.slice(path.lastIndexOf('/') + 1)}`);
    for (const r of this.rules) {
      if (r.step !== step || (r.path !== undefined && !path.includes(r.path))) continue;
      r.seen++;
      if (r.seen <= (r.after ?? 0) || r.fired >= (r.times ?? 1)) continue;
      r.fired++;
      if (r.error === 'short') return 'short';
      throw sysError(r.error, syscall, path);
    }
    return undefined;
  }

  /** Marks a step complete. */
  private done(): void {
    this.steps++;
    this.onStep?.(this.steps);
  }

  private growBy(ino: Inode, end: number, path: string): void {
    if (end <= ino.size) return;
    if (this.usedBytes() + (end - ino.size) > this.capacity) throw sysError('ENOSPC', 'write', path);
  }

  /** Permission bits each file and directory was created with (before any umask), for tests. */
  readonly perms = new Map<string, number>();

  open(path: string, mode: OpenMode, perm = DEFAULT_FILE_MODE): FileHandle {
    this.check('open', path, 'open');
    if (!this.dirs.has(dirname(path))) throw sysError('ENOENT', 'open', path);
    let ino = this.names.get(path);
    if (mode === 'create') {
      if (ino) throw sysError('EEXIST', 'open', path);
      ino = new Inode();
      this.names.set(path, ino);
      this.perms.set(path, perm);
      if (this.options.names === 'create') this.durableNames.set(path, ino);
    } else if (!ino) {
      throw sysError('ENOENT', 'open', path);
    }
    this.done();
    return this.handle(path, ino, mode === 'r');
  }

  private handle(path: string, ino: Inode, readOnly: boolean): FileHandle {
    const epoch = this.epoch;
    const live = (syscall: string) => {
      if (epoch !== this.epoch) throw sysError('EBADF', syscall, path);
    };
    return {
      path,
      pwrite: (buf, position, step) => {
        live('pwrite');
        if (readOnly) throw sysError('EBADF', 'pwrite', path);
        const short = this.check(`write:${step}`, path, 'pwrite');
        const n = short ? buf.length >> 1 : buf.length;
        this.growBy(ino, position + n, path);
        ino.ensure(position + n);
        ino.data.set(buf.subarray(0, n), position);
        if (position + n > ino.size) ino.size = position + n;
        this.done();
        if (short) throw sysError('ENOSPC', 'pwrite', path);
      },
      pread: (buf, position) => {
        live('pread');
        this.check('read', path, 'pread');
        const n = Math.max(0, Math.min(buf.length, ino.size - position));
        if (n > 0) buf.set(ino.data.subarray(position, position + n));
        this.done();
        return n;
      },
      size: () => {
        live('fstat');
        return ino.size;
      },
      datasync: async (step) => {
        live('fdatasync');
        await (this.delay?.(`fdatasync ${path}`) ?? Promise.resolve());
        this.check(`sync:${step}`, path, 'fdatasync');
        if (epoch !== this.epoch) throw sysError('EBADF', 'fdatasync', path);
        ino.durable = ino.data.slice(0, ino.size);
        this.done();
      },
      truncate: (length) => {
        live('ftruncate');
        this.growBy(ino, length, path);
        ino.setSize(length);
      },
      allocate: (length) => {
        live('fallocate');
        this.check('write:allocate', path, 'fallocate');
        this.growBy(ino, length, path);
        if (length > ino.size) ino.setSize(length);
        this.done();
      },
      close: () => {},
    };
  }

  readdir(dir: string): string[] {
    if (!this.dirs.has(dir)) throw sysError('ENOENT', 'scandir', dir);
    const out: string[] = [];
    for (const name of this.names.keys()) if (dirname(name) === dir) out.push(name.slice(dir.length + 1));
    return out;
  }

  mkdirp(dir: string, perm = DEFAULT_DIR_MODE): void {
    if (!this.dirs.has(dir)) this.perms.set(dir, perm);
    this.dirs.add(dir);
  }

  unlink(path: string): void {
    this.check('unlink', path, 'unlink');
    if (!this.names.delete(path)) throw sysError('ENOENT', 'unlink', path);
    this.done();
  }

  /**
   * {@link unlink} on the "thread pool", as the real file system has it: it
   * completes when {@link delay} says, so power-cut enumerations and
   * schedulers see the asynchronous unlink the queues use. One that
   * completes after a power cut fails (the process that asked is gone). Set
   * it to undefined for a file system without one: the queues then unlink
   * synchronously.
   */
  unlinkAsync: ((path: string) => Promise<void>) | undefined = (path) => this.unlinkLater(path);

  private async unlinkLater(path: string): Promise<void> {
    const epoch = this.epoch;
    await (this.delay?.(`unlink ${path}`) ?? Promise.resolve());
    if (epoch !== this.epoch) throw sysError('EIO', 'unlink', path);
    this.unlink(path);
  }

  rename(from: string, to: string): void {
    const ino = this.names.get(from);
    if (!ino) throw sysError('ENOENT', 'rename', from);
    this.names.delete(from);
    this.names.set(to, ino);
  }

  async syncDir(dir: string): Promise<void> {
    await (this.delay?.(`fsync ${dir}`) ?? Promise.resolve());
    this.check('sync:dir', dir, 'fsync');
    for (const name of [...this.durableNames.keys()]) if (dirname(name) === dir) this.durableNames.delete(name);
    for (const [name, ino] of this.names) if (dirname(name) === dir) this.durableNames.set(name, ino);
    this.done();
  }

  lock(dir: string): DirectoryLock {
    if (this.locks.has(dir)) throw new LockedError(`${dir} is locked by another queue`);
    this.locks.add(dir);
    const epoch = this.epoch;
    return {
      release: () => {
        if (epoch === this.epoch) this.locks.delete(dir);
      },
    };
  }
}
