/**
 * Engine-level conformance, lifecycle: close, wake-ups, store failures, concurrency and
 * caps, ack batching and scheduling, over every store in STORE_FACTORIES.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { ClosedError, ScheduleTooFarError } from '../../src/errors.js';
import { PUBLISH_RETRIES } from '../../src/queue/engine.js';
import { MAX_RETENTION_HOURS } from '../../src/queue/options.js';
import { permanent } from '../../src/queue/permanent.js';
import type { Handler } from '../../src/queue/types.js';
import { enc, engineHarness, FAST } from './engine-harness.js';
import { QUEUE_FACTORIES, conformanceIt } from './factories.js';
import { HOUR_POLL, claimReq, deferred, orHang, sleep, waitFor, counts } from './helpers.js';

for (const factory of QUEUE_FACTORIES) {
  describe(`engine lifecycle: ${factory.name}`, { skip: factory.skip }, () => {
    const it = conformanceIt(factory, 'lifecycle');
    const t = engineHarness(factory);

    it('7a. close waits for running handlers and writes their outcomes', async () => {
      const { q } = await t.instance();
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
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('a handler that starts its own subscription\'s close without awaiting it: the close waits for that handler\'s ack', async () => {
      const { q } = await t.instance();
      const ran = deferred();
      let closing: Promise<void> | undefined;
      const sub = await q.subscribe('t', 'g', async () => {
        closing = sub.close(); // awaiting it here would wait for this very handler
        ran.resolve();
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      await orHang(ran.promise, 'the handler');
      await orHang(closing!, 'the close the handler started');
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('7b. at its deadline close aborts running handlers and keeps their leases', async () => {
      const { q } = await t.instance();
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
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
    });

    it('7c. claims that never started are released without spending an attempt; a failed release is reported', async () => {
      const { q, store } = await t.instance();
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
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 2, leased: 0, dead: 0 });
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

    it("7e. a handler that publishes while queue.close waits for it: the publish is stored and the delivery acked, not retried or dead-lettered", async () => {
      const { q, store } = await t.instance();
      const outcomes: string[] = [];
      q.on('retrying', () => void outcomes.push('retrying'));
      q.on('deadLettered', () => void outcomes.push('deadLettered'));
      const started = deferred();
      const closeCalled = deferred();
      // maxAttempts 1: before, close refused the handler's publish, which failed the only attempt, and the message was dead-lettered ('exhausted') because the app shut down.
      await q.subscribe('t', 'g', async () => {
        started.resolve();
        await closeCalled.promise;
        await q.publish({ id: 'next-1', topic: 'next', payload: enc('y') });
      }, { ...FAST, maxAttempts: 1 });
      await q.publish({ topic: 't', payload: enc('x') });
      await orHang(started.promise, 'the handler');
      const closing = q.close({ timeoutMs: 60_000 });
      closeCalled.resolve();
      await orHang(closing, 'close');
      assert.deepEqual(outcomes, []);
      // (A broker has no store to count calls of: the events above and the stats below say the same.)
      if (store) assert.deepEqual([store.count('ack') + store.count('ackAndClaim') > 0, store.count('retry'), store.count('kill')], [true, 0, 0]);
      await assert.rejects(q.publish({ topic: 'next', payload: enc('late') }), ClosedError);
      // Another instance finds the handler's message stored and the delivery done.
      const { q: q2 } = await t.instance();
      assert.deepEqual(counts(await q2.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      const next = deferred<string>();
      await q2.subscribe('next', 'g', async (d) => next.resolve(d.id), { ...FAST, startFrom: 'earliest' });
      assert.equal(await orHang(next.promise, "the handler's message"), 'next-1');
    });

    it('7d. after close nothing is left running', async () => {
      const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate').length;
      const baseline = timers();
      const { q } = await t.instance({ janitorIntervalMs: 50 });
      const running = deferred();
      await q.subscribe('t', 'g', async () => {
        running.resolve();
        await sleep(20);
      }, FAST);
      await q.subscribe('t', 'g2', async () => undefined, FAST);
      await q.publish(...Array.from({ length: 10 }, () => ({ topic: 't', payload: enc('x') })));
      await orHang(running.promise, 'a running handler');
      assert.ok(timers() > baseline, 'a running attempt holds timers (its heartbeat, its handler)');
      await q.close();
      await sleep(0);
      assert.ok(timers() <= baseline, `${timers() - baseline} timers left`);
      await assert.rejects(q.publish({ topic: 't', payload: enc('x') }), ClosedError);
      await assert.rejects(q.subscribe('t', 'g', async () => undefined), ClosedError);
      await q.close(); // idempotent
    });

    it('8. a publish wakes an idle subscriber: delivered with its hourly poll never firing', async () => {
      const { q, store } = await t.instance();
      const got = deferred<string>();
      const polled = deferred<void>();
      store.after.claim = (r: unknown) => (polled.resolve(), r);
      await q.subscribe('t', 'g', async (d) => got.resolve(d.id), { ...FAST, pollIntervalMs: HOUR_POLL });
      await orHang(polled.promise, 'the first poll'); // it found nothing; the loop now sleeps an hour
      const [id] = await q.publish({ topic: 't', payload: enc('x') });
      assert.equal(await orHang(got.promise, 'the woken delivery'), id);
    });

    it('9a. a transient publish error is retried 3 times with backoff, then returned', async () => {
      const { q, store } = await t.instance();
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
      const { q, store } = await t.instance();
      let claimFailures = 3;
      store.before.claim = () => {
        if (claimFailures-- > 0) throw new Error('claim failed');
      };
      let ackFailures = 1;
      store.before.ack = () => {
        if (ackFailures-- > 0) throw new Error('ack failed');
      };
      const attempts: number[] = [];
      await q.subscribe('t', 'g', async (d) => void attempts.push(d.attempt), { ...FAST, leaseDurationMs: t.ms(150) });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => attempts.length === 2, 5000);
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0);
      assert.deepEqual(attempts, [1, 2]);
      assert.equal(t.errors.filter((e) => e.op === 'claim').length, 3);
      assert.equal(t.errors.filter((e) => e.op === 'ack').length, 1);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('9c. a failed dead-letter publish becomes a retry and no copy is duplicated, nor after a failed kill', async () => {
      const { q, store } = await t.instance();
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
      }, { ...FAST, maxAttempts: 1, leaseDurationMs: t.ms(150), deadLetterTopic: 'dlq' });
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
      assert.ok(t.errors.some((e) => e.op === 'dead-letter publish'));
    });

    it('10. concurrency is reached and never exceeded; claims ask for at most batchSize; a full batch polls again at once', async () => {
      const { q, store } = await t.instance();
      let running = 0;
      let peak = 0;
      let done = 0;
      await q.publish(...Array.from({ length: 40 }, (_, i) => ({ topic: 't', payload: enc(`m${i}`) })));
      // No handler finishes before 5 run at once: the first claim (3) cannot
      // fill the concurrency, so only a claim made at once, while they run, can
      // (ClickHouse's claim takes longer than any fixed handler time under load).
      const full = deferred<void>();
      await q.subscribe('t', 'g', async () => {
        running++;
        peak = Math.max(peak, running);
        if (running === 5) full.resolve();
        await full.promise;
        await sleep(5);
        running--;
        done++;
      }, { ...FAST, concurrency: 5, batchSize: 3, pollIntervalMs: HOUR_POLL, startFrom: 'earliest' });
      // The poll is hourly: all 40 done at all means a full batch claimed again at once.
      await waitFor(() => done === 40, 10_000);
      assert.equal(peak, 5);
      if (store) assert.ok(store.claimMax.every((m) => m >= 1 && m <= 3), `claim sizes ${store.claimMax.join(',')}`);
    });

    it('11a. maxInFlight of 2^31 and of Number.MAX_SAFE_INTEGER, which the check accepts, claim and deliver everything', async () => {
      // Before, on Postgres a cap past 2^31 - 1 failed every claim (integer out of range) and the group never consumed.
      const { q } = await t.instance();
      for (const [i, maxInFlight] of [2 ** 31, Number.MAX_SAFE_INTEGER].entries()) {
        const seen: string[] = [];
        await q.subscribe('t', `g${i}`, async (d) => void seen.push(d.id), { ...FAST, maxInFlight, startFrom: 'earliest' });
        if (i === 0) await q.publish(...['a', 'b', 'c'].map((id) => ({ id, topic: 't', payload: enc(id) })));
        await waitFor(() => seen.length === 3, 60_000, `maxInFlight ${maxInFlight}: all three handled`);
        assert.deepEqual([...seen].sort(), ['a', 'b', 'c']);
      }
      assert.deepEqual(t.errors, []);
    });

    it('11. one group\'s subscriptions compete, every group gets every message, maxInFlight holds across three instances', async () => {
      const a = await t.instance();
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

      const instances = [a, await t.instance(), await t.instance()];
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
      const { q, store } = await t.instance();
      await q.publish(...Array.from({ length: 64 }, () => ({ topic: 't', payload: enc('x') })));
      let done = 0;
      await q.subscribe('t', 'g', async () => void done++, { ...FAST, concurrency: 16, batchSize: 16, startFrom: 'earliest' });
      await waitFor(async () => done === 64 && (await q.stats('t', 'g')).leased === 0, 5000);
      assert.equal(store.ackBatches.reduce((a, b) => a + b, 0), 64);
      assert.ok(store.count('ack') < 64 / 2, `${store.count('ack')} ack calls for 64 deliveries`);
    });

    it('13. a scheduled message runs when due, never early, without waiting for a poll; too far ahead is refused', async () => {
      const { q } = await t.instance({ retentionHours: 1 });
      const at = deferred<number>();
      await q.subscribe('t', 'g', async () => at.resolve(Date.now()), { ...FAST, pollIntervalMs: HOUR_POLL });
      const due = Date.now() + 300;
      await q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(due) });
      // The poll is hourly: running at all means the engine woke itself when the message fell due.
      const ranAt = await orHang(at.promise, 'the scheduled delivery');
      assert.ok(ranAt >= due, `ran ${due - ranAt} ms early`);
      await assert.rejects(
        q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(Date.now() + 2 * 3_600_000) }),
        ScheduleTooFarError,
      );
      await q.publish({ topic: 't', payload: enc('x'), deliverAt: new Date(Date.now() + 3_500_000) });
    });

    it('the janitor purges on its timer', async () => {
      const { q, store } = await t.instance({ janitorIntervalMs: 40, ackedRetentionHours: 1 / 3_600_000 });
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

    it('a janitor pass works at the longest retentions the config accepts (a cutoff a century back)', async () => {
      const { q } = await t.instance({ retentionHours: MAX_RETENTION_HOURS, ackedRetentionHours: MAX_RETENTION_HOURS, janitorIntervalMs: 3_600_000 });
      let done = 0;
      await q.subscribe('t', 'g', async (d) => {
        done++;
        if (d.attempt === 1 && d.key === 'dead') throw permanent(new Error('dead on purpose'));
      }, FAST);
      await q.publish({ topic: 't', payload: enc('a') }, { topic: 't', key: 'dead', payload: enc('b') });
      await waitFor(() => done === 2);
      assert.equal(await q.runJanitor(), 0, 'nothing is old enough to purge');
      assert.deepEqual(t.errors.filter((e) => e.op === 'janitor' || e.op === 'purge'), []);
    });

    it('the janitor runs on one instance at a time', async () => {
      const b = await t.instance({ janitorIntervalMs: 3_600_000 });
      const c = await t.instance({ janitorIntervalMs: 3_600_000 });
      assert.equal(await b.q.runJanitor(), 0, 'nothing to purge yet');
      assert.equal(b.store.count('purge'), 1);
      assert.equal(await c.q.runJanitor(), 0);
      assert.equal(c.store.count('purge'), 0, 'a second instance does not purge while another holds the role');
      assert.equal(c.store.count('acquireJanitor'), 1);
    });
  });
}
