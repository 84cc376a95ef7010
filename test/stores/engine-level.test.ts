/**
 * Engine-level conformance (CHECKLISTS.md "queue — engine level", plus the
 * semantics of issue 4): the generic engine over every store in
 * STORE_FACTORIES, with real but short durations. Assertions are bounds
 * ("not before", "well before the poll interval"), never tight timings.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { ClosedError, DeadLetterLoopError, InvalidNameError, NoLockerError, PayloadTooLargeError, ScheduleTooFarError } from '../../src/errors.js';
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
import { createStoreQueue, PUBLISH_RETRIES } from '../../src/queue/engine.js';
import type { StoreQueue } from '../../src/queue/engine.js';
import type { EngineConfig, SubscribeOptions } from '../../src/queue/options.js';
import { permanent } from '../../src/queue/permanent.js';
import type { Delivery, Handler, Store } from '../../src/queue/types.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreHarness } from './factories.js';
import { claimReq, deferred, InstrumentedStore, sleep, waitFor } from './helpers.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
/** Quick options for tests: short polls, leases and backoffs. */
const FAST: SubscribeOptions = { pollIntervalMs: 20, leaseDurationMs: 2000, backoffBaseMs: 5, backoffMaxMs: 20 };

for (const factory of STORE_FACTORIES) {
  describe(`engine level: ${factory.name}`, () => {
    let h: StoreHarness;
    let queues: StoreQueue[];
    let errors: Array<{ op: string; err: unknown }>;

    /** A queue over a new handle on the harness (another instance), instrumented. */
    async function instance(cfg: EngineConfig = {}): Promise<{ q: StoreQueue; store: InstrumentedStore }> {
      const store = new InstrumentedStore(await h.open());
      const q = createStoreQueue(store, { onError: (err, op) => errors.push({ op, err }), ...cfg });
      queues.push(q);
      return { q, store };
    }

    beforeEach(async () => {
      h = await factory.create();
      queues = [];
      errors = [];
    });
    afterEach(async () => {
      await Promise.allSettled(queues.map((q) => q.close({ timeoutMs: 100 })));
      await h.cleanup();
    });

    it('1. publish then subscribe delivers; one publish spans several topics', async () => {
      const { q } = await instance();
      const got: Delivery[] = [];
      const handler: Handler = async (d) => void got.push(d);
      await q.subscribe('t1', 'g', handler, FAST);
      await q.subscribe('t2', 'g', handler, FAST);
      const before = Date.now();
      const idsOut = await q.publish(
        { topic: 't1', payload: enc('one'), headers: { h: 'v' } },
        { id: 'fixed-id', topic: 't2', key: 'k', payload: enc('two') },
      );
      assert.equal(idsOut.length, 2);
      assert.equal(idsOut[1], 'fixed-id');
      await waitFor(() => got.length === 2);
      got.sort((a, b) => a.topic.localeCompare(b.topic));
      const [a, b] = got;
      assert.deepEqual([a!.topic, dec(a!.payload), a!.headers, a!.id, a!.group, a!.attempt], ['t1', 'one', { h: 'v' }, idsOut[0], 'g', 1]);
      assert.deepEqual([b!.topic, dec(b!.payload), b!.key, b!.id, b!.attempt], ['t2', 'two', 'k', 'fixed-id', 1]);
      assert.equal(a!.deliveryId, deliveryId(idsOut[0]!, 'g'));
      assert.equal(b!.deliveryId, deliveryId('fixed-id', 'g'));
      assert.ok(a!.publishedAt instanceof Date && a!.publishedAt.getTime() >= before - 5);
      await waitFor(async () => (await q.stats('t1', 'g')).pending + (await q.stats('t1', 'g')).leased === 0);
    });

    it('2. retries count 1, 2, 3 with backoff, then dead-letter a copy with six headers; permanent runs once', async () => {
      const { q } = await instance();
      const attempts: Array<{ n: number; at: number; id: string }> = [];
      const longError = '€'.repeat(2000); // 6000 bytes of UTF-8
      const dead: Delivery[] = [];
      await q.subscribe('dlq', 'inspect', async (d) => void dead.push(d), FAST);
      await q.subscribe('jobs', 'workers', async (d) => {
        attempts.push({ n: d.attempt, at: Date.now(), id: d.deliveryId });
        throw new Error(d.attempt < 3 ? `boom-${d.attempt}` : longError);
      }, { ...FAST, maxAttempts: 3, backoffBaseMs: 40, backoffMaxMs: 60, deadLetterTopic: 'dlq' });
      const [id] = await q.publish({ topic: 'jobs', key: 'k1', payload: enc('work'), headers: { origin: 'test' } });
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
      assert.equal(copy.key, 'k1');
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
      assert.deepEqual(await q.stats('jobs', 'workers'), { pending: 0, leased: 0, dead: 1 });

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
      const { q } = await instance();
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
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('4. a handler longer than its lease keeps it by heartbeats: two competing instances run it once', async () => {
      const a = await instance();
      const b = await instance();
      let runs = 0;
      const handler: Handler = async () => {
        runs++;
        await sleep(800);
      };
      const opts = { ...FAST, leaseDurationMs: 300 };
      await a.q.subscribe('t', 'g', handler, opts);
      await b.q.subscribe('t', 'g', handler, opts);
      await a.q.publish({ topic: 't', payload: enc('slow') });
      await waitFor(async () => runs === 1 && (await a.q.stats('t', 'g')).leased === 0, 5000);
      await sleep(200);
      assert.equal(runs, 1);
      assert.ok(a.store.count('extend') + b.store.count('extend') >= 2, 'heartbeats renewed the lease');
      assert.deepEqual(await a.q.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('5. failing heartbeats abort the handler and discard its result, even with no free slot; one failure is harmless', async () => {
      const { q, store } = await instance();
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
      }, { ...FAST, concurrency: 1, leaseDurationMs: 150 });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => redelivered.length === 1, 5000);
      assert.deepEqual(aborted, [1]);
      assert.deepEqual(redelivered, [2]);
      assert.ok(errors.some((e) => e.op === 'heartbeat'));
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
        await sleep(700);
        wasAborted = signal.aborted;
      }, { ...FAST, leaseDurationMs: 450 });
      await q.publish({ topic: 't2', payload: enc('y') });
      await waitFor(() => wasAborted !== undefined, 5000);
      await waitFor(async () => (await q.stats('t2', 'g')).leased === 0);
      assert.equal(wasAborted, false);
      assert.equal(runs, 1);
      assert.deepEqual(await q.stats('t2', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('6. lost leases spend attempts: past maxAttempts the delivery dies without running; a stale handler writes nothing', async () => {
      const { q, store } = await instance();
      const raw = await h.open();
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
      assert.equal(copies[0]!.headers![HEADER_DLQ_ATTEMPTS], '3');
      assert.equal(copies[0]!.headers![HEADER_DLQ_MESSAGE_ID], 'crashy2');

      // A stale handler: its heartbeat reports the lease gone, it ignores the abort and fails permanently late.
      store.after.extend = () => [];
      const runs: number[] = [];
      await q.subscribe('s', 'g', async (d, signal) => {
        runs.push(d.attempt);
        if (d.attempt === 1) {
          await waitFor(() => signal.aborted, 5000);
          await sleep(300); // long after the lease ran out and the redelivery finished
          throw permanent(new Error('too late'));
        }
      }, { ...FAST, concurrency: 2, leaseDurationMs: 90 });
      await q.publish({ topic: 's', payload: enc('x') });
      await waitFor(() => runs.length === 2, 5000);
      await sleep(400);
      assert.deepEqual(runs, [1, 2]);
      assert.equal(store.count('kill'), 1, 'only the crash case was killed');
      assert.deepEqual(await q.stats('s', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('7a. close waits for running handlers and writes their outcomes', async () => {
      const { q } = await instance();
      const started = deferred();
      let finished = false;
      const sub = await q.subscribe('t', 'g', async () => {
        started.resolve();
        await sleep(150);
        finished = true;
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      await sub.close({ timeoutMs: 5000 });
      assert.equal(finished, true);
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('7b. at its deadline close aborts running handlers and keeps their leases', async () => {
      const { q } = await instance();
      const started = deferred();
      let sawAbort = false;
      const sub = await q.subscribe('t', 'g', async (_d, signal) => {
        started.resolve();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        sawAbort = true;
        throw new Error('aborted'); // must not count as a retry
      }, { ...FAST, leaseDurationMs: 60_000 });
      await q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      const t0 = Date.now();
      await sub.close({ timeoutMs: 80 });
      assert.ok(Date.now() - t0 >= 75);
      await sleep(30);
      assert.equal(sawAbort, true);
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 1, dead: 0 });
    });

    it('7c. claims that never started are released without spending an attempt; a failed release is reported', async () => {
      const { q, store } = await instance();
      await q.publish({ topic: 't', payload: enc('x') }); // before the group exists: backfilled by earliest
      const inClaim = deferred();
      const gate = deferred();
      let ran = 0;
      await q.publish({ topic: 't', payload: enc('y') });
      store.before.claim = async () => {
        inClaim.resolve();
        await gate.promise;
      };
      const sub = await q.subscribe('t', 'g', async () => void ran++, { ...FAST, startFrom: 'earliest' });
      await inClaim.promise;
      const closing = sub.close();
      gate.resolve();
      await closing;
      assert.equal(ran, 0);
      assert.equal(store.count('release'), 1);
      assert.deepEqual(await q.stats('t', 'g'), { pending: 2, leased: 0, dead: 0 });
      const again = await store.inner.claim(claimReq('t', 'g'));
      assert.deepEqual(again.map((c) => c.attempt), [1, 1]);
      await store.inner.release(again);

      const inClaim2 = deferred();
      const gate2 = deferred();
      store.before.claim = async () => {
        inClaim2.resolve();
        await gate2.promise;
      };
      store.before.release = () => {
        throw new Error('release failed');
      };
      const sub2 = await q.subscribe('t', 'g', async () => void ran++, FAST);
      await inClaim2.promise;
      const closing2 = sub2.close();
      gate2.resolve();
      await assert.rejects(closing2, /release failed/);
      assert.equal(ran, 0);
    });

    it('7d. after close nothing is left running', async () => {
      const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate').length;
      const baseline = timers();
      const { q } = await instance({ janitorIntervalMs: 50 });
      await q.subscribe('t', 'g', async () => sleep(20), FAST);
      await q.subscribe('t', 'g2', async () => undefined, FAST);
      await q.publish(...Array.from({ length: 10 }, () => ({ topic: 't', payload: enc('x') })));
      await sleep(30);
      assert.ok(timers() > baseline);
      await q.close();
      await sleep(0);
      assert.ok(timers() <= baseline, `${timers() - baseline} timers left`);
      await assert.rejects(q.publish({ topic: 't', payload: enc('x') }), ClosedError);
      await assert.rejects(q.subscribe('t', 'g', async () => undefined), ClosedError);
      await q.close(); // idempotent
    });

    it('8. a publish wakes an idle subscriber long before its poll interval', async () => {
      const { q } = await instance();
      const got = deferred<number>();
      await q.subscribe('t', 'g', async () => got.resolve(Date.now()), { ...FAST, pollIntervalMs: 30_000 });
      await sleep(50); // the first poll found nothing; the loop now sleeps
      const t0 = Date.now();
      await q.publish({ topic: 't', payload: enc('x') });
      const at = await got.promise;
      assert.ok(at - t0 < 5000, `took ${at - t0} ms`);
    });

    it('9a. a transient publish error is retried 3 times with backoff, then returned', async () => {
      const { q, store } = await instance();
      let failures = PUBLISH_RETRIES;
      store.before.append = () => {
        if (failures-- > 0) throw new Error('database is busy');
      };
      await q.publish({ topic: 't', payload: enc('x') });
      assert.equal(store.count('append'), 1 + PUBLISH_RETRIES);

      failures = 100;
      const t0 = Date.now();
      await assert.rejects(q.publish({ topic: 't', payload: enc('x') }), /database is busy/);
      assert.ok(Date.now() - t0 >= 25 + 50 + 100 - 10, 'backed off between tries');
      assert.equal(store.count('append'), 2 * (1 + PUBLISH_RETRIES));

      store.before.append = () => {
        throw new ClosedError('store gone');
      };
      await assert.rejects(q.publish({ topic: 't', payload: enc('x') }), ClosedError);
      assert.equal(store.count('append'), 2 * (1 + PUBLISH_RETRIES) + 1, 'a non-transient error is not retried');
    });

    it('9b. claim errors never stop the subscription; a failed ack leads to redelivery after the lease', async () => {
      const { q, store } = await instance();
      let claimFailures = 3;
      store.before.claim = () => {
        if (claimFailures-- > 0) throw new Error('claim failed');
      };
      let ackFailures = 1;
      store.before.ack = () => {
        if (ackFailures-- > 0) throw new Error('ack failed');
      };
      const attempts: number[] = [];
      await q.subscribe('t', 'g', async (d) => void attempts.push(d.attempt), { ...FAST, leaseDurationMs: 150 });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => attempts.length === 2, 5000);
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      assert.deepEqual(attempts, [1, 2]);
      assert.equal(errors.filter((e) => e.op === 'claim').length, 3);
      assert.equal(errors.filter((e) => e.op === 'ack').length, 1);
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('9c. a failed dead-letter publish becomes a retry and no copy is duplicated, nor after a failed kill', async () => {
      const { q, store } = await instance();
      let dlqFailures = 1 + PUBLISH_RETRIES; // the whole first dead-letter publish fails
      store.before.append = (msgs: Array<{ topic: string }>) => {
        if (msgs[0]!.topic === 'dlq' && dlqFailures-- > 0) throw new Error('dlq unavailable');
      };
      let killFailures = 1;
      store.before.kill = () => {
        if (killFailures-- > 0) throw new Error('kill failed');
      };
      const runs: number[] = [];
      await q.subscribe('t', 'g', async (d) => {
        runs.push(d.attempt);
        throw new Error('always');
      }, { ...FAST, maxAttempts: 1, leaseDurationMs: 150, deadLetterTopic: 'dlq' });
      await q.subscribe('dlq', 'inspect', async () => {
        throw new Error('keep it pending');
      }, { ...FAST, backoffBaseMs: 60_000, backoffMaxMs: 60_000 });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(async () => (await q.stats('t', 'g')).dead === 1, 5000);
      await sleep(100);
      assert.deepEqual(runs, [1], 'later attempts died without running');
      assert.ok(store.count('kill') >= 2);
      const s = await q.stats('dlq', 'inspect');
      assert.equal(s.pending + s.leased, 1, 'exactly one copy');
      assert.ok(errors.some((e) => e.op === 'dead-letter publish'));
    });

    it('10. concurrency is reached and never exceeded; claims ask for at most batchSize; a full batch polls again at once', async () => {
      const { q, store } = await instance();
      let running = 0;
      let peak = 0;
      let done = 0;
      await q.publish(...Array.from({ length: 40 }, (_, i) => ({ topic: 't', payload: enc(`m${i}`) })));
      const t0 = Date.now();
      await q.subscribe('t', 'g', async () => {
        running++;
        peak = Math.max(peak, running);
        await sleep(15);
        running--;
        done++;
      }, { ...FAST, concurrency: 5, batchSize: 3, pollIntervalMs: 30_000, startFrom: 'earliest' });
      await waitFor(() => done === 40, 10_000);
      assert.ok(Date.now() - t0 < 20_000, 'never waited a poll interval');
      assert.equal(peak, 5);
      assert.ok(store.claimMax.every((m) => m >= 1 && m <= 3), `claim sizes ${store.claimMax.join(',')}`);
    });

    it('11. one group\'s subscriptions compete, every group gets every message, maxInFlight holds across three instances', async () => {
      const a = await instance();
      const seen = new Map<string, string[]>();
      const record = (who: string): Handler => async (d) => {
        const k = `${d.group}:${d.id}`;
        seen.set(k, [...(seen.get(k) ?? []), who]);
        await sleep(2);
      };
      await a.q.subscribe('t', 'g', record('s1'), FAST);
      await a.q.subscribe('t', 'g', record('s2'), FAST);
      await a.q.subscribe('t', 'other', record('o'), FAST);
      const published = await a.q.publish(...Array.from({ length: 30 }, () => ({ topic: 't', payload: enc('x') })));
      await waitFor(() => seen.size === 60, 5000);
      await sleep(50);
      for (const id of published) {
        assert.equal(seen.get(`g:${id}`)!.length, 1);
        assert.deepEqual(seen.get(`other:${id}`), ['o']);
      }

      const instances = [a, await instance(), await instance()];
      let running = 0;
      let peak = 0;
      let done = 0;
      for (const { q } of instances) {
        await q.subscribe('capped', 'g', async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(25);
          running--;
          done++;
        }, { ...FAST, concurrency: 4, maxInFlight: 3, pollIntervalMs: 10 });
      }
      await a.q.publish(...Array.from({ length: 30 }, () => ({ topic: 'capped', payload: enc('x') })));
      await waitFor(() => done === 30, 10_000);
      assert.ok(peak <= 3, `peak ${peak}`);
      assert.ok(peak >= 2, `peak ${peak}: the cap was never approached`);
    });

    it('12. acks are batched', async () => {
      const { q, store } = await instance();
      await q.publish(...Array.from({ length: 64 }, () => ({ topic: 't', payload: enc('x') })));
      let done = 0;
      await q.subscribe('t', 'g', async () => void done++, { ...FAST, concurrency: 16, batchSize: 16, startFrom: 'earliest' });
      await waitFor(async () => done === 64 && (await q.stats('t', 'g')).leased === 0, 5000);
      assert.equal(store.ackBatches.reduce((a, b) => a + b, 0), 64);
      assert.ok(store.count('ack') < 64 / 2, `${store.count('ack')} ack calls for 64 deliveries`);
    });

    it('13. a scheduled message runs on time, never early; too far ahead is refused', async () => {
      const { q } = await instance({ retentionHours: 1 });
      const at = deferred<number>();
      await q.subscribe('t', 'g', async () => at.resolve(Date.now()), { ...FAST, pollIntervalMs: 50 });
      const due = Date.now() + 300;
      await q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(due) });
      const ranAt = await at.promise;
      assert.ok(ranAt >= due, `ran ${due - ranAt} ms early`);
      assert.ok(ranAt - due < 3000, `ran ${ranAt - due} ms late`);
      await assert.rejects(
        q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(Date.now() + 2 * 3_600_000) }),
        ScheduleTooFarError,
      );
      await q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(Date.now() + 3_500_000) });
    });

    it('keyed messages run strictly in order per key, also while the head waits out a backoff', async () => {
      const { q } = await instance();
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
      const { q } = await instance();
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
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 1, dead: 0 });
      release.resolve();
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      await sleep(60);
      assert.deepEqual(runs, ['done', 'held']);
    });

    it('startFrom applies only when a group is first registered', async () => {
      const { q } = await instance();
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
      const { q } = await instance({ maxPayloadBytes: 16 });
      const noop: Handler = async () => undefined;
      await assert.rejects(q.publish({ topic: 'bad topic', payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: '', payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: 't'.repeat(201), payload: enc('x') }), InvalidNameError);
      await assert.rejects(q.publish({ topic: 't', payload: new Uint8Array(17) }), PayloadTooLargeError);
      await assert.rejects(q.publish({ topic: 't', id: 'i'.repeat(256), payload: enc('x') }), RangeError);
      await assert.rejects(q.publish({ topic: 't', key: 'k'.repeat(256), payload: enc('x') }), RangeError);
      await assert.rejects(q.publish({ topic: 't', payload: enc('ok') }, { topic: 't', payload: new Uint8Array(17) }), PayloadTooLargeError);
      assert.deepEqual(await q.stats('t', 'nobody'), { pending: 0, leased: 0, dead: 0 });
      await q.publish({ topic: 't', payload: new Uint8Array(16) });
      await assert.rejects(q.subscribe('t', 'g/1', noop), InvalidNameError);
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: 't' }), DeadLetterLoopError);
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: 'no spaces' }), InvalidNameError);
      await assert.rejects(q.subscribe('t', 'g', noop, { concurrency: 0 }), RangeError);
      await assert.rejects(q.stats('t', ''), InvalidNameError);
      await q.ping();
    });

    it('subscribe asks the store whether it can consume before registering anything', async () => {
      const { q, store } = await instance();
      (store as Store).canConsume = () => {
        throw new NoLockerError();
      };
      await assert.rejects(q.subscribe('t', 'g', async () => undefined), NoLockerError);
      assert.equal(store.count('ensureGroup'), 0);
      assert.deepEqual(await q.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
    });

    it('the janitor purges on its timer', async () => {
      const { q, store } = await instance({ janitorIntervalMs: 40, ackedRetentionHours: 1 / 3_600_000 });
      let done = 0;
      await q.subscribe('t', 'g', async () => void done++, FAST);
      await q.publish({ id: 'gone', topic: 't', payload: enc('x') });
      await waitFor(() => done === 1);
      await waitFor(() => store.count('purge') >= 2, 5000);
      // Once purged, republishing the same ID stores it anew and it is delivered again.
      await waitFor(async () => {
        await q.publish({ id: 'gone', topic: 't', payload: enc('x') });
        return done >= 2;
      }, 5000);
    });

    it('the janitor runs on one instance at a time', async () => {
      const b = await instance({ janitorIntervalMs: 3_600_000 });
      const c = await instance({ janitorIntervalMs: 3_600_000 });
      assert.equal(await b.q.runJanitor(), 0, 'nothing to purge yet');
      assert.equal(b.store.count('purge'), 1);
      assert.equal(await c.q.runJanitor(), 0);
      assert.equal(c.store.count('purge'), 0, 'a second instance does not purge while another holds the role');
      assert.equal(c.store.count('acquireJanitor'), 1);
    });
  });
}
