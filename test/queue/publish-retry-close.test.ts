/**
 * A publish whose store append failed with an error that may pass is tried
 * again, but not once the queue's close has begun: on SQLite a try may block
 * for the whole busy timeout, past close's deadline (found with another
 * process holding the write lock: close returned, and the publish then
 * started a new 5 s try and rejected with SQLITE_BUSY after it). It rejects
 * with ClosedError instead, its messages not stored, as any call close cut
 * short does. Without a close the same failure is retried and stored.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClosedError, IOError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import type { StoredMessage } from '../../src/queue/types.js';

/** A memory store whose appends fail (transiently) while `busy`, each try counted. */
class BusyStore extends MemoryStore {
  busy = true;
  tries = 0;
  /** Resolves at the first try. */
  tried!: () => void;
  readonly firstTry = new Promise<void>((resolve) => (this.tried = resolve));

  override async append(msgs: StoredMessage[]): Promise<void> {
    this.tries++;
    this.tried();
    if (this.busy) throw new IOError('the database is locked', { transient: true });
    return super.append(msgs);
  }
}

describe('a publish waiting to retry when close begins', () => {
  it('rejects with ClosedError and makes no try after close began; nothing is stored', async () => {
    const store = new BusyStore();
    const q = createStoreQueue(store, { onError: () => {} });
    const publishing = q.publish({ topic: 't', payload: new Uint8Array([1]) });
    publishing.catch(() => undefined);
    await store.firstTry;
    const before = store.tries;
    await q.close({ timeoutMs: 10_000 });
    await assert.rejects(publishing, (err: unknown) => {
      assert.ok(err instanceof ClosedError, `a ClosedError, got ${String(err)}`);
      assert.ok((err as Error).cause instanceof IOError, 'the failure it met is its cause');
      return true;
    });
    assert.equal(store.tries, before, 'no try after close began');
  });

  it('without a close the same failure is tried again and the publish is stored', async () => {
    const store = new BusyStore();
    const q = createStoreQueue(store, { onError: () => {} });
    try {
      const publishing = q.publish({ topic: 't', payload: new Uint8Array([1]) });
      await store.firstTry;
      store.busy = false;
      const [id] = await publishing;
      assert.equal(store.tries, 2);
      assert.equal((await q.listMessages('t')).messages.map((m) => m.id).join(), id);
    } finally {
      await q.close();
    }
  });
});
