/**
 * Shared helpers of the fault tests: a queue on the fault-injecting file
 * system, a full drain that collects values and loss events apart, and byte
 * surgery on segment files.
 */
import { join } from 'node:path';
import { FaultyFileSystem } from '../../../src/storage/faulty.js';
import { segmentFileName } from '../../../src/storage/segment-names.js';
import { DiskQueue, codecs, CorruptError } from '../../../src/diskqueue/index.js';
import type { DiskQueueOptions } from '../../../src/diskqueue/options.js';
import type { Reader } from '../../../src/diskqueue/reader.js';

export const DIR = '/q';
/** The smallest segment size; 4096 bytes of data region. */
export const SEG = 4096;

export type Opts = Omit<DiskQueueOptions<string>, 'fs' | 'codec'>;

/** Opens a utf8 queue in {@link DIR} on `fs`. */
export function openQ(fs: FaultyFileSystem, opts: Opts = {}): Promise<DiskQueue<string>> {
  return DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, segmentSize: SEG, ...opts });
}

/** Path of segment `seq` in {@link DIR}. */
export const segPath = (seq: number) => join(DIR, segmentFileName(seq));

/** Segment numbers present in {@link DIR}, ascending. */
export function segNumbers(fs: FaultyFileSystem): number[] {
  return fs
    .readdir(DIR)
    .filter((n) => n.startsWith('data.'))
    .map((n) => Number(n.slice(5)))
    .sort((a, b) => a - b);
}

export interface Drained {
  values: string[];
  errors: CorruptError[];
}

/**
 * Takes until the queue answers empty, collecting values and `CorruptError`s.
 * Any other error is rethrown. Bounded so a wedged queue fails the test
 * instead of hanging it. `how` picks the read: one `tryTake` at a time (the
 * default), `takeBatch(n)`, or `reserveBatch(n)` then `ackBatch`.
 */
export async function drainAll(r: Reader<string>, max = 100_000, how: DrainHow = { kind: 'take' }): Promise<Drained> {
  const out: Drained = { values: [], errors: [] };
  for (let i = 0; i < max; i++) {
    try {
      if (how.kind === 'take') {
        const got = await r.tryTake();
        if (!got) return out;
        out.values.push(got.value);
      } else if (how.kind === 'takeBatch') {
        const got = await r.takeBatch(how.n);
        if (got.length === 0) return out;
        out.values.push(...got);
      } else {
        const got = await r.reserveBatch(how.n);
        if (got.length === 0) return out;
        await r.ackBatch(got.map((g) => g.offset));
        out.values.push(...got.map((g) => g.value));
      }
    } catch (err) {
      if (!(err instanceof CorruptError)) throw err;
      out.errors.push(err);
    }
  }
  throw new Error(`queue did not run dry after ${max} reads (wedged?)`);
}

export type DrainHow = { kind: 'take' } | { kind: 'takeBatch' | 'reserveBatch'; n: number };

/** `v0`, `v1`, … padded so every record has the same framed size. */
export const val = (i: number, width = 4) => `v${String(i).padStart(width, '0')}`;

/** Adds `vals` one by one (each awaited). */
export async function addAll(q: DiskQueue<string>, vals: string[]): Promise<void> {
  for (const v of vals) await q.add(v);
}

export const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** Flips (xors) byte `pos` of the file at `path`, durably. */
export function flipByte(fs: FaultyFileSystem, path: string, pos: number, mask = 0xff): void {
  const bytes = fs.readFile(path)!;
  bytes[pos]! ^= mask;
  fs.writeFile(path, bytes);
}

/** Overwrites bytes of the file at `path` from `pos`, durably. */
export function patch(fs: FaultyFileSystem, path: string, pos: number, bytes: ArrayLike<number>): void {
  const file = fs.readFile(path)!;
  file.set(bytes, pos);
  fs.writeFile(path, file);
}

/** The errno a rejected promise's error carries as its cause. */
export function causeCode(err: unknown): string | undefined {
  return ((err as { cause?: { code?: string } })?.cause)?.code;
}

export { FaultyFileSystem };
