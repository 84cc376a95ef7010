/**
 * Which of the notifications a Postgres store's listener hears are the
 * store's own: sent by a statement of this store, on a connection of its
 * pool, by a call whose queue woke its own subscriptions when the call
 * returned (engine.ts). Woken again by that echo, a subscription would
 * claim once more for nothing (on one key lane, an empty claim per message
 * and the echo's round trip before the next claim).
 *
 * A notification carries the backend PID of the connection that sent it.
 * A PID is this store's while one of the connections it checked out of the
 * pool has it (the pool's `remove` event ends that: the server may give the
 * PID to another session later). A borrowed pool may serve other stores of
 * this process; only ferry stores of the same schema notify on its channel,
 * so the PIDs are telling only while this store is the one store of its
 * schema on that pool in this process. Other instances' notifications come
 * from their own sessions' PIDs and are always heard.
 */
import type pg from 'pg';

/** Stores open in this process, by pool, then schema. */
const openStores = new WeakMap<pg.Pool, Map<string, number>>();

/** One store's record of its own connections' PIDs. */
export class OwnNotifications {
  readonly #pool: pg.Pool;
  readonly #schema: string;
  readonly #pids = new Set<number>();
  readonly #onRemove = (c: pg.Client) => this.#pids.delete((c as unknown as { processID: number }).processID);
  #closed = false;

  constructor(pool: pg.Pool, schema: string) {
    this.#pool = pool;
    this.#schema = schema;
    let bySchema = openStores.get(pool);
    if (!bySchema) openStores.set(pool, (bySchema = new Map()));
    bySchema.set(schema, (bySchema.get(schema) ?? 0) + 1);
    pool.on('remove', this.#onRemove);
  }

  /** Records a connection the store checked out. */
  checkedOut(client: pg.PoolClient): void {
    const pid = (client as unknown as { processID?: number }).processID;
    if (pid) this.#pids.add(pid);
  }

  /** Whether a notification from backend `pid` was sent by this store (never after `close`). */
  isOwn(pid: number): boolean {
    return !this.#closed && openStores.get(this.#pool)?.get(this.#schema) === 1 && this.#pids.has(pid);
  }

  /** The store closed: it no longer counts among the pool's stores. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pool.off('remove', this.#onRemove);
    const bySchema = openStores.get(this.#pool);
    const n = (bySchema?.get(this.#schema) ?? 1) - 1;
    if (n > 0) bySchema!.set(this.#schema, n);
    else bySchema?.delete(this.#schema);
  }
}
