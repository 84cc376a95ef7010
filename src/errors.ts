/**
 * ferry's error hierarchy. Every error ferry throws is a {@link FerryError}
 * with a stable string `code`; the code is the contract, the message is for
 * people. Where an upstream Go design wraps one sentinel in another, the subclass extends the
 * class it wraps, so `instanceof` answers what Go's `errors.Is` answered.
 * `instanceof` only knows the classes of one copy of ferry, though, and an
 * application can load two (two packages each depending on their own):
 * {@link isFerryError} recognises an error of any copy by a brand registered
 * under a global symbol, as undici does. docs/ERRORS.md has one section per code.
 *
 * Payload bytes never go into enumerable error fields.
 */

/**
 * The class behind each code. A code names one class; a class may be
 * recognised by `instanceof` under its parent too (`ExceedsCapError` is a
 * `FullError` whose code is `ERR_EXCEEDS_CAP`).
 */
export interface FerryErrorClasses {
  ERR_FULL: FullError;
  ERR_EXCEEDS_CAP: ExceedsCapError;
  ERR_RECORD_TOO_LARGE: RecordTooLargeError;
  ERR_CLOSED: ClosedError;
  ERR_CORRUPT: CorruptError;
  ERR_IO: IOError;
  ERR_LOCKED: LockedError;
  ERR_CODEC: CodecError;
  ERR_SEGMENT_SIZE_MISMATCH: SegmentSizeMismatchError;
  ERR_GROUP_LOST: GroupLostError;
  ERR_INVALID_NAME: InvalidNameError;
  ERR_PAYLOAD_TOO_LARGE: PayloadTooLargeError;
  ERR_SCHEDULE_TOO_FAR: ScheduleTooFarError;
  ERR_DEAD_LETTER_LOOP: DeadLetterLoopError;
  ERR_UNSUPPORTED: UnsupportedError;
  ERR_NO_LOCKER: NoLockerError;
  ERR_OFFSET: OffsetError;
  ERR_INVALID_ARGUMENT: InvalidArgumentError;
  ERR_WRONG_FORMAT: WrongFormatError;
}

/** Every code a ferry error can carry. Stable across releases: a code is added, never renamed. */
export type FerryErrorCode = keyof FerryErrorClasses;

/**
 * The brand every ferry error carries, under a symbol from the global
 * registry, so every copy of ferry loaded in a process shares it.
 */
const BRAND = Symbol.for('ferry.error');

/** Options accepted by every ferry error. */
export interface FerryErrorOptions {
  /** The underlying error, typically a Node system error (`EIO`, `ENOSPC`…). */
  cause?: unknown;
}

/** Base class of every error ferry throws. `code` is stable across releases. */
export class FerryError extends Error {
  /** Stable machine-readable code, e.g. `ERR_FULL`. */
  readonly code: FerryErrorCode;
  /** Set when a batch stopped early on this error: how many leading items were placed. */
  placed?: number;

  constructor(code: FerryErrorCode, message: string, options?: FerryErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = new.target.name;
  }
}

// The brand lives on the prototype, not enumerable, so it stays out of each
// error's own fields (and out of what `util.inspect` prints).
Object.defineProperty(FerryError.prototype, BRAND, { value: true });

/**
 * Whether `err` is an error thrown by ferry (by any copy of it loaded in the
 * process), and, given a `code`, one with that code. Prefer it to
 * `instanceof` wherever an error may come from ferry code you did not import
 * yourself. Narrows to the code's class: `isFerryError(err, 'ERR_IO')` gives
 * an `IOError`, so `err.transient` can be read.
 */
export function isFerryError(err: unknown): err is FerryError;
export function isFerryError<C extends FerryErrorCode>(err: unknown, code: C): err is FerryErrorClasses[C];
export function isFerryError(err: unknown, code?: FerryErrorCode): boolean {
  if (typeof err !== 'object' || err === null || (err as { [BRAND]?: unknown })[BRAND] !== true) return false;
  return code === undefined || (err as { code?: unknown }).code === code;
}

/**
 * The queue is at a cap (segment count, `maxBytes`, spool byte cap). It clears
 * as the consumer commits; `addWait` waits for that. The Go diskqueue's `ErrFull`.
 */
export class FullError extends FerryError {
  constructor(message = 'queue is full', options?: FerryErrorOptions & { code?: 'ERR_FULL' | 'ERR_EXCEEDS_CAP' }) {
    super(options?.code ?? 'ERR_FULL', message, options);
  }
}

/** The spool's byte cap would be exceeded by this append (the Go spool's `ErrExceedsCap`, wraps `ErrFull`). */
export class ExceedsCapError extends FullError {
  constructor(message = 'append exceeds the byte cap', options?: FerryErrorOptions) {
    super(message, { ...options, code: 'ERR_EXCEEDS_CAP' });
  }
}

/** A record larger than any cap could ever admit (the Go diskqueue's `ErrRecordTooLarge`). Waiting cannot fix it. */
export class RecordTooLargeError extends FerryError {
  constructor(message = 'record is too large', options?: FerryErrorOptions) {
    super('ERR_RECORD_TOO_LARGE', message, options);
  }
}

/** The queue, reader, spool or subscription was closed. */
export class ClosedError extends FerryError {
  constructor(message = 'closed', options?: FerryErrorOptions) {
    super('ERR_CLOSED', message, options);
  }
}

/**
 * What a {@link CorruptError} found. A consuming read, DiskQueue or spool:
 * `checksum` (a record failed its checksum), `length` (a length prefix that
 * cannot be right: the rest of the segment is lost); a DiskQueue's also
 * `missing` (the segment file is gone; the spool counts that loss under this
 * reason too but throws an `IOError` for it); the spool's also `short` (its
 * file holds fewer bytes than were written to it). A DiskQueue's open: `header-rebuilt` (an unreadable header
 * rebuilt from the records behind it), `truncated` (the file ends before its
 * header's write cursor), `segment-missing` (a gap in the segment numbers),
 * and a segment dropped whole for its header: `segment-short` (shorter than a
 * header), `segment-zero` (all zeros), `segment-magic` (not a segment's
 * magic), `segment-insane` (fields no segment can have). A spool's open:
 * `header` (a segment whose header is unreadable, dropped). docs/DURABILITY.md
 * says what each costs.
 */
export type CorruptReason =
  | 'checksum'
  | 'length'
  | 'missing'
  | 'short'
  | 'header-rebuilt'
  | 'truncated'
  | 'segment-missing'
  | 'segment-short'
  | 'segment-zero'
  | 'segment-magic'
  | 'segment-insane'
  | 'header';

/** Where a {@link CorruptError} was found. */
export interface CorruptLocation {
  /** Segment number (diskqueue) or sequence (spool), when known. */
  segment?: number;
  /** Byte position in the segment file, when known. */
  position?: number;
  /** What was found. */
  reason: CorruptReason;
  /** Bytes this event cost, when known. */
  lostBytes?: number;
  /** Records this event cost, when known. */
  lostRecords?: number;
}

/**
 * Damaged bytes were found and stepped past. The loss is already counted in
 * `stats()`; reading again continues after the damage. The Go diskqueue's `ErrCorrupt`.
 */
export class CorruptError extends FerryError {
  readonly segment?: number;
  readonly position?: number;
  readonly reason: CorruptReason;
  readonly lostBytes?: number;
  readonly lostRecords?: number;

  constructor(loc: CorruptLocation, message?: string) {
    super(
      'ERR_CORRUPT',
      message ??
        `corrupt data (${loc.reason})` +
          (loc.segment !== undefined ? ` in segment ${loc.segment}` : '') +
          (loc.position !== undefined ? ` at byte ${loc.position}` : ''),
    );
    this.segment = loc.segment;
    this.position = loc.position;
    this.reason = loc.reason;
    this.lostBytes = loc.lostBytes;
    this.lostRecords = loc.lostRecords;
  }
}

/**
 * An I/O failure. `cause` holds the original system error (its `code` is the
 * errno name). After a failed fsync the queue latches and every later write
 * rejects with an `IOError` whose cause is the original failure. The Go diskqueue's `ErrIO`.
 */
export class IOError extends FerryError {
  /**
   * Whether trying the same call again may succeed: true for a dropped or
   * frozen connection, a timeout, a busy or locked database, a deadlock; false
   * when the store's database refused the call itself (a constraint, a data or
   * syntax error, a missing right, a read-only or full or corrupt file), which
   * a retry would meet again. Default true.
   */
  readonly transient: boolean;

  constructor(message: string, options?: FerryErrorOptions & { transient?: boolean }) {
    super('ERR_IO', message, options);
    this.transient = options?.transient ?? true;
  }
  /** The errno name of the cause (`EIO`, `ENOSPC`, …), when it has one. */
  get errno(): string | undefined {
    const c = this.cause as { code?: unknown } | undefined;
    return typeof c?.code === 'string' ? c.code : undefined;
  }
}

/** Another queue, in this process or another, holds the directory. */
export class LockedError extends FerryError {
  constructor(message = 'directory is locked by another queue', options?: FerryErrorOptions) {
    super('ERR_LOCKED', message, options);
  }
}

/** The codec rejected a value or a record (the record stays at the head; `skip()` discards it). */
export class CodecError extends FerryError {
  constructor(message: string, options?: FerryErrorOptions) {
    super('ERR_CODEC', message, options);
  }
}

/** The directory was created with another segment size; nothing was touched. */
export class SegmentSizeMismatchError extends FerryError {
  readonly stored: number;
  readonly requested: number;
  constructor(stored: number, requested: number) {
    super(
      'ERR_SEGMENT_SIZE_MISMATCH',
      `directory was created with segmentSize ${stored}, opened with ${requested}`,
    );
    this.stored = stored;
    this.requested = requested;
  }
}

/** A spool sync group was rolled back by a failed write or fsync (the Go spool's `ErrGroupLost`). */
export class GroupLostError extends FerryError {
  constructor(message = 'sync group was rolled back', options?: FerryErrorOptions) {
    super('ERR_GROUP_LOST', message, options);
  }
}

/** A topic or group name is empty, too long or has characters outside `[A-Za-z0-9._-]`. */
export class InvalidNameError extends FerryError {
  constructor(message: string) {
    super('ERR_INVALID_NAME', message);
  }
}

/** A message payload is larger than the queue's `maxPayloadBytes`. */
export class PayloadTooLargeError extends FerryError {
  constructor(message: string, options?: FerryErrorOptions) {
    super('ERR_PAYLOAD_TOO_LARGE', message, options);
  }
}

/** A message's `deliverAt` is further ahead than the queue retains messages. */
export class ScheduleTooFarError extends FerryError {
  constructor(message: string) {
    super('ERR_SCHEDULE_TOO_FAR', message);
  }
}

/** The dead-letter topic equals the subscribed topic. */
export class DeadLetterLoopError extends FerryError {
  constructor(message = 'dead-letter topic is the subscribed topic') {
    super('ERR_DEAD_LETTER_LOOP', message);
  }
}

/** The backend cannot provide this operation. */
export class UnsupportedError extends FerryError {
  constructor(message = 'unsupported', options?: FerryErrorOptions) {
    super('ERR_UNSUPPORTED', message, options);
  }
}

/** The backend needs a distributed locker to consume safely and none was given. */
export class NoLockerError extends FerryError {
  constructor(message = 'a distributed locker is required') {
    super('ERR_NO_LOCKER', message);
  }
}

/** An offset passed to `ack` or `commit` names no record this queue handed out. */
export class OffsetError extends FerryError {
  constructor(message: string) {
    super('ERR_OFFSET', message);
  }
}

/**
 * A caller passed a value the API cannot take: an option of the wrong type or
 * out of range, a malformed message, a duplicate registration. Nothing changed.
 */
export class InvalidArgumentError extends FerryError {
  constructor(message: string) {
    super('ERR_INVALID_ARGUMENT', message);
  }
}

/**
 * The directory holds the other format's files: a spool's (`cursor`,
 * `NNN….seg`) where a DiskQueue was opened, or a DiskQueue's (`data.NNNNNNNN`)
 * where a spool was. The open created and changed nothing.
 */
export class WrongFormatError extends FerryError {
  /** The format the files found belong to. */
  readonly found: 'diskqueue' | 'spool';
  /** The names of those files (the first few). */
  readonly files: readonly string[];
  constructor(message: string, found: 'diskqueue' | 'spool', files: readonly string[]) {
    super('ERR_WRONG_FORMAT', message);
    this.found = found;
    this.files = files;
  }
}

/**
 * How a component words the `IOError`s it wraps driver and system errors in
 * (see {@link asIOError}).
 */
export interface IOErrorSource {
  /** The component, at the head of the message: `postgres store: <what> failed: <cause's message>`. */
  readonly name: string;
  /** Append the cause's own `code` (a SQLSTATE, say) in parentheses. */
  readonly withCode?: boolean;
  /** Keep only the first line of the cause's message (a server's may carry a stack after it). */
  readonly firstLine?: boolean;
  /** Whether a retry may succeed, judged from the cause; without it the `IOError` says true. */
  readonly transient?: (err: unknown) => boolean;
  /** The cause's message in the component's own terms (a driver's timeout named by the option that set it); unchanged when it returns undefined. */
  readonly reword?: (text: string) => string | undefined;
}

/**
 * `err` as a ferry error: a ferry error (of any copy) passes through
 * unchanged; anything else (a system error, a driver's) becomes an
 * `IOError` with `err` as its `cause`, whose message says what failed.
 * Without a `source` the message is `<what>: <cause's message>`, the file
 * layer's wording; with one, `<source.name>: <what> failed: <cause's message>`.
 * Internal: the entry points do not export it.
 */
export function asIOError(what: string, err: unknown, source?: IOErrorSource): FerryError {
  if (isFerryError(err)) return err;
  const e = err as { message?: string; code?: unknown } | null | undefined;
  const text = e?.message ?? String(err);
  if (source === undefined) return new IOError(`${what}: ${text}`, { cause: err });
  const own = source.firstLine ? text.split('\n')[0]! : text;
  const line = source.reword?.(own) ?? own;
  const code = source.withCode && e?.code ? ` (${String(e.code)})` : '';
  return new IOError(`${source.name}: ${what} failed: ${line}${code}`, { cause: err, transient: source.transient?.(err) });
}
