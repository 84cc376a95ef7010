/**
 * `ferry/diskqueue`: a typed, durable FIFO disk queue that doubles as a
 * write-ahead log, after the Go diskqueue
 * (github.com/JohanLindvall/diskqueue). See docs/FORMAT.md for the bytes and
 * docs/DURABILITY.md for what each kind of damage costs.
 */
export { DiskQueue } from './queue.js';
export { Reader, type Reservation } from './reader.js';
export { codecs, type Codec } from './codecs.js';
export type { DiskQueueOptions } from './options.js';
export { DEFAULT_MAX_SEGMENTS } from './options.js';
export type { DiskQueueStats } from './stats.js';
export { DEFAULT_SEGMENT_SIZE, FORMAT_VERSION } from './format.js';
export { packOffset, unpackOffset } from './ledger.js';
export { verifyQueue, type VerifyReport, type VerifyDamage, type VerifyOptions } from './verify.js';
export type { FileSystem } from '../storage/fs.js';
// The error classes and the guard, as `ferry` exports them.
export * from '../index.js';
