/**
 * Engine-level conformance, background acks: a successful handler hands its
 * worker slot on before its ack is written, and the ack is written later in a
 * batch. These tests hold the store's ack call at a gate to prove what may and
 * may not happen meanwhile, over every store in STORE_FACTORIES.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { maxUnwrittenAcks } from '../../src/queue/subscription.js';
import { dec, enc, engineHarness, FAST } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { deferred, sleep, waitFor, counts } from './helpers.js';

for (const factory of STORE_FACTORIES) {
  describe(`engine background acks: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('a handler\'s slot goes to the next delivery before its ack is written', async () => {
      const { q, store } = await t.instance();
      const gate = deferred();
      const inAck = deferred();
      store.before.ack = async () => {
        inAck.resolve();
        await gate.promise;
      };
      const started: string[] = [];
      await q.subscribe('t', 'g', async (d) => void started.push(dec(d.payload)), { ...FAST, concurrency: 1, startFrom: 'earliest' });
      await q.publish({ topic: 't', payload: enc('a') }, { topic: 't', payload: enc('b') });
      await inAck.promise;
      // The first ack is held: with one slot, b can only start if a let go of it.
      await waitFor(() => started.length === 2, 5000, 'the second handler to start while the first ack is held');
      assert.deepEqual(started, ['a', 'b']);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 2, dead: 0 }, 'unwritten acks keep their leases');
      gate.resolve();
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0, 5000, 'the acks to land');
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('close waits for queued acks and writes them', async () => {
      const { q, store } = await t.instance();
      const gate = deferred();
      const inAck = deferred();
      store.before.ack = async () => {
        inAck.resolve();
        await gate.promise;
      };
      let done = 0;
      const sub = await q.subscribe('t', 'g', async () => void done++, { ...FAST, concurrency: 4 });
      await q.publish(...Array.from({ length: 6 }, () => ({ topic: 't', payload: enc('x') })));
      await inAck.promise;
      await waitFor(() => done === 6, 5000, 'every handler to finish');
      let closed = false;
      const closing = sub.close({ timeoutMs: 10_000 }).then(() => (closed = true));
      await sleep(100);
      assert.equal(closed, false, 'close returned while an ack was still unwritten');
      gate.resolve();
      await closing;
      assert.equal(done, 6);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      assert.equal(store.ackBatches.reduce((a, b) => a + b, 0), 6);
    });

    it('a failed background ack is reported and its delivery comes back after the lease', async () => {
      const { q, store } = await t.instance();
      let failures = 0;
      store.before.ack = () => {
        if (failures++ === 0) throw new Error('ack write failed');
      };
      const runs: number[] = [];
      await q.subscribe('t', 'g', async (d) => void runs.push(d.attempt), { ...FAST, leaseDurationMs: t.ms(300) });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(async () => runs.length === 2 && (await q.stats('t', 'g')).leased === 0, 5000, 'the redelivery');
      assert.deepEqual(runs, [1, 2]);
      const acks = t.errors.filter((e) => e.op === 'ack');
      assert.equal(acks.length, 1);
      assert.match((acks[0]!.err as Error).message, /ack write failed/);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('subscriptions flush their acks at the same time without losing any', async () => {
      const { q, store } = await t.instance();
      const both = deferred();
      let inside = 0;
      let peakInside = 0;
      store.before.ack = async () => {
        inside++;
        peakInside = Math.max(peakInside, inside);
        if (inside >= 2) both.resolve();
        // Hold each flush until another subscription's flush is in flight too (or a while has passed).
        await Promise.race([both.promise, sleep(500)]);
        inside--;
      };
      const seen = new Map<string, number>();
      const handler = async (d: { group: string; id: string }) => void seen.set(`${d.group}:${d.id}`, (seen.get(`${d.group}:${d.id}`) ?? 0) + 1);
      // Leases far longer than any held flush: a lease that lapsed while its
      // ack waited (a loaded machine, a slow store) would rightly run twice.
      const opts = { ...FAST, concurrency: 8, leaseDurationMs: 120_000 };
      for (const g of ['g1', 'g2', 'g3']) await q.subscribe('t', g, handler, opts);
      await q.subscribe('t', 'g1', handler, opts); // a competitor in g1
      const ids = await q.publish(...Array.from({ length: 120 }, () => ({ topic: 't', payload: enc('x') })));
      await waitFor(async () => {
        for (const g of ['g1', 'g2', 'g3']) {
          const s = await q.stats('t', g);
          if (s.pending + s.leased > 0) return false;
        }
        return true;
      }, 15_000, 'every group to finish');
      assert.ok(peakInside >= 2, 'two flushes were never in flight together');
      for (const g of ['g1', 'g2', 'g3']) for (const id of ids) assert.equal(seen.get(`${g}:${id}`), 1, `${g}:${id}`);
      assert.equal(store.ackBatches.reduce((a, b) => a + b, 0), 360, 'each delivery acked once');
      assert.deepEqual(t.errors, []);
    });

    it('the next message of a key waits for its head\'s ack to be written', async () => {
      const { q, store } = await t.instance();
      const gate = deferred();
      const inAck = deferred();
      store.before.ack = async () => {
        inAck.resolve();
        await gate.promise;
      };
      const started: string[] = [];
      await q.subscribe('t', 'g', async (d) => void started.push(dec(d.payload)), { ...FAST, concurrency: 4 });
      await q.publish({ topic: 't', key: 'k', payload: enc('k1') }, { topic: 't', key: 'k', payload: enc('k2') });
      await inAck.promise;
      await sleep(150); // several poll intervals
      assert.deepEqual(started, ['k1'], 'k2 ran before k1\'s ack was written');
      gate.resolve();
      await waitFor(() => started.length === 2, 5000, 'k2 to run');
      assert.deepEqual(started, ['k1', 'k2']);
    });

    it('an unwritten ack still counts against maxInFlight', async () => {
      const { q, store } = await t.instance();
      const gate = deferred();
      const inAck = deferred();
      store.before.ack = async () => {
        inAck.resolve();
        await gate.promise;
      };
      const started: string[] = [];
      await q.subscribe('t', 'g', async (d) => void started.push(dec(d.payload)), { ...FAST, concurrency: 4, maxInFlight: 1 });
      await q.publish({ topic: 't', payload: enc('a') }, { topic: 't', payload: enc('b') });
      await inAck.promise;
      await sleep(150);
      assert.deepEqual(started, ['a']);
      gate.resolve();
      await waitFor(() => started.length === 2, 5000, 'b to run');
    });

    it('claiming pauses once the unwritten acks reach their bound', async () => {
      const { q, store } = await t.instance();
      const bound = maxUnwrittenAcks(2);
      const gate = deferred();
      store.before.ack = () => gate.promise;
      let done = 0;
      await q.subscribe('t', 'g', async () => void done++, { ...FAST, concurrency: 2, startFrom: 'earliest', leaseDurationMs: t.ms(FAST.leaseDurationMs!) });
      await q.publish(...Array.from({ length: bound + 40 }, () => ({ topic: 't', payload: enc('x') })));
      await waitFor(() => done >= bound, t.ms(20_000), 'the backlog to fill');
      await sleep(t.ms(150));
      // The first flush took a batch and waits at the gate; the rest queue behind it, up to the bound.
      assert.equal(done, bound, 'handlers kept running past the unwritten-ack bound');
      gate.resolve();
      await waitFor(async () => done === bound + 40 && (await q.stats('t', 'g')).leased === 0, t.ms(20_000), 'the rest');
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });
  });
}
