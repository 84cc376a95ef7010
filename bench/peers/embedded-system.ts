/** What an embedded (one-process, on-disk) queue adapter gives workload 4. */
import Database from 'better-sqlite3';

export interface EmbeddedInstance {
  /** Stores one message; durable when it returns / resolves. */
  publishOne(): Promise<void> | void;
  /** Stores `n` messages in one call. */
  publishBatch(n: number): Promise<void> | void;
  /** Consumes `total` messages (concurrency 16 where the system has it); resolves with msgs/s. */
  drain(total: number): Promise<number>;
  /**
   * Other ways the system consumes, each measured as a row of its own
   * (`embedded.consume.<name>`) on a fresh instance holding `total` messages:
   * consumes them, resolves with msgs/s.
   */
  consumeModes?: Record<string, (total: number) => Promise<number>>;
  close(): Promise<void> | void;
}

export interface EmbeddedSystem {
  name: string;
  packages: string[];
  settings: Array<{ setting: string; value: string; default: string }>;
  caveats: string;
  /** The same in a few words each, for table rows. */
  differs: string[];
  /** More that differs on one row only (by row name, e.g. `embedded.consume.take_batch`). */
  rowDiffers?: Record<string, string>;
  /** SQLite the system links, or undefined when it uses none. */
  sqlite?: () => string;
  /** Whether concurrent single-message publishers mean anything (false for a synchronous API). */
  concurrentPublish: boolean;
  open(dir: string): Promise<EmbeddedInstance>;
}

/** `select sqlite_version()` through the better-sqlite3 this project installs (ferry and plainjob share it). */
export function betterSqliteVersion(): string {
  const db = new Database(':memory:');
  try {
    return (db.prepare('select sqlite_version() as v').get() as { v: string }).v;
  } finally {
    db.close();
  }
}
