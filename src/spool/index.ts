/**
 * `ferry/spool`: a bounded, durable FIFO byte queue for store-and-forward,
 * after the Go spool (github.com/JohanLindvall/spool). See docs/SPOOL.md for
 * the contract, docs/FORMAT.md for the bytes and docs/DURABILITY.md for what
 * each kind of damage costs.
 */
export { Spool } from './spool.js';
export { Popped } from './popped.js';
export { PoppedRun, type RecordRun } from './popped-run.js';
export { DEFAULT_MAX_BYTES, DEFAULT_SEGMENT_BYTES, UNBOUNDED, type SpoolOptions } from './options.js';
export type { SpoolStats } from './stats.js';
export { FRAME_OVERHEAD, MAX_RECORD_BYTES, FORMAT_VERSION } from './format.js';
export { verifySpool, type SpoolVerifyReport, type SpoolDamage } from './verify.js';
export type { FileSystem } from '../storage/fs.js';
// The error classes and the guard, as `ferry` exports them.
export * from '../index.js';
