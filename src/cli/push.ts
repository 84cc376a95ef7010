/**
 * `ferry push DIR [FILE]`: appends every record of FILE (or stdin) to the
 * queue in DIR.
 *
 * Input is streamed, never read whole: each chunk is cut into records, and
 * records go to the queue through `addBatch` in batches. The next chunk is not
 * pulled until the batch before it is stored (durable under the default per-op
 * policy), so memory stays bounded by one chunk plus one batch however large
 * the input is. From a pipe or a terminal, each chunk read is stored before the
 * next read, so `tail -F log | ferry push DIR` keeps up line by line.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { FerryError, GroupLostError } from '../diskqueue/index.js';
import { isSpoolDir, noteCursorError, noteOpenLosses, openSpool, spoolSink, type PartialBatch } from './spool-dir.js';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, note, noteOpenLoss, openQueue, summaryLine, BATCH_BYTES } from './common.js';
import { FramingError, recordSplitter, type Framing } from './framing.js';
import { startProgress } from './progress.js';

/** Options of `ferry push`, as parsed from the command line. */
export interface PushOptions {
  raw?: boolean;
  /** `--no-sync` sets this false. */
  sync?: boolean;
  syncEvery?: number;
  segmentSize?: number;
  maxSegments?: number;
  maxBytes?: number;
  /** Most records per `addBatch`. */
  batch?: number;
  lockTimeout?: number;
  quiet?: boolean;
}

/** Default records per `addBatch`. */
export const DEFAULT_PUSH_BATCH = 4096;
/** Read size: small enough that one chunk's records are cheap to hold. */
const CHUNK_BYTES = 256 * 1024;

interface Input {
  stream: Readable;
  /** Total bytes when known (a regular file), for the progress bar. */
  size?: number;
  name: string;
  close(): Promise<void>;
}

async function openInput(file: string | undefined): Promise<Input> {
  if (file === undefined || file === '-') {
    const stdin = process.stdin;
    return { stream: stdin, name: 'stdin', close: async () => void stdin.destroy() };
  }
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${describe(err)}`, EXIT_USAGE);
  }
  const st = await fh.stat();
  if (st.isDirectory()) {
    await fh.close();
    throw new CliError(`cannot read ${file}: it is a directory`, EXIT_USAGE);
  }
  const stream = fh.createReadStream({ highWaterMark: CHUNK_BYTES, autoClose: false });
  return {
    stream,
    size: st.isFile() ? st.size : undefined,
    name: file,
    close: async () => {
      stream.destroy();
      await fh.close();
    },
  };
}

/** Runs `ferry push`; resolves to the exit status. */
export async function push(dir: string, file: string | undefined, o: PushOptions): Promise<number> {
  // Two answers to one question (when to flush): refused rather than one silently winning.
  if (o.sync === false && o.syncEvery !== undefined) throw new CliError('give at most one of --no-sync and --sync-every', EXIT_USAGE);
  const started = performance.now();
  const framing: Framing = o.raw ? 'raw' : 'lines';
  const input = await openInput(file);
  let q: { addBatch(records: Uint8Array[]): Promise<number>; close(): Promise<void> } | undefined;
  let stored = 0;
  let storedBytes = 0;
  /** Records after `stored` that may be stored too: a failed batch's sync failed (see `spoolSink`). */
  let unsure = 0;
  const progress = startProgress('push', input.size ?? 0, 'bytes', !o.quiet);
  let failure: CliError | undefined;
  try {
    // A spool directory gets its records as a spool; anything else (a new
    // directory included) is a diskqueue.
    if (await isSpoolDir(dir)) {
      // A spool syncs each batch and has no segment count: these would be ignored.
      const dqOnly = [o.maxSegments !== undefined && '--max-segments', o.sync === false && '--no-sync', o.syncEvery !== undefined && '--sync-every'].filter(Boolean);
      if (dqOnly.length > 0) throw new CliError(`${dqOnly.join(', ')}: for a DiskQueue directory; ${dir} is a spool`, EXIT_USAGE);
      const spool = await openSpool(dir, o.lockTimeout, undefined, { maxBytes: o.maxBytes, segmentBytes: o.segmentSize });
      noteOpenLosses(dir, spool, false);
      noteCursorError(dir, spool); // the push itself stands: the records are stored
      q = spoolSink(spool);
    } else {
      const dq = await openQueue(dir, {
        create: true,
        segmentSize: o.segmentSize,
        maxSegments: o.maxSegments,
        maxBytes: o.maxBytes,
        syncEvery: o.syncEvery,
        noSync: o.sync === false,
        lockTimeoutMs: o.lockTimeout,
      });
      noteOpenLoss(dir, dq);
      q = dq;
    }
    const queue = q;
    const splitter = recordSplitter(framing);
    const batcher = new Batcher(o.batch ?? DEFAULT_PUSH_BATCH, async (records, bytes) => {
      try {
        await queue.addBatch(records);
      } catch (err) {
        const placed = (err as { placed?: number }).placed ?? 0;
        unsure = (err as PartialBatch).unsure ?? 0;
        stored += placed;
        for (let i = 0; i < placed; i++) storedBytes += records[i]!.length;
        throw err;
      }
      stored += records.length;
      storedBytes += bytes;
    });
    const store = () => batcher.flush();
    const take = (records: Buffer[]) => batcher.add(records);

    // A framing fault keeps the records framed before it: they are stored, then the fault is reported.
    let fault: FramingError | undefined;
    const cut = (f: () => Buffer[]): Buffer[] => {
      try {
        return f();
      } catch (err) {
        if (!(err instanceof FramingError)) throw err;
        fault = err;
        return err.records;
      }
    };

    let read = 0;
    const chunks = (input.stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await chunks.next();
      } catch (err) {
        // The input failed mid-way: keep what was framed so far, then report.
        await store();
        throw new CliError(`cannot read ${input.name}: ${describe(err)}`, EXIT_FAILED);
      }
      if (next.done) break;
      read += next.value.length;
      const chunk = next.value;
      await take(cut(() => splitter.push(chunk)));
      // A pipe delivers what its producer has written so far: store it now
      // rather than let a slow producer's lines wait, unstored, for a full batch.
      if (input.size === undefined) await store();
      progress.update(read);
      if (fault) break;
    }
    if (!fault) await take(cut(() => splitter.end()));
    await store();
    if (fault) throw fault;
  } catch (err) {
    failure = pushFailure(err, input.name, stored, unsure);
  } finally {
    progress.stop();
    // Under --no-sync or --sync-every, this final flush is what makes the records durable.
    await q?.close().catch((err) => {
      failure ??= new CliError(`closing the queue failed: ${describe(err)}; ${stored} records were stored before it`);
    });
    await input.close();
  }
  if (failure) throw failure;
  if (!o.quiet) note(summaryLine('pushed', stored, storedBytes, started));
  return 0;
}

/**
 * Cuts the records it is given into batches of at most `limit` records (and
 * about `BATCH_BYTES`), each handed to `store` in order. The limit is checked
 * per record: one 256 KiB read can hold thousands of short lines. Callers
 * may add at once: batches are stored one at a time, in the order they fill.
 */
export class Batcher {
  private batch: Buffer[] = [];
  private bytes = 0;
  /** Settles when every batch handed to `store` so far is stored. */
  private stored: Promise<void> = Promise.resolve();

  constructor(
    private readonly limit: number,
    private readonly store: (records: Buffer[], bytes: number) => Promise<void>,
  ) {}

  /** Adds `records`, storing each batch that fills; resolves once they are stored. */
  async add(records: readonly Buffer[]): Promise<void> {
    for (const r of records) {
      this.batch.push(r);
      this.bytes += r.length;
      if (this.batch.length >= this.limit || this.bytes >= BATCH_BYTES) await this.flush();
    }
  }

  /**
   * Stores what is held, if anything, after every batch before it; resolves
   * once all of them are stored. After a store fails, no later batch is
   * stored and each flush rejects with that failure.
   */
  flush(): Promise<void> {
    if (this.batch.length > 0) {
      const records = this.batch;
      const bytes = this.bytes;
      this.batch = [];
      this.bytes = 0;
      this.stored = this.stored.then(() => this.store(records, bytes));
    }
    return this.stored;
  }
}

/** The CliError `ferry push` exits with for `err`, saying what was stored before it. */
export function pushFailure(err: unknown, input: string, stored: number, unsure: number): CliError {
  const kept =
    `${stored} records before it were stored` +
    (unsure > 0 ? `, and up to ${unsure} after them may be too (a failed write or sync cut part of their batch: a rerun from there may store some twice)` : '');
  if (err instanceof CliError) {
    return err.exitCode === EXIT_USAGE ? err : new CliError(`${err.message}; ${kept}`, err.exitCode);
  }
  if (err instanceof FramingError) return new CliError(`${input}: ${err.message} (at input byte ${err.inputOffset}); ${kept}`);
  // The library's advice (call sync(), re-append the group) is for its callers; push has done that part.
  if (err instanceof GroupLostError) {
    const cause = err.cause === undefined ? '' : `: ${describe(err.cause)}`;
    return new CliError(`a write to the spool failed${cause} (${err.code}); ${kept}`);
  }
  if (err instanceof FerryError) return new CliError(`${describe(err)} (${err.code}); ${kept}`);
  return new CliError(`push failed: ${describe(err)}; ${kept}`);
}
