/**
 * The cursor file: 24 bytes naming the head's segment and position, rewritten
 * in place on every commit. It is a progress hint, not a durability record: a
 * stale, torn or missing cursor only makes the spool deliver again, bounded by
 * one segment, so a write that fails is counted and reported through
 * `cursorError` instead of failing the commit.
 */
import { join } from 'node:path';
import type { FileHandle, FileSystem } from '../storage/fs.js';
import { asIOError } from '../errors.js';
import type { FerryError } from '../errors.js';
import { GroupCommit } from '../storage/group-commit.js';
import { CURSOR_SIZE, decodeCursor, writeCursor, type CursorPosition } from './format.js';

/** The cursor's file name inside a spool directory. */
export const CURSOR_FILE = 'cursor';

export class CursorFile {
  /** The last failure to persist, cleared by the next success. */
  error: FerryError | undefined;
  /** Failed persists since open. */
  failures = 0;
  private handle: FileHandle | undefined;
  private readonly bytes = new Uint8Array(CURSOR_SIZE);
  private readonly syncs = new GroupCommit(() => this.open().datasync('file'));
  private readonly path: string;
  /** Writes still waiting on their fdatasync; close lets them finish first. */
  private readonly inflight = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly fs: FileSystem,
    dir: string,
    private readonly commitSync: boolean,
  ) {
    this.path = join(dir, CURSOR_FILE);
  }

  /** The stored position; undefined when the file is missing, short, torn or unreadable. */
  load(): CursorPosition | undefined {
    try {
      const h = this.fs.open(this.path, 'r');
      try {
        const buf = new Uint8Array(CURSOR_SIZE);
        const n = h.pread(buf, 0);
        return decodeCursor(buf.subarray(0, n));
      } finally {
        h.close();
      }
    } catch {
      return undefined;
    }
  }

  /**
   * Writes `pos`; under `commitSync` also waits for an fdatasync, which
   * concurrent commits share. Never throws: a failure lands in {@link error}.
   */
  write(pos: CursorPosition): Promise<void> {
    if (this.closed) return Promise.resolve();
    const p = this.persist(pos);
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
    return p;
  }

  private async persist(pos: CursorPosition): Promise<void> {
    try {
      writeCursor(pos, this.bytes);
      this.open().pwrite(this.bytes, 0, 'cursor');
    } catch (err) {
      this.fail(err);
      return;
    }
    if (this.commitSync) {
      try {
        await this.syncs.request();
      } catch (err) {
        this.fail(err);
        return;
      }
    }
    this.error = undefined;
  }

  private fail(err: unknown): void {
    this.failures++;
    this.error = asIOError(`cannot persist the spool cursor ${this.path}`, err);
    // A descriptor whose write or sync failed is not trusted again.
    this.drop();
  }

  /**
   * Creates the cursor file (empty, which reads as "no cursor") when it is
   * missing, so the directory sync that follows at open makes its name
   * durable: a cursor written and synced later would otherwise vanish with
   * its directory entry in a power cut. A failure only shows in {@link error}.
   */
  ensure(): void {
    try {
      this.open();
    } catch (err) {
      this.fail(err);
    }
  }

  /**
   * Waits for the fdatasyncs of writes already made (closing the descriptor
   * under one fails it with EBADF at best, and at worst syncs whatever file
   * reused the number), then drops the descriptor. Later writes do nothing.
   */
  async close(): Promise<void> {
    this.closed = true;
    while (this.inflight.size > 0) await Promise.all(this.inflight);
    this.drop();
  }

  private open(): FileHandle {
    if (this.handle) return this.handle;
    try {
      this.handle = this.fs.open(this.path, 'rw');
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
      this.handle = this.fs.open(this.path, 'create');
    }
    return this.handle;
  }

  private drop(): void {
    const h = this.handle;
    this.handle = undefined;
    try {
      h?.close();
    } catch {
      // abandoned either way
    }
  }
}
