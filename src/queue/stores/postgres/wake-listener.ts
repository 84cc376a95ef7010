/**
 * The Postgres store's wake listener: LISTEN on the schema's channel on a
 * dedicated connection outside the pool, reconnecting with a doubling delay
 * when it drops (see `PostgresStore.listen`), and probing the connection
 * every `queryTimeoutMs`, since a frozen or partitioned network sends no
 * error.
 */
import type pg from 'pg';
import { endClient } from './connection.js';

/** The reconnect delay doubles from this… */
const LISTEN_BACKOFF_MIN_MS = 100;
/** …up to this. */
const LISTEN_BACKOFF_MAX_MS = 5000;

/** What the loop needs of its store. */
export interface ListenTarget {
  /** A new client with the store's connection settings (not connected). */
  client(): pg.Client;
  /** The channel to LISTEN on. */
  channel: string;
  /** The store's answer timeout, ms; 0 for none (then no probe either). */
  queryTimeoutMs: number;
  /** Whether the store has closed. */
  closed(): boolean;
  /** The stop of each connection the loop holds, while it holds it: the store's close calls them. */
  stops: Set<() => void>;
}

/** `text` with the store's answer timeout. */
function timed(t: ListenTarget, text: string): pg.QueryConfig {
  const q: pg.QueryConfig = { text };
  if (t.queryTimeoutMs > 0) (q as { query_timeout?: number }).query_timeout = t.queryTimeoutMs;
  return q;
}

/**
 * Listens until `signal` aborts or the store closes, passing notifications
 * to `onNotify`; after a reconnect wakes every topic of `heard` (what was
 * sent meanwhile is lost). Never rejects.
 */
export async function listenLoop(target: ListenTarget, signal: AbortSignal, onNotify: (n: pg.Notification) => void, heard: Set<string>, wake: (topic: string) => void): Promise<void> {
  let delay = LISTEN_BACKOFF_MIN_MS;
  let reconnecting = false;
  while (!signal.aborted && !target.closed()) {
    const client = target.client();
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    client.on('error', stop);
    client.on('end', stop);
    signal.addEventListener('abort', stop, { once: true });
    target.stops.add(stop);
    let probe: NodeJS.Timeout | undefined;
    try {
      await client.connect();
      client.on('notification', onNotify);
      await client.query(timed(target, `LISTEN "${target.channel}"`));
      delay = LISTEN_BACKOFF_MIN_MS;
      if (reconnecting) for (const topic of heard) wake(topic);
      if (target.queryTimeoutMs > 0) {
        let probing = false;
        probe = setInterval(() => {
          if (probing) return;
          probing = true;
          client.query(timed(target, 'SELECT 1')).then(
            () => (probing = false),
            () => stop(),
          );
        }, target.queryTimeoutMs);
      }
      await stopped;
    } catch {
      // Unreachable or dropped: polling carries on meanwhile; try again below.
    } finally {
      clearInterval(probe);
      signal.removeEventListener('abort', stop);
      target.stops.delete(stop);
      await endClient(client, 1000);
    }
    if (signal.aborted || target.closed()) break;
    reconnecting = true;
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, delay);
      function done() {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
    delay = Math.min(delay * 2, LISTEN_BACKOFF_MAX_MS);
  }
}
