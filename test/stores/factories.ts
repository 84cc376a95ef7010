/**
 * The stores the conformance suite runs against. Adding a store is one line in
 * `STORE_FACTORIES`. The Postgres and ClickHouse factories need a server (see
 * ./postgres-env.ts, ./clickhouse-env.ts); without one their suites are
 * skipped, except under CI.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { it as nodeIt } from 'node:test';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryBacking, MemoryStore } from '../../src/queue/stores/memory.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import type { EngineConfig } from '../../src/queue/options.js';
import type { Queue, Store } from '../../src/queue/types.js';
import { clickhouseFactory } from './clickhouse-env.js';
import { natsFactory } from './nats-env.js';
import { postgresFactory } from './postgres-env.js';

/** One isolated data set; every `open()` is another instance over it. */
export interface StoreHarness {
  /** A new store handle on the harness's data, as another process or host would have. */
  open(): Promise<Store>;
  /** Closes every handle opened here and removes the data. */
  cleanup(): Promise<void>;
  /**
   * Set for a broker, a `Queue` implemented without the Store SPI (nats):
   * builds another instance on this harness's data, taking the engine
   * settings of `cfg` that apply. `open` then throws.
   */
  openQueue?(cfg?: EngineConfig<unknown>): Promise<Queue<unknown>>;
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
  /**
   * Conformance cases this implementation declares unsupported, by
   * `<suite> <case number>` (e.g. `delivery 7`), or `<suite>: <title>` for
   * a case without a number, each with the reason it
   * does not apply; `conformanceIt` skips them with that reason.
   */
  unsupported?: Readonly<Record<string, string>>;
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

/** `FERRY_TEST_ONLY=nats,sqlite` keeps the named entries only, for a quicker local run of one implementation's conformance. */
const only = process.env.FERRY_TEST_ONLY?.split(',').map((n) => n.trim());
const chosen = (f: StoreFactory) => only === undefined || only.includes(f.name);

export const STORE_FACTORIES: StoreFactory[] = [memoryFactory, sqliteFactory, postgresFactory, clickhouseFactory].filter(chosen);

/** The stores and the brokers (queues without a store): the entries of the conformance files that use `conformanceIt`. */
export const QUEUE_FACTORIES: StoreFactory[] = [...STORE_FACTORIES, natsFactory].filter(chosen);

/**
 * `it` for the conformance files: a case titled `<n>. …` of `suite` is
 * skipped, with the factory's reason, when the factory lists `<suite> <n>`
 * in `unsupported`. Call as `const it = conformanceIt(factory, 'delivery')`.
 */
export function conformanceIt(factory: StoreFactory, suite: string): typeof nodeIt {
  const wrapped = ((name: string, ...rest: unknown[]) => {
    const n = /^([0-9]+[a-z]?)\./.exec(name)?.[1];
    const why = factory.unsupported?.[n === undefined ? `${suite}: ${name}` : `${suite} ${n}`];
    if (why === undefined) return (nodeIt as (...a: unknown[]) => unknown)(name, ...rest);
    const fn = rest.find((r) => typeof r === 'function');
    return nodeIt(name, { skip: `unsupported by ${factory.name}: ${why}` }, fn as () => void);
  }) as unknown as typeof nodeIt;
  return wrapped;
}

/** `{ key }`, or `{}` for an implementation that refuses keys (`unsupported.keys`): for cases where the key is incidental. */
export function keyed(factory: StoreFactory, key: string): { key?: string } {
  return factory.unsupported?.keys !== undefined ? {} : { key };
}
