/**
 * Overlapping claims: on a store with `capabilities.overlappingClaims`, a
 * subscription that claims ahead (`prefetch`) keeps a second claim in
 * flight while work flows. Checked on the memory store declared so, with
 * the claims' landings held and released by the test:
 * - two claims in flight at once, never three; every delivery runs once;
 *   handlers never exceed `concurrency`; what is claimed and not started
 *   never exceeds `concurrency + prefetch`;
 * - a later claim landing first changes nothing of that, and a key's
 *   messages still run in publish order;
 * - a recovered delivery that one claim brings while another is in flight
 *   runs alone: nothing the other brings starts beside it;
 * - close while two claims are in flight gives back what both bring, without
 *   spending an attempt;
 * - a failed claim in flight is reported and the work carries on.
 * Without the capability, or without prefetch, claims never overlap.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { createStoreQueue } from '../../src/queue/engine.js';
import type { StoreQueue } from '../../src/queue/engine.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import type { Claimed, ClaimRequest, SubscribeOptions } from '../../src/queue/index.js';
import { dec, enc, FAST } from './engine-harness.js';
import { claimReq, deferred, InstrumentedStore, waitFor } from './helpers.js';

const OPTS: SubscribeOptions = { ...FAST, concurrency: 4, batchSize: 8, prefetch: 16, startFrom: 'earliest' };

interface Setup {
  q: StoreQueue;
  store: InstrumentedStore;
  inner: MemoryStore;
  errors: Array<{ op: string; err: unknown }>;
  /** Claims in flight now, and the most at once. */
  claiming: { now: number; peak: number };
}

const queues: StoreQueue[] = [];
afterEach(async () => {
  await Promise.allSettled(queues.splice(0).map((q) => q.close({ timeoutMs: 100 })));
});

function setup(overlapping = true): Setup {
  const inner = new MemoryStore();
  const store = new InstrumentedStore(inner);
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, overlappingClaims: overlapping } });
  const errors: Setup['errors'] = [];
  const q = createStoreQueue(store, { onError: (err, op) => errors.push({ op, err }) });
  queues.push(q);
  const claiming = { now: 0, peak: 0 };
  store.before.claim = () => {
    claiming.now++;
    claiming.peak = Math.max(claiming.peak, claiming.now);
  };
  store.after.claim = (r: Claimed[]) => {
    claiming.now--;
    return r;
  };
  return { q, store, inner, errors, claiming };
}

/** Publishes `n` messages m0… (key `k<i % keys>` when `keys` is given). */
async function publish(q: StoreQueue, n: number, keys?: number): Promise<void> {
  for (let i = 0; i < n; i += 50) {
    const batch = Array.from({ length: Math.min(50, n - i) }, (_, j) => ({
      topic: 't', payload: enc(`m${i + j}`), ...(keys === undefined ? {} : { key: `k${(i + j) % keys}` }),
    }));
    await q.publish(...batch);
  }
}

describe('engine: overlapping claims', () => {
  it('keep two claims in flight while work flows, never three; every delivery runs once within concurrency and prefetch', async () => {
    const { q, store, errors, claiming } = setup();
    await publish(q, 400);
    let running = 0;
    let peakRunning = 0;
    let peakHeld = 0;
    const seen = new Map<string, number>();
    // Claims land a turn of the event loop later, as a database's would.
    const before = store.before.claim!;
    store.before.claim = async (...args: unknown[]) => {
      await before(...args);
      await new Promise<void>((r) => setImmediate(r));
    };
    await q.subscribe('t', 'g', async (d) => {
      running++;
      peakRunning = Math.max(peakRunning, running);
      peakHeld = Math.max(peakHeld, (await q.stats('t', 'g')).leased);
      running--;
      seen.set(dec(d.payload), (seen.get(dec(d.payload)) ?? 0) + 1);
    }, { ...OPTS, prefetch: 64 }); // room for more than two batches: the limit of two is what holds
    await waitFor(async () => seen.size === 400 && (await q.stats('t', 'g')).leased === 0, 30_000, 'every message');
    assert.equal(claiming.peak, 2);
    assert.ok([...seen.values()].every((n) => n === 1));
    assert.equal(peakRunning, 4);
    // Leased: running, waiting for a slot, or acked and not yet written (at most the unwritten acks' bound).
    assert.ok(peakHeld <= 4 + 64 + 256, `held ${peakHeld}`);
    assert.ok(store.claimMax.every((m) => m >= 1 && m <= 8), `claim sizes ${store.claimMax.join(',')}`);
    assert.deepEqual(errors, []);
  });

  it('a later claim landing first changes nothing: every delivery once, each key in publish order', async () => {
    const { q, store, errors, claiming } = setup();
    await publish(q, 300, 7);
    // Every other claim waits until the next one has landed.
    let n = 0;
    let landedLater: (() => void) | undefined;
    const before = store.before.claim!;
    store.before.claim = async (...args: unknown[]) => {
      await before(...args);
      const mine = ++n;
      if (mine % 2 === 1) {
        const later = deferred();
        landedLater = later.resolve;
        await Promise.race([later.promise, new Promise<void>((r) => setTimeout(r, 50))]);
      } else {
        await new Promise<void>((r) => setImmediate(r));
        landedLater?.();
      }
    };
    const order = new Map<string, number[]>();
    let handled = 0;
    await q.subscribe('t', 'g', async (d) => {
      const i = Number(dec(d.payload).slice(1));
      const k = d.key!;
      order.set(k, [...(order.get(k) ?? []), i]);
      handled++;
    }, OPTS);
    await waitFor(() => handled === 300, 30_000, 'every message');
    for (const [k, is] of order) assert.deepEqual(is, [...is].sort((a, b) => a - b), `key ${k} in publish order`);
    assert.equal([...order.values()].flat().length, 300);
    assert.ok(claiming.peak <= 2);
    assert.deepEqual(errors, []);
  });

  it('a recovered delivery one claim brings runs alone, even beside what a claim in flight then brings', async () => {
    const { q, store, inner, errors } = setup();
    await publish(q, 200);
    // The third claim is made to bring one delivery, as recovered (the rest
    // of its batch goes back), and lands only once the fourth is in flight;
    // the fourth lands while the recovered handler runs.
    const index = new WeakMap<ClaimRequest, number>();
    let sent = 0;
    const fourthSent = deferred();
    const recoveredRuns = deferred();
    let thirdLanded = false;
    let fourthSentFirst = false;
    let fourthLanded = false;
    const before = store.before.claim!;
    store.before.claim = async (req: ClaimRequest) => {
      await before(req);
      const i = ++sent;
      index.set(req, i);
      // The fallback only keeps a broken overlap from hanging the test (it then fails below).
      if (i === 3) await Promise.race([fourthSent.promise, new Promise<void>((r) => setTimeout(r, 20_000))]);
      if (i === 4) {
        fourthSentFirst = !thirdLanded;
        fourthSent.resolve();
        await recoveredRuns.promise;
      }
    };
    const after = store.after.claim!;
    let recoveredId: string | undefined;
    store.after.claim = async (r: Claimed[], req: ClaimRequest) => {
      const got = (await after(r, req)) as Claimed[];
      const i = index.get(req);
      if (i === 4) fourthLanded = true;
      if (i !== 3) return got;
      thirdLanded = true;
      await inner.release(got.slice(1));
      recoveredId = got[0]!.deliveryId;
      return [{ ...got[0]!, recovered: true }];
    };
    let running = 0;
    let recoveredRunning = false;
    let beside = 0;
    let aloneAtStart = false;
    const seen = new Set<string>();
    await q.subscribe('t', 'g', async (d) => {
      running++;
      if (recoveredRunning) beside++;
      if (d.deliveryId === recoveredId) {
        aloneAtStart = running === 1;
        recoveredRunning = true;
        recoveredRuns.resolve();
        await waitFor(() => fourthLanded, 10_000, 'the fourth claim to land');
        for (let t = 0; t < 5; t++) await new Promise<void>((r) => setImmediate(r)); // its deliveries are queued meanwhile
        recoveredRunning = false;
      }
      seen.add(dec(d.payload));
      running--;
    }, OPTS);
    await waitFor(async () => seen.size === 200 && (await q.stats('t', 'g')).leased === 0, 30_000, 'every message');
    assert.ok(fourthSentFirst, 'the fourth claim was in flight before the third landed');
    assert.ok(aloneAtStart, 'the recovered delivery started with no other handler running');
    assert.equal(beside, 0, 'nothing started beside the recovered delivery');
    assert.deepEqual(errors, []);
  });

  it('close while two claims are in flight gives back what both bring, without spending an attempt', async () => {
    const { q, store, inner, claiming } = setup();
    await publish(q, 100);
    const gate = deferred();
    let n = 0;
    const before = store.before.claim!;
    store.before.claim = async (...args: unknown[]) => {
      await before(...args);
      if (++n > 2) await gate.promise; // the first two land at once: work flows
    };
    // A release takes a while, as a database's does: close waits for it.
    store.before.release = () => new Promise<void>((r) => setTimeout(r, 50));
    const ran = new Set<string>();
    const sub = await q.subscribe('t', 'g', async (d) => {
      ran.add(dec(d.payload));
    }, OPTS);
    await waitFor(() => claiming.now === 2 && n >= 4, 10_000, 'two claims in flight');
    const closing = sub.close({ timeoutMs: 5000 });
    gate.resolve();
    await closing;
    const stats = await q.stats('t', 'g');
    assert.equal(stats.leased, 0, 'nothing left leased');
    assert.equal(stats.pending, 100 - ran.size);
    const again = await inner.claim(claimReq('t', 'g', { max: 1000 }));
    assert.equal(again.length, 100 - ran.size);
    assert.ok(again.every((c) => c.attempt === 1), 'no attempt spent');
    assert.ok(store.count('release') >= 1);
  });

  it('a claim in flight that fails is reported, and the work carries on', async () => {
    const { q, store, errors } = setup();
    await publish(q, 200);
    let n = 0;
    const before = store.before.claim!;
    store.before.claim = async (...args: unknown[]) => {
      await before(...args);
      await new Promise<void>((r) => setImmediate(r));
      if (++n === 4) throw new Error('claim failed');
    };
    const seen = new Set<string>();
    await q.subscribe('t', 'g', async (d) => void seen.add(dec(d.payload)), OPTS);
    await waitFor(async () => seen.size === 200 && (await q.stats('t', 'g')).leased === 0, 30_000, 'every message');
    assert.deepEqual(errors.map((e) => [e.op, (e.err as Error).message]), [['claim', 'claim failed']]);
  });

  for (const [what, overlapping, opts] of [
    ['a store without the capability', false, OPTS],
    ['a subscription without prefetch', true, { ...OPTS, prefetch: 0 }],
  ] as const) {
    it(`never overlap on ${what}`, async () => {
      const { q, store, claiming } = setup(overlapping);
      await publish(q, 200);
      const before = store.before.claim!;
      store.before.claim = async (...args: unknown[]) => {
        await before(...args);
        await new Promise<void>((r) => setImmediate(r));
      };
      const seen = new Set<string>();
      await q.subscribe('t', 'g', async (d) => void seen.add(dec(d.payload)), opts);
      await waitFor(() => seen.size === 200, 30_000, 'every message');
      assert.equal(claiming.peak, 1);
    });
  }
});
