/** Shared helpers of the spool tests: a spool on the fault-injecting file system, text records, a full drain. */
import { join } from 'node:path';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
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

/** Flips byte `pos` of a file, durably. */
export function flip(fs: FaultyFileSystem, path: string, pos: number, mask = 0xff): void {
  const b = fs.readFile(path)!;
  b[pos]! ^= mask;
  fs.writeFile(path, b);
}

export { FaultyFileSystem, CorruptError };
