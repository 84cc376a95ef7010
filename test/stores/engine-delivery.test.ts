/**
 * Engine-level conformance, delivery (retries and dead letters, heartbeats
 * and lost leases, key order, idempotency, startFrom and option validation): the
 * generic engine over every store in STORE_FACTORIES, with real but short
 * durations. Assertions are bounds ("not before", "well before the poll
 * interval"), never tight timings.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { DeadLetterLoopError, InvalidArgumentError, InvalidNameError, NoLockerError, PayloadTooLargeError } from '../../src/errors.js';
import {
  HEADER_DLQ_ATTEMPTS,
  HEADER_DLQ_DELIVERY_ID,
  HEADER_DLQ_ERROR,
  HEADER_DLQ_GROUP,
  HEADER_DLQ_MESSAGE_ID,
  HEADER_DLQ_SOURCE_TOPIC,
  MAX_ERROR_BYTES,
} from '../../src/queue/dead-letter.js';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { permanent } from '../../src/queue/permanent.js';
import { MAX_HEADER_BYTES } from '../../src/queue/names.js';
import type { Delivery, Handler, Store } from '../../src/queue/types.js';
import { dec, enc, engineHarness, FAST } from './engine-harness.js';
import { QUEUE_FACTORIES, conformanceIt, keyed } from './factories.js';
import { claimReq, deferred, sleep, waitFor, counts } from './helpers.js';

for (const factory of QUEUE_FACTORIES) {
  describe(`engine delivery: ${factory.name}`, { skip: factory.skip }, () => {
    const it = conformanceIt(factory, 'delivery');
    const t = engineHarness(factory);

    it('1. publish then subscribe delivers; one publish spans several topics', async () => {
      const { q } = await t.instance();
      const got: Delivery[] = [];
      const handler: Handler = async (d) => void got.push(d);
      await q.subscribe('t1', 'g', handler, FAST);
      await q.subscribe('t2', 'g', handler, FAST);
      const before = Date.now();
      const idsOut = await q.publish(
        { topic: 't1', payload: enc('one'), headers: { h: 'v' } },
        { id: 'fixed-id', topic: 't2', ...keyed(factory, 'k'), payload: enc('two') },
      );
      assert.equal(idsOut.length, 2);
      assert.equal(idsOut[1], 'fixed-id');
      await waitFor(() => got.length === 2);
      got.sort((a, b) => a.topic.localeCompare(b.topic));
      const [a, b] = got;
      assert.deepEqual([a!.topic, dec(a!.payload), a!.headers, a!.id, a!.group, a!.attempt], ['t1', 'one', { h: 'v' }, idsOut[0], 'g', 1]);
      assert.deepEqual([b!.topic, dec(b!.payload), b!.key, b!.id, b!.attempt], ['t2', 'two', keyed(factory, 'k').key, 'fixed-id', 1]);
      assert.equal(a!.deliveryId, deliveryId(idsOut[0]!, 'g'));
      assert.equal(b!.deliveryId, deliveryId('fixed-id', 'g'));
      assert.ok(a!.publishedAt instanceof Date && a!.publishedAt.getTime() >= before - 5);
      await waitFor(async () => (await q.stats('t1', 'g')).pending + (await q.stats('t1', 'g')).leased === 0);
    });

    it('2. retries count 1, 2, 3 with backoff, then dead-letter a copy with six headers; permanent runs once', async () => {
      const { q } = await t.instance();
      const attempts: Array<{ n: number; at: number; id: string }> = [];
      const longError = '€'.repeat(2000); // 6000 bytes of UTF-8
      const dead: Delivery[] = [];
      await q.subscribe('dlq', 'inspect', async (d) => void dead.push(d), FAST);
      await q.subscribe('jobs', 'workers', async (d) => {
        attempts.push({ n: d.attempt, at: Date.now(), id: d.deliveryId });
        throw new Error(d.attempt < 3 ? `boom-${d.attempt}` : longError);
      }, { ...FAST, maxAttempts: 3, backoffBaseMs: 40, backoffMaxMs: 60, deadLetterTopic: 'dlq' });
      const [id] = await q.publish({ topic: 'jobs', ...keyed(factory, 'k1'), payload: enc('work'), headers: { origin: 'test' } });
      await waitFor(() => dead.length === 1);
      assert.deepEqual(attempts.map((a) => a.n), [1, 2, 3]);
      assert.equal(new Set(attempts.map((a) => a.id)).size, 1, 'the delivery ID is stable across redeliveries');
      // Equal jitter: after attempt 1 at least 40/2 ms, after attempt 2 at least min(80, 60)/2 ms (less 5 ms of clock slack).
      assert.ok(attempts[1]!.at - attempts[0]!.at >= 15, `first backoff ${attempts[1]!.at - attempts[0]!.at} ms`);
      assert.ok(attempts[2]!.at - attempts[1]!.at >= 25, `second backoff ${attempts[2]!.at - attempts[1]!.at} ms`);
      const copy = dead[0]!;
      const did = deliveryId(id!, 'workers');
      assert.equal(copy.id, did, 'the copy ID is the dead delivery ID');
      assert.equal(dec(copy.payload), 'work');
      assert.equal(copy.key, keyed(factory, 'k1').key);
      const errHeader = copy.headers![HEADER_DLQ_ERROR]!;
      assert.deepEqual({ ...copy.headers, [HEADER_DLQ_ERROR]: undefined }, {
        origin: 'test',
        [HEADER_DLQ_SOURCE_TOPIC]: 'jobs',
        [HEADER_DLQ_GROUP]: 'workers',
        [HEADER_DLQ_DELIVERY_ID]: did,
        [HEADER_DLQ_MESSAGE_ID]: id,
        [HEADER_DLQ_ATTEMPTS]: '3',
        [HEADER_DLQ_ERROR]: undefined,
      });
      assert.equal(Buffer.byteLength(errHeader), MAX_ERROR_BYTES - (MAX_ERROR_BYTES % 3), 'cut at a character boundary');
      assert.ok(longError.startsWith(errHeader) && !errHeader.includes('\uFFFD'));
      // The copy is published before the delivery is dead-lettered, so the kill may still be in flight (on
      // nats the dead record is written before the terminate, so dead can read 1 while leased still does).
      await waitFor(async () => {
        const c = counts(await q.stats('jobs', 'workers'));
        return c.dead === 1 && c.leased === 0;
      });
      assert.deepEqual(counts(await q.stats('jobs', 'workers')), { pending: 0, leased: 0, dead: 1 });

      let runs = 0;
      await q.subscribe('perm', 'g', async () => {
        runs++;
        throw permanent(new Error('bad input'));
      }, { ...FAST, maxAttempts: 5 });
      await q.publish({ topic: 'perm', payload: enc('x') });
      await waitFor(async () => (await q.stats('perm', 'g')).dead === 1);
      await sleep(60);
      assert.equal(runs, 1);
    });

    it('3. a handler that throws synchronously or throws a non-Error is a failed attempt, not a crash', async () => {
      const { q } = await t.instance();
      const seen: number[] = [];
      const handler = ((d: Delivery) => {
        seen.push(d.attempt);
        if (d.attempt === 1) throw 'plain string'; // synchronous, not an Error
        if (d.attempt === 2) return Promise.reject(undefined);
        return Promise.resolve();
      }) as Handler;
      await q.subscribe('t', 'g', handler, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => seen.length === 3);
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      assert.deepEqual(seen, [1, 2, 3]);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('4. a handler longer than its lease keeps it by heartbeats: two competing instances run it once', async () => {
      const a = await t.instance();
      const b = await t.instance();
      let runs = 0;
      const handler: Handler = async () => {
        runs++;
        await sleep(t.ms(2500));
      };
      // Renewals every third of a 1 s lease (scaled by the store's slowness)
      // keep it, with room for a loaded machine's late timers and replies.
      const opts = { ...FAST, leaseDurationMs: t.ms(1000) };
      await a.q.subscribe('t', 'g', handler, opts);
      await b.q.subscribe('t', 'g', handler, opts);
      await a.q.publish({ topic: 't', payload: enc('slow') });
      await waitFor(async () => runs === 1 && (await a.q.stats('t', 'g')).leased === 0, t.ms(10_000));
      await sleep(t.ms(200));
      assert.equal(runs, 1);
      if (a.store) assert.ok(a.store.count('extend') + b.store.count('extend') >= 2, 'heartbeats renewed the lease');
      assert.deepEqual(counts(await a.q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('5. failing heartbeats abort the handler and discard its result, even with no free slot; one failure is harmless', async () => {
      const { q, store } = await t.instance();
      let failHeartbeats = true;
      store.before.extend = () => {
        if (failHeartbeats) throw new Error('heartbeat down');
      };
      const aborted: number[] = [];
      const redelivered: number[] = [];
      await q.subscribe('t', 'g', async (d, signal) => {
        if (d.attempt === 1) {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          aborted.push(d.attempt);
          failHeartbeats = false;
          return; // resolving after the abort must not ack
        }
        redelivered.push(d.attempt);
      }, { ...FAST, concurrency: 1, leaseDurationMs: t.ms(150) });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => redelivered.length === 1, t.ms(10_000));
      assert.deepEqual(aborted, [1]);
      assert.deepEqual(redelivered, [2]);
      assert.ok(t.errors.some((e) => e.op === 'heartbeat'));
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      assert.equal(store.ackTokens.length, 1, 'only the redelivery was acked');

      // One failed heartbeat alone: the handler outlives two lease periods and is not aborted.
      let failures = 1;
      store.before.extend = () => {
        if (failures-- > 0) throw new Error('blip');
      };
      let wasAborted: boolean | undefined;
      let runs = 0;
      await q.subscribe('t2', 'g', async (_d, signal) => {
        runs++;
        await sleep(t.ms(700));
        wasAborted = signal.aborted;
      }, { ...FAST, leaseDurationMs: t.ms(450) });
      await q.publish({ topic: 't2', payload: enc('y') });
      await waitFor(() => wasAborted !== undefined, t.ms(10_000));
      await waitFor(async () => (await q.stats('t2', 'g')).leased === 0);
      assert.equal(wasAborted, false);
      assert.equal(runs, 1);
      assert.deepEqual(counts(await q.stats('t2', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('6. lost leases spend attempts: past maxAttempts the delivery dies without running; a stale handler writes nothing', async () => {
      const { q, store } = await t.instance();
      const raw = await t.h.open();
      // Two consumers crash in a row on the same delivery (simulated on a raw store handle).
      await raw.ensureGroup('t', 'crash', 'latest');
      await q.publish({ id: 'crashy2', topic: 't', payload: enc('x') });
      for (let i = 1; i <= 2; i++) {
        const [c] = await raw.claim(claimReq('t', 'crash', { leaseMs: 30 }));
        assert.equal(c!.attempt, i);
        await sleep(50);
      }
      let ran = 0;
      await q.subscribe('t', 'crash', async () => void ran++, { ...FAST, maxAttempts: 2, deadLetterTopic: 'crash-dlq' });
      await waitFor(async () => (await q.stats('t', 'crash')).dead === 1);
      assert.equal(ran, 0, 'dead-lettered without running');
      const copies: Delivery[] = [];
      await q.subscribe('crash-dlq', 'inspect', async (d) => void copies.push(d), { ...FAST, startFrom: 'earliest' });
      await waitFor(() => copies.length === 1);
      assert.equal(copies[0]!.headers![HEADER_DLQ_ATTEMPTS], '2', 'the two claims that ran, not the one taken to kill it');
      assert.equal(copies[0]!.headers![HEADER_DLQ_MESSAGE_ID], 'crashy2');

      // A stale handler: its heartbeat reports the lease gone, it ignores the abort and fails permanently late.
      // The redelivery claimed meanwhile waits for it: one attempt of a delivery at a time.
      store.after.extend = () => [];
      const runs: number[] = [];
      const events: string[] = [];
      await q.subscribe('s', 'g', async (d, signal) => {
        runs.push(d.attempt);
        events.push(`start ${d.attempt}`);
        if (d.attempt === 1) {
          await waitFor(() => signal.aborted, 5000);
          await sleep(t.ms(300)); // long after the lease ran out
          events.push('end 1');
          throw permanent(new Error('too late'));
        }
      }, { ...FAST, concurrency: 2, leaseDurationMs: t.ms(90) }); // a claim must return within the lease
      await q.publish({ topic: 's', payload: enc('x') });
      await waitFor(() => runs.length === 2, 5000);
      await sleep(t.ms(400));
      assert.equal(runs.length, 2);
      assert.equal(runs[0], 1);
      assert.ok(runs[1]! > 1, 'the second run is a later claim');
      assert.deepEqual(events.slice(0, 2), ['start 1', 'end 1'], 'the redelivery started only after the stale handler returned');
      assert.equal(store.count('kill'), 1, 'only the crash case was killed');
      assert.deepEqual(counts(await q.stats('s', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('keyed messages run strictly in order per key, also while the head waits out a backoff', async () => {
      const { q } = await t.instance();
      const log: string[] = [];
      let failedOnce = false;
      await q.subscribe('t', 'g', async (d) => {
        const name = dec(d.payload);
        log.push(`start ${name}`);
        await sleep(5);
        if (name === 'a2' && !failedOnce) {
          failedOnce = true;
          throw new Error('first try fails');
        }
        log.push(`done ${name}`);
      }, { ...FAST, concurrency: 8, backoffBaseMs: 80, backoffMaxMs: 80 });
      await q.publish(...['a1', 'a2', 'a3', 'a4'].map((n) => ({ topic: 't', key: 'a', payload: enc(n) })), { topic: 't', payload: enc('free') });
      await waitFor(() => log.filter((l) => l.startsWith('done')).length === 5, 5000);
      const keyed = log.filter((l) => !l.endsWith('free'));
      assert.deepEqual(keyed, ['start a1', 'done a1', 'start a2', 'start a2', 'done a2', 'start a3', 'done a3', 'start a4', 'done a4']);
      assert.ok(log.indexOf('done free') < log.lastIndexOf('start a2'), 'the unkeyed message did not wait for the lane');
    });

    it('republishing is idempotent: not redelivered after an ack, the lease kept while running', async () => {
      const { q } = await t.instance();
      const release = deferred();
      const runs: string[] = [];
      await q.subscribe('t', 'g', async (d) => {
        runs.push(d.id);
        if (d.id === 'held') await release.promise;
      }, FAST);
      await q.publish({ id: 'done', topic: 't', payload: enc('x') });
      await waitFor(async () => runs.length === 1 && (await q.stats('t', 'g')).leased === 0);
      await q.publish({ id: 'done', topic: 't', payload: enc('x') });
      await q.publish({ id: 'held', topic: 't', payload: enc('x') });
      await waitFor(() => runs.length === 2);
      await q.publish({ id: 'held', topic: 't', payload: enc('changed') });
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
      release.resolve();
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      await sleep(60);
      assert.deepEqual(runs, ['done', 'held']);
    });

    it('startFrom applies only when a group is first registered', async () => {
      const { q } = await t.instance();
      await q.publish(...['p1', 'p2', 'p3'].map((id) => ({ id, topic: 't', payload: enc(id) })));
      const late: string[] = [];
      const early: string[] = [];
      await q.subscribe('t', 'late', async (d) => void late.push(d.id), FAST);
      const sub = await q.subscribe('t', 'early', async (d) => void early.push(d.id), { ...FAST, concurrency: 1, startFrom: 'earliest' });
      await waitFor(() => early.length === 3);
      assert.deepEqual(early, ['p1', 'p2', 'p3']);
      await sub.close();
      await q.subscribe('t', 'early', async (d) => void early.push(d.id), { ...FAST, startFrom: 'earliest' });
      await q.publish({ id: 'p4', topic: 't', payload: enc('p4') });
      await waitFor(() => early.length === 4 && late.length === 1);
      await sleep(50);
      assert.deepEqual(early, ['p1', 'p2', 'p3', 'p4']);
      assert.deepEqual(late, ['p4']);
    });

    it('validates names, IDs, payload sizes and options', async () => {
      const { q } = await t.instance({ maxPayloadBytes: 16 });
      const noop: Handler = async () => undefined;
      // No topic, on the queue's first publish (when no topic was checked yet), after a bad one and after a good one.
      await assert.rejects(q.publish({ payload: enc('x') } as never), (e) => e instanceof InvalidNameError && /topic name must be a string, not undefined/.test(e.message));
      await assert.rejects(q.publish({ topic: 42, payload: enc('x') } as never), InvalidNameError);
      await assert.rejects(q.publish({ payload: enc('x') } as never), InvalidNameError);
      await assert.rejects(q.publish({ topic: 'bad topic', payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: '', payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: 't'.repeat(201), payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: 't', payload: new Uint8Array(17) }), PayloadTooLargeError);
      await assert.rejects(q.publish({ topic: 't', id: 'i'.repeat(256), payload: enc('x') }), InvalidArgumentError);
      await assert.rejects(q.publish({ topic: 't', key: 'k'.repeat(256), payload: enc('x') }), InvalidArgumentError);
      await assert.rejects(q.publish({ topic: 't', payload: enc('ok') }, { topic: 't', payload: new Uint8Array(17) }), PayloadTooLargeError);
      await assert.rejects(q.publish({ topic: 't', payload: enc('ok') }, { payload: enc('x') } as never), InvalidNameError);
      // Headers: MAX_HEADER_BYTES of names and values in UTF-8, whatever maxPayloadBytes is (a 2-byte character counts 2).
      const atLimit = { h: 'é'.repeat(32_767) + 'x' }; // 1 + 2 × 32,767 + 1 bytes
      assert.equal(MAX_HEADER_BYTES, 65_536);
      await assert.rejects(q.publish({ topic: 't', payload: enc('x'), headers: { ...atLimit, i: '' } }), PayloadTooLargeError);
      await assert.rejects(q.publish({ topic: 't', payload: enc('x'), headers: { big: 'x'.repeat(20 << 20) } }), PayloadTooLargeError);
      assert.deepEqual(counts(await q.stats('t', 'nobody')), { pending: 0, leased: 0, dead: 0 });
      await q.publish({ topic: 't', payload: new Uint8Array(16) });
      // The NATS queue carries 4 KiB of headers, less than the stores' limit.
      if (factory.name !== 'nats') await q.publish({ topic: 't', payload: enc('x'), headers: atLimit });
      await assert.rejects(q.subscribe('t', 'g/1', noop), InvalidNameError);
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: 't' }), DeadLetterLoopError);
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: 'no spaces' }), InvalidNameError);
      await assert.rejects(q.subscribe('t', 'g', noop, { concurrency: 0 }), InvalidArgumentError);
      await assert.rejects(q.stats('t', ''), InvalidNameError);
      await q.ping();
    });

    it('subscribe asks the store whether it can consume before registering anything', async () => {
      const { q, store } = await t.instance();
      (store as Store).canConsume = () => {
        throw new NoLockerError();
      };
      await assert.rejects(q.subscribe('t', 'g', async () => undefined), NoLockerError);
      assert.equal(store.count('ensureGroup'), 0);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });
  });
}
