/** Set-up shared by the engine-level conformance files. */
import { afterEach, beforeEach } from 'node:test';
import { createStoreQueue } from '../../src/queue/engine.js';
import type { StoreQueue } from '../../src/queue/engine.js';
import type { EngineConfig, SubscribeOptions } from '../../src/queue/options.js';
import type { StoreFactory, StoreHarness } from './factories.js';
import { InstrumentedStore, waitFor } from './helpers.js';

export const enc = (s: string) => new TextEncoder().encode(s);
export const dec = (b: Uint8Array) => new TextDecoder().decode(b);
/** Quick options for tests: short polls, leases and backoffs. */
export const FAST: SubscribeOptions = { pollIntervalMs: 20, leaseDurationMs: 2000, backoffBaseMs: 5, backoffMaxMs: 20 };

/** What `EngineHarness.instance` can hide of a store. */
export type Hideable = 'listen' | 'duePairs' | 'setGroupPaused' | 'capabilities' | 'appendNow';

export interface EngineHarness {
  /**
   * A queue over a new handle on this test's data (another instance),
   * instrumented; closed after the test. `hide` removes optional store
   * methods before the queue sees the store (e.g. `listen`, so only polling
   * finds another instance's work; `capabilities`, so it orders by no
   * priority and counts no rate limit).
   */
  instance(cfg?: EngineConfig, hide?: ReadonlyArray<Hideable>): Promise<{ q: StoreQueue; store: InstrumentedStore }>;
  /** The store harness of the running test. */
  readonly h: StoreHarness;
  /** Errors the queues of the running test reported through `onError`. */
  readonly errors: Array<{ op: string; err: unknown }>;
  /** `ms` scaled by the store's `slowness`: for leases, and handler times measured against them. */
  ms(ms: number): number;
}

/** Call inside a `describe`: gives every test a fresh store harness and closes its queues afterwards. */
export function engineHarness(factory: StoreFactory): EngineHarness {
  let h: StoreHarness;
  let queues: StoreQueue[] = [];
  let errors: Array<{ op: string; err: unknown }> = [];
  beforeEach(async () => {
    h = await factory.create();
    queues = [];
    errors = [];
  });
  afterEach(async () => {
    await Promise.allSettled(queues.map((q) => q.close({ timeoutMs: 100 })));
    await h.cleanup();
  });
  return {
    async instance(cfg: EngineConfig = {}, hide: ReadonlyArray<Hideable> = []) {
      if (h.openQueue) {
        // A broker: no store to instrument (cases that need one are declared unsupported).
        const q = (await h.openQueue({ onError: (err, op) => errors.push({ op, err }), ...cfg } as EngineConfig<unknown>)) as unknown as StoreQueue;
        queues.push(q);
        return { q, store: undefined as unknown as InstrumentedStore };
      }
      const store = new InstrumentedStore(await h.open());
      for (const method of hide) Object.defineProperty(store, method, { value: undefined });
      const q = createStoreQueue(store, { onError: (err, op) => errors.push({ op, err }), ...cfg });
      queues.push(q);
      return { q, store };
    },
    get h() {
      return h;
    },
    get errors() {
      return errors;
    },
    ms: (ms: number) => ms * (factory.slowness ?? 1),
  };
}

/** Resolves once the queue over `store` has run `n` more polls (or, on a store without `duePairs`, made `n` more claims). */
export async function polls(store: InstrumentedStore, n = 3): Promise<void> {
  const op = store.duePairs ? 'duePairs' : 'claim';
  const from = store.count(op);
  await waitFor(() => store.count(op) >= from + n, 5000, `${n} polls`);
}
