/**
 * How the CLI cuts a byte stream into records and writes records back out
 * (docs/CLI.md, "Framing"). Pure: no I/O, so chunk boundaries can be tested
 * directly.
 *
 * - lines: a record is the bytes of one line without its `\n`. Nothing else is
 *   touched (a `\r` before the `\n` stays in the record). An empty line is an
 *   empty record; a last line without `\n` is still a record. On output every
 *   record is followed by `\n`, so a newline-terminated input round-trips
 *   byte for byte.
 * - raw: a record is `length (u32 big-endian) ‖ bytes`, for payloads that may
 *   contain `\n` or any other byte.
 */
import type { RecordRun } from '../spool/popped-run.js';

/** How records are framed on stdin/stdout. */
export type Framing = 'lines' | 'raw';

/** Bytes of the raw length prefix. */
export const RAW_PREFIX_BYTES = 4;
/** The largest record the CLI reads or writes: 1 GiB. A longer line or length prefix is refused. */
export const MAX_RECORD_BYTES = 2 ** 30;

/**
 * Environment variable that lowers the record limit below
 * {@link MAX_RECORD_BYTES}, so tests can exercise the refusal without a
 * gibibyte of input. Undocumented for users; it can only lower the limit.
 */
export const TEST_LIMIT_ENV = 'FERRY_TEST_MAX_RECORD_BYTES';

/** The record limit in force: {@link MAX_RECORD_BYTES}, or a smaller one from {@link TEST_LIMIT_ENV}. */
export function recordLimit(env: NodeJS.ProcessEnv = process.env): number {
  const v = env[TEST_LIMIT_ENV];
  if (v === undefined || !/^\d+$/.test(v)) return MAX_RECORD_BYTES;
  return Math.min(Number(v), MAX_RECORD_BYTES);
}

const NEWLINE = 0x0a;
const EMPTY = Buffer.alloc(0);

/** The input is not a valid record stream; the records framed before the fault are still good. */
export class FramingError extends Error {
  /** Records the failing `push` completed before the fault; they are good. */
  records: Buffer[] = [];

  constructor(
    message: string,
    /** Bytes of input consumed when the fault was found. */
    readonly inputOffset: number,
  ) {
    super(message);
    this.name = 'FramingError';
  }
}

/** Cuts a stream into records chunk by chunk; `end()` returns what the last chunk left over. */
export interface RecordSplitter {
  /** Records completed by `chunk`. They may be views into `chunk`; the caller must not reuse it. */
  push(chunk: Buffer): Buffer[];
  /** Call at end of input: the trailing record, if any. @throws FramingError the input ends inside a record. */
  end(): Buffer[];
}

/** Lines that lie in one buffer, as a spool's `appendRunNoSync` takes them. */
export type LineRun = RecordRun;

/** The records of `runs`, each as a view. */
function viewsOf(runs: readonly LineRun[]): Buffer[] {
  const out: Buffer[] = [];
  for (const r of runs) for (let k = 0; k < r.starts.length; k++) out.push(Buffer.from(r.bytes.buffer, r.bytes.byteOffset + r.starts[k]!, r.lengths[k]!));
  return out;
}

export class LineSplitter implements RecordSplitter {
  /** Pieces of a line that started in an earlier chunk (never more than `max` bytes). */
  private partial: Buffer[] = [];
  private partialLen = 0;
  private consumed = 0;

  constructor(private readonly max: number) {}

  /**
   * Every line is measured before any of it is kept: a line is refused as
   * soon as its bytes so far pass the limit, whether its end is in this
   * chunk or not, so what is held stays below the limit plus one chunk
   * whatever the chunk sizes of the input are.
   */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl < 0) break;
      if (this.partialLen + (nl - start) > this.max) throw this.tooLong(out, start + this.max - this.partialLen);
      out.push(this.take(chunk.subarray(start, nl)));
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.partialLen + rest.length > this.max) throw this.tooLong(out, start + this.max - this.partialLen);
      this.partialLen += rest.length;
      this.partial.push(rest);
    }
    this.consumed += chunk.length;
    return out;
  }

  /**
   * {@link push} without a view per line: the lines `chunk` completes as
   * runs, the one begun in an earlier chunk (joined) as a run of its own,
   * then those wholly inside `chunk` as one run over it. The same limits
   * and refusal as `push` (its `records` as views).
   */
  pushRuns(chunk: Buffer): LineRun[] {
    const out: LineRun[] = [];
    let start = 0;
    let nl = chunk.indexOf(NEWLINE);
    if (nl >= 0 && this.partial.length > 0) {
      if (this.partialLen + nl > this.max) throw this.tooLong([], this.max - this.partialLen);
      const line = this.take(chunk.subarray(0, nl));
      out.push({ bytes: line, starts: [0], lengths: [line.length] });
      start = nl + 1;
      nl = chunk.indexOf(NEWLINE, start);
    }
    const starts: number[] = [];
    const lengths: number[] = [];
    for (; nl >= 0; nl = chunk.indexOf(NEWLINE, start)) {
      if (this.partialLen + (nl - start) > this.max) {
        if (starts.length > 0) out.push({ bytes: chunk, starts, lengths });
        throw this.tooLong(viewsOf(out), start + this.max - this.partialLen);
      }
      starts.push(start);
      lengths.push(nl - start);
      start = nl + 1;
    }
    if (starts.length > 0) out.push({ bytes: chunk, starts, lengths });
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.partialLen + rest.length > this.max) throw this.tooLong(viewsOf(out), start + this.max - this.partialLen);
      this.partialLen += rest.length;
      this.partial.push(rest);
    }
    this.consumed += chunk.length;
    return out;
  }

  /** The refusal of the line in progress; `at` is the chunk offset of its first byte past the limit. */
  private tooLong(records: Buffer[], at: number): FramingError {
    const err = new FramingError(`a line longer than ${this.max} bytes (the record limit)`, this.consumed + at);
    err.records = records;
    this.partial = [];
    this.partialLen = 0;
    return err;
  }

  end(): Buffer[] {
    if (this.partial.length === 0) return [];
    return [this.take(EMPTY)];
  }

  /** The line ending with `tail`, joined with what earlier chunks left. */
  private take(tail: Buffer): Buffer {
    if (this.partial.length === 0) return tail.length === 0 ? EMPTY : tail;
    this.partial.push(tail);
    const line = Buffer.concat(this.partial, this.partialLen + tail.length);
    this.partial = [];
    this.partialLen = 0;
    return line;
  }
}

class RawSplitter implements RecordSplitter {
  constructor(private readonly max: number) {}

  private prefix = Buffer.alloc(RAW_PREFIX_BYTES);
  private prefixLen = 0;
  /** The record being filled across chunks, once its length is known. */
  private body: Buffer | undefined;
  private bodyLen = 0;
  private consumed = 0;

  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    try {
      this.cut(chunk, out);
    } catch (err) {
      if (err instanceof FramingError) err.records = out;
      throw err;
    }
    this.consumed += chunk.length;
    return out;
  }

  private cut(chunk: Buffer, out: Buffer[]): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.body !== undefined) {
        const n = Math.min(this.body.length - this.bodyLen, chunk.length - i);
        chunk.copy(this.body, this.bodyLen, i, i + n);
        this.bodyLen += n;
        i += n;
        if (this.bodyLen === this.body.length) {
          out.push(this.body);
          this.body = undefined;
        }
        continue;
      }
      if (this.prefixLen === 0 && chunk.length - i >= RAW_PREFIX_BYTES) {
        // Fast path: the prefix is whole in this chunk, and often the payload too.
        const len = this.checkLength(chunk.readUInt32BE(i), i);
        i += RAW_PREFIX_BYTES;
        if (chunk.length - i >= len) {
          out.push(len === 0 ? EMPTY : chunk.subarray(i, i + len));
          i += len;
        } else {
          this.body = Buffer.allocUnsafe(len);
          this.bodyLen = 0;
        }
        continue;
      }
      const n = Math.min(RAW_PREFIX_BYTES - this.prefixLen, chunk.length - i);
      chunk.copy(this.prefix, this.prefixLen, i, i + n);
      this.prefixLen += n;
      i += n;
      if (this.prefixLen < RAW_PREFIX_BYTES) continue;
      this.prefixLen = 0;
      const len = this.checkLength(this.prefix.readUInt32BE(0), i);
      if (len === 0) out.push(EMPTY);
      else {
        this.body = Buffer.allocUnsafe(len);
        this.bodyLen = 0;
      }
    }
  }

  end(): Buffer[] {
    const at = this.consumed;
    if (this.body !== undefined) {
      throw new FramingError(`input ends inside a record: ${this.bodyLen} of its ${this.body.length} bytes arrived`, at);
    }
    if (this.prefixLen > 0) {
      throw new FramingError(`input ends inside a length prefix: ${this.prefixLen} of ${RAW_PREFIX_BYTES} bytes arrived`, at);
    }
    return [];
  }

  private checkLength(len: number, i: number): number {
    if (len > this.max) {
      throw new FramingError(`length prefix ${len} exceeds the ${this.max}-byte record limit`, this.consumed + i);
    }
    return len;
  }
}

/** A fresh splitter for `framing` that refuses records longer than `maxRecordBytes` (default {@link recordLimit}). */
export function recordSplitter(framing: Framing, maxRecordBytes: number = recordLimit()): RecordSplitter {
  return framing === 'raw' ? new RawSplitter(maxRecordBytes) : new LineSplitter(maxRecordBytes);
}

/** Bytes `records` take when framed. */
export function framedLength(records: readonly Uint8Array[], framing: Framing): number {
  let n = 0;
  for (const r of records) n += r.length;
  return n + records.length * (framing === 'raw' ? RAW_PREFIX_BYTES : 1);
}

/** `records` framed one after another in one buffer. */
export function encodeRecords(records: readonly Uint8Array[], framing: Framing): Buffer {
  const out = Buffer.allocUnsafe(framedLength(records, framing));
  let at = 0;
  for (const r of records) {
    if (framing === 'raw') at = out.writeUInt32BE(r.length, at);
    out.set(r, at);
    at += r.length;
    if (framing === 'lines') out[at++] = NEWLINE;
  }
  return out;
}
