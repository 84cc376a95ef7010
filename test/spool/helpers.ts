/** Shared helpers of the spool tests: a spool on the fault-injecting file system, text records, a full drain. */
import { join } from 'node:path';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import type { FileHandle, FileSystem } from '../../src/storage/fs.js';
import { spoolSegmentNames } from '../../src/storage/segment-names.js';
import { Spool, ClosedError, CorruptError, FerryError, type SpoolOptions } from '../../src/spool/index.js';

export const DIR = '/s';
export const CURSOR = join(DIR, 'cursor');

export function openS(fs: FaultyFileSystem, opts: Omit<SpoolOptions, 'fs'> = {}): Promise<Spool> {
  return Spool.open(DIR, { fs, ...opts });
}

export const segPath = (seq: number) => join(DIR, spoolSegmentNames.fileName(seq));
export const segNumbers = (fs: FaultyFileSystem) => spoolSegmentNames.list(fs.readdir(DIR));

export const enc = (s: string) => new TextEncoder().encode(s);
export const dec = (b: Uint8Array) => new TextDecoder().decode(b);
/** `r0000`, `r0001`, …: every record the same size. */
export const rec = (i: number) => `r${String(i).padStart(4, '0')}`;
/** Framed size of one {@link rec}. */
export const REC_FRAME = 12 + 5;

export interface Drained {
  values: string[];
  errors: FerryError[];
}

/** Pops and commits until empty, collecting values and errors apart. Bounded, so a wedged spool fails. */
export async function drain(s: Spool, max = 100_000): Promise<Drained> {
  const out: Drained = { values: [], errors: [] };
  for (let i = 0; i < max; i++) {
    try {
      const p = await s.pop();
      if (!p) return out;
      out.values.push(dec(p.data));
      await p.commit();
    } catch (err) {
      if (!(err instanceof FerryError) || err instanceof ClosedError) throw err;
      out.errors.push(err);
    }
  }
  throw new Error(`spool did not run dry after ${max} pops`);
}

export async function appendAll(s: Spool, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) await s.append(enc(rec(i)));
}

export const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => rec(from + i));

/** Segments of four records each (with {@link filled}). */
export const SEG4 = 8 + 4 * REC_FRAME;

/** A spool on `fs` holding records 0 to n − 1 (durable), on segments of four. */
export async function filled(fs: FaultyFileSystem, n: number): Promise<Spool> {
  const s = await openS(fs, { segmentBytes: SEG4 });
  await appendAll(s, 0, n);
  return s;
}

/** Writes of the cursor file so far. */
export const cursorWrites = (fs: FaultyFileSystem) => fs.trace.filter((t) => t.startsWith('write:cursor')).length;

/** A seeded pseudo-random `next(m)`: 0 to m − 1, the same sequence for the same seed. */
export function seeded(seed: number): (m: number) => number {
  let rnd = seed;
  return (m) => {
    rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
    return rnd % m;
  };
}

/** Flips byte `pos` of a file, durably. */
export function flip(fs: FaultyFileSystem, path: string, pos: number, mask = 0xff): void {
  const b = fs.readFile(path)!;
  b[pos]! ^= mask;
  fs.writeFile(path, b);
}

/**
 * The seam with a count of descriptors open now and the most ever open at
 * once. Like a real descriptor, one closed while its fdatasync runs makes
 * that fdatasync fail with EBADF (counted in `closedUnderSync`).
 */
export function counting(inner: FileSystem) {
  const c = { open: 0, peak: 0, closedUnderSync: 0 };
  const fs: FileSystem = {
    open: (p, m, perm) => {
      const h = inner.open(p, m, perm);
      c.open++;
      c.peak = Math.max(c.peak, c.open);
      let closed = false;
      const wrapped: FileHandle = {
        path: h.path,
        pwrite: (b, at, step) => h.pwrite(b, at, step),
        pread: (b, at) => h.pread(b, at),
        size: () => h.size(),
        datasync: async (step) => {
          await h.datasync(step);
          if (closed) {
            c.closedUnderSync++;
            throw Object.assign(new Error(`EBADF: fdatasync ${p}`), { code: 'EBADF' });
          }
        },
        truncate: (n) => h.truncate(n),
        allocate: (n) => h.allocate(n),
        close: () => {
          if (closed) throw Object.assign(new Error(`EBADF: close ${p} twice`), { code: 'EBADF' });
          closed = true;
          c.open--;
          h.close();
        },
      };
      return wrapped;
    },
    readdir: (d) => inner.readdir(d),
    mkdirp: (d, perm) => inner.mkdirp(d, perm),
    unlink: (p) => inner.unlink(p),
    rename: (a, b) => inner.rename(a, b),
    syncDir: (d) => inner.syncDir(d),
    lock: (d) => inner.lock(d),
  };
  return { fs, c };
}

export { FaultyFileSystem, CorruptError };
