/**
 * `ferry`: durable queues for Node.js. The systems live at their own subpaths
 * (`ferry/diskqueue`, `ferry/spool`, `ferry/queue`); this entry exports the
 * error classes every one of them throws, and the guard that recognises them.
 * docs/ERRORS.md describes each code.
 */
export {
  ClosedError,
  CodecError,
  CorruptError,
  DeadLetterLoopError,
  ExceedsCapError,
  FerryError,
  FullError,
  GroupLostError,
  InvalidArgumentError,
  InvalidNameError,
  IOError,
  isFerryError,
  LockedError,
  NoLockerError,
  OffsetError,
  PayloadTooLargeError,
  RecordTooLargeError,
  ScheduleTooFarError,
  SegmentSizeMismatchError,
  UnsupportedError,
  WrongFormatError,
} from './errors.js';
export type { CorruptLocation, CorruptReason, FerryErrorCode, FerryErrorOptions } from './errors.js';
