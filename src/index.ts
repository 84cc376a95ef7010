/**
 * `ferry`: durable queues for Node.js. The systems live at their own subpaths
 * (`ferry/diskqueue`, `ferry/spool`, `ferry/queue`); this entry re-exports the
 * error classes every one of them throws.
 */
export * from './errors.js';
