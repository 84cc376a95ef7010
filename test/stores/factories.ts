/**
 * The stores the conformance suite runs against. Adding a store is one line in
 * `STORE_FACTORIES`. The Postgres and ClickHouse factories need a server (see
 * ./postgres-env.ts, ./clickhouse-env.ts); without one their suites are
 * skipped, except under CI.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryBacking, MemoryStore } from '../../src/queue/stores/memory.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import type { Store } from '../../src/queue/types.js';
import { clickhouseFactory } from './clickhouse-env.js';
import { postgresFactory } from './postgres-env.js';

/** One isolated data set; every `open()` is another instance over it. */
export interface StoreHarness {
  /** A new store handle on the harness's data, as another process or host would have. */
  open(): Promise<Store>;
  /** Closes every handle opened here and removes the data. */
  cleanup(): Promise<void>;
}

export interface StoreFactory {
  name: string;
  /** Set when this store cannot run here: the reason its suites are skipped. */
  skip?: string;
  /**
   * How many times longer than the in-process stores' this store's round
   * trips may take on a busy machine (1 when absent). Tests of leases scale
   * their lease and handler durations by it: a lease must outlast a few
   * renewals, and ClickHouse's fenced renewals take about 100 ms under load.
   */
  slowness?: number;
  create(): Promise<StoreHarness>;
}

export function tracked(openOne: () => Promise<Store>, remove: () => void): StoreHarness {
  const opened: Store[] = [];
  return {
    async open() {
      const s = await openOne();
      opened.push(s);
      return s;
    },
    async cleanup() {
      for (const s of opened) await s.close().catch(() => undefined);
      remove();
    },
  };
}

export const memoryFactory: StoreFactory = {
  name: 'memory',
  async create() {
    const backing = new MemoryBacking();
    return tracked(async () => new MemoryStore({ backing }), () => undefined);
  },
};

export const sqliteFactory: StoreFactory = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-queue-'));
    const path = join(dir, 'queue.db');
    // synchronous=normal keeps the suite quick; durability is covered by the crash test.
    return tracked(() => SqliteStore.open({ path, synchronous: 'normal' }), () => rmSync(dir, { recursive: true, force: true }));
  },
};

export const STORE_FACTORIES: StoreFactory[] = [memoryFactory, sqliteFactory, postgresFactory, clickhouseFactory];
