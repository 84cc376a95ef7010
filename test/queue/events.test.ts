/**
 * Lifecycle events, the logger and the error reporter: one event per outcome,
 * written outcomes only, under concurrent handlers and instances; listeners
 * and loggers that throw do not disturb the queue.
 */
import assert from 'node:assert/strict';
import { subscribe as subscribeChannel, unsubscribe as unsubscribeChannel } from 'node:diagnostics_channel';
import { Writable } from 'node:stream';
import { afterEach, describe, it } from 'node:test';
import pino from 'pino';
import { MemoryBacking, MemoryStore, createStoreQueue, permanent } from '../../src/queue/index.js';
import { DIAGNOSTICS_CHANNEL_PREFIX } from '../../src/queue/events.js';
import type { CompletedEvent, DeadLetteredEvent, LeaseLostEvent, QueueLogger, RetryingEvent } from '../../src/queue/index.js';
import { FAST, enc } from '../stores/engine-harness.js';
import { InstrumentedStore, deferred, sleep, waitFor, within } from '../stores/helpers.js';

/** Queues of the running test, closed after it whether it passed or not (so a failure cannot hang the file). */
let open: Array<{ close(o?: { timeoutMs?: number }): Promise<void> }> = [];
afterEach(async () => {
  await Promise.allSettled(open.map((q) => q.close({ timeoutMs: 50 })));
  open = [];
});
function track<Q extends { close(o?: { timeoutMs?: number }): Promise<void> }>(q: Q): Q {
  open.push(q);
  return q;
}

const msgs = (topic: string, n: number) => Array.from({ length: n }, (_, i) => ({ topic, id: `m${i}`, payload: enc(String(i)) }));

/** Records every lifecycle event of `q`. */
function record(q: ReturnType<typeof createStoreQueue>) {
  const r = { completed: [] as CompletedEvent[], retrying: [] as RetryingEvent[], dead: [] as DeadLetteredEvent[], lost: [] as LeaseLostEvent[], errors: [] as Array<[unknown, string]> };
  q.on('completed', (e) => r.completed.push(e))
    .on('retrying', (e) => r.retrying.push(e))
    .on('deadLettered', (e) => r.dead.push(e))
    .on('leaseLost', (e) => r.lost.push(e))
    .on('error', (err, op) => r.errors.push([err, op]));
  return r;
}

/** A plain object logger that keeps its calls. */
function objectLogger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg?: string }> = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj: obj as Record<string, unknown>, msg });
  const logger: QueueLogger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, lines };
}

describe('queue events', () => {
  it('10 messages, 8 concurrent handlers: 7 complete, 2 retry then complete, 1 dies — exactly one completed per delivery', async () => {
    const q = track(createStoreQueue(new MemoryStore()));
    const r = record(q);
    await q.subscribe('t', 'g', async (d) => {
      await sleep(5);
      const n = Number(new TextDecoder().decode(d.payload));
      if (n === 9) throw permanent(new Error('bad nine'));
      if ((n === 3 || n === 6) && d.attempt === 1) throw new Error(`first try of ${n}`);
    }, { ...FAST, concurrency: 8, backoffBaseMs: 10, backoffMaxMs: 10 });
    await Promise.all(msgs('t', 10).map((m) => q.publish(m)));
    await waitFor(() => r.completed.length === 9 && r.dead.length === 1, 5000, 'every outcome');
    await sleep(50); // nothing more may arrive
    assert.equal(r.completed.length, 9);
    assert.equal(new Set(r.completed.map((e) => e.deliveryId)).size, 9, 'one completed per delivery');
    assert.deepEqual(r.completed.map((e) => e.messageId).sort(), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8']);
    assert.deepEqual(r.completed.filter((e) => e.attempt === 2).map((e) => e.messageId).sort(), ['m3', 'm6']);
    for (const e of r.completed) assert.ok(e.durationMs >= 4 && e.topic === 't' && e.group === 'g', JSON.stringify(e));
    assert.deepEqual(r.retrying.map((e) => [e.messageId, e.attempt]).sort(), [['m3', 1], ['m6', 1]]);
    for (const e of r.retrying) {
      assert.ok(e.delayMs >= 5 && e.delayMs <= 10, `equal jitter of a 10 ms backoff: ${e.delayMs}`);
      assert.match((e.error as Error).message, /first try/);
    }
    assert.equal(r.dead.length, 1);
    assert.deepEqual([r.dead[0]!.messageId, r.dead[0]!.reason, r.dead[0]!.attempt], ['m9', 'permanent', 1]);
    assert.match((r.dead[0]!.error as Error).message, /bad nine/);
    assert.ok(r.dead[0]!.durationMs! >= 4);
    assert.deepEqual([r.lost.length, r.errors.length], [0, 0]);
    await q.close();
  });

  it('two instances of one group under Promise.all: every delivery completes exactly once across both', async () => {
    const backing = new MemoryBacking();
    const a = track(createStoreQueue(new MemoryStore({ backing })));
    const b = track(createStoreQueue(new MemoryStore({ backing })));
    const ra = record(a);
    const rb = record(b);
    const handler = async () => void (await sleep(1));
    await Promise.all([a.subscribe('t', 'g', handler, { ...FAST, concurrency: 8 }), b.subscribe('t', 'g', handler, { ...FAST, concurrency: 8 })]);
    await Promise.all([a.publish(...msgs('t', 100)), b.publish(...msgs('t', 100).map((m) => ({ ...m, id: `b${m.id}` })))]);
    await waitFor(() => ra.completed.length + rb.completed.length >= 200, 10_000, 'all 200');
    await sleep(50);
    const all = [...ra.completed, ...rb.completed].map((e) => e.deliveryId);
    assert.equal(all.length, 200);
    assert.equal(new Set(all).size, 200);
    assert.ok(ra.completed.length > 0 && rb.completed.length > 0, 'both instances worked');
    await Promise.all([a.close(), b.close()]);
  });

  it('attempts exhausted and lost leases each name their reason', async () => {
    const q = track(createStoreQueue(new MemoryStore()));
    const r = record(q);
    await q.subscribe('t', 'g', async () => { throw new Error('always'); }, { ...FAST, maxAttempts: 2 });
    await q.publish({ topic: 't', id: 'x', payload: enc('x') });
    await waitFor(() => r.dead.length === 1, 5000);
    assert.deepEqual([r.retrying.length, r.dead[0]!.reason, r.dead[0]!.attempt], [1, 'exhausted', 2]);
    await q.close();
  });

  it('leaseLost: a heartbeat that finds the lease gone aborts the handler and emits no outcome', async () => {
    const store = new InstrumentedStore(new MemoryStore());
    const q = track(createStoreQueue(store));
    const r = record(q);
    store.after.extend = () => [];
    const aborted = deferred();
    await q.subscribe('t', 'g', async (_d, signal) => {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      aborted.resolve();
      throw new Error('aborted');
    }, { ...FAST, leaseDurationMs: 3000 }); // the first heartbeat comes 2 s before a lapse would: a busy machine still sees it notice first
    await q.publish({ topic: 't', id: 'x', payload: enc('x') });
    await aborted.promise;
    await sleep(30);
    assert.deepEqual(r.lost.map((e) => [e.messageId, e.op, e.attempt]), [['x', 'heartbeat', 1]]);
    assert.deepEqual([r.completed.length, r.retrying.length, r.dead.length], [0, 0, 0]);
    await q.close({ timeoutMs: 10 });
  });

  it('an ack the store refuses as not held is leaseLost, not completed', async () => {
    const store = new InstrumentedStore(new MemoryStore());
    const q = track(createStoreQueue(store));
    const r = record(q);
    store.after.ack = () => [];
    await q.subscribe('t', 'g', async () => undefined, FAST);
    await q.publish({ topic: 't', id: 'x', payload: enc('x') });
    await waitFor(() => r.lost.length === 1, 5000);
    assert.deepEqual([r.lost[0]!.op, r.completed.length], ['ack', 0]);
    await q.close({ timeoutMs: 10 });
  });

  /**
   * A queue over an instrumented memory store whose handler fails its first
   * attempt, with `reclaimed` settling once a claim hands the delivery out
   * again (attempt 2); `ran` lists the attempts whose handler ran.
   */
  function reclaimHarness() {
    const store = new InstrumentedStore(new MemoryStore());
    const q = track(createStoreQueue(store));
    const r = record(q);
    const answer = deferred();
    const reclaimed = deferred();
    store.after.claim = (cs: Array<{ attempt: number }>) => {
      if (cs.some((c) => c.attempt === 2)) reclaimed.resolve();
      return cs;
    };
    const ran: number[] = [];
    const handler = async (d: { attempt: number }) => {
      ran.push(d.attempt);
      if (d.attempt === 1) throw new Error('first try');
    };
    return { store, q, r, answer, reclaimed, ran, handler };
  }

  it('a retry that landed and was claimed again before its answer came back is retrying, not leaseLost', async () => {
    // Two subscriptions of one group in one queue: the retry is written, its
    // backoff ends, and the other subscription claims the delivery while the
    // first still waits for the retry's answer (a Postgres round trip). The
    // claim must not report the written attempt as lost.
    const { store, q, r, answer, reclaimed, ran, handler } = reclaimHarness();
    store.after.retry = async (held: boolean) => {
      await answer.promise;
      return held;
    };
    const opts = { ...FAST, backoffBaseMs: 1, backoffMaxMs: 1 };
    await q.subscribe('t', 'g', handler, opts);
    await q.subscribe('t', 'g', handler, opts);
    await q.publish({ topic: 't', id: 'x', payload: enc('x') });
    await within(reclaimed.promise, 'the delivery claimed again', 5000);
    assert.deepEqual(ran, [1], 'the new attempt waits for the old one to finish');
    answer.resolve();
    await waitFor(() => r.completed.length === 1, 5000, 'the second attempt completes');
    assert.deepEqual(ran, [1, 2]);
    assert.deepEqual(r.retrying.map((e) => [e.messageId, e.attempt]), [['x', 1]]);
    assert.deepEqual(r.completed.map((e) => [e.messageId, e.attempt]), [['x', 2]]);
    assert.deepEqual(r.lost.map((e) => [e.op, e.attempt]), []);
  });

  it('a retry refused as not held after the delivery was claimed again is one leaseLost, named by the write (retry)', async () => {
    const { store, q, r, answer, reclaimed, ran, handler } = reclaimHarness();
    // The retry is not written (the store answers "not held"), and meanwhile
    // the lease runs out (no renewal reaches the store) and another claim
    // takes the delivery back.
    store.before.extend = () => {
      throw new Error('renewal refused');
    };
    store.before.retry = async () => {
      await answer.promise;
    };
    store.after.retry = () => false;
    const opts = { ...FAST, leaseDurationMs: 300 };
    await q.subscribe('t', 'g', handler, opts);
    await q.subscribe('t', 'g', handler, opts);
    await q.publish({ topic: 't', id: 'x', payload: enc('x') });
    await within(reclaimed.promise, 'the delivery claimed again', 5000);
    answer.resolve();
    await waitFor(() => r.completed.length === 1 && r.lost.length === 1, 5000, 'the loss and the second attempt');
    assert.deepEqual(ran, [1, 2]);
    assert.deepEqual(r.lost.map((e) => [e.op, e.attempt]), [['retry', 1]]);
    assert.deepEqual(r.retrying.length, 0);
    assert.deepEqual(r.completed.map((e) => e.attempt), [2]);
  });

  it('a listener that throws is reported as an error and the queue goes on', async () => {
    const errors: Array<[unknown, string]> = [];
    const q = track(createStoreQueue(new MemoryStore(), { onError: (err, op) => errors.push([err, op]) }));
    let completed = 0;
    q.on('completed', () => {
      completed++;
      throw new Error('listener bug');
    });
    await q.subscribe('t', 'g', async () => undefined, FAST);
    await q.publish(...msgs('t', 5));
    await waitFor(async () => completed === 5 && (await q.stats('t', 'g')).leased === 0, 5000);
    assert.deepEqual(errors.map(([, op]) => op), Array(5).fill('completed listener'));
    await q.close();
  });
});

describe('handled errors: error event, onError, logger, console.warn', () => {
  /** A store whose every claim fails. */
  function failingClaims() {
    const store = new InstrumentedStore(new MemoryStore());
    store.before.claim = () => { throw new Error('db down'); };
    return store;
  }

  async function withConsoleWarn<T>(fn: (warned: unknown[][]) => Promise<T>): Promise<T> {
    const warned: unknown[][] = [];
    const orig = console.warn;
    console.warn = (...args: unknown[]) => void warned.push(args);
    try {
      return await fn(warned);
    } finally {
      console.warn = orig;
    }
  }

  it('with no listener, reporter or logger an error goes to console.warn (as before events existed)', async () => {
    await withConsoleWarn(async (warned) => {
      const q = track(createStoreQueue(failingClaims()));
      await q.subscribe('t', 'g', async () => undefined, FAST);
      await waitFor(() => warned.length >= 1, 5000);
      assert.match(String(warned[0]![0]), /claim failed/);
      await q.close();
    });
  });

  it('an error listener, onError and the logger each get every error, and console.warn stays quiet', async () => {
    await withConsoleWarn(async (warned) => {
      const reported: string[] = [];
      const { logger, lines } = objectLogger();
      const q = track(createStoreQueue(failingClaims(), { onError: (_e, op) => reported.push(op), logger }));
      const heard: Array<[unknown, string]> = [];
      q.on('error', (err, op) => heard.push([err, op]));
      await q.subscribe('t', 'g', async () => undefined, FAST);
      await waitFor(() => heard.length >= 2, 5000);
      await q.close();
      assert.equal(warned.length, 0);
      assert.equal(heard[0]![1], 'claim');
      assert.match((heard[0]![0] as Error).message, /db down/);
      assert.ok(reported.length >= 2 && reported.every((op) => op === 'claim'));
      const errs = lines.filter((l) => l.level === 'error');
      assert.ok(errs.length >= 2);
      assert.equal(errs[0]!.obj.op, 'claim');
      assert.match((errs[0]!.obj.err as Error).message, /db down/);
      assert.equal(errs[0]!.msg, 'ferry/queue: claim failed');
    });
  });

  it('an error event without listeners never throws (no EventEmitter crash)', async () => {
    const reported: string[] = [];
    const q = track(createStoreQueue(failingClaims(), { onError: (_e, op) => reported.push(op) }));
    await q.subscribe('t', 'g', async () => undefined, FAST);
    // A second failed claim means the poll loop went on after reporting the
    // first with no `error` listener: an emit that threw would have ended it.
    await waitFor(() => reported.length >= 2, 5000, 'two failed claims');
    assert.ok(reported.every((op) => op === 'claim'), reported.join());
    await assert.doesNotReject(q.close());
  });
});

describe('logger', () => {
  it('a plain object logger: debug per completion, warn per handler failure, nothing else by default', async () => {
    const { logger, lines } = objectLogger();
    const q = track(createStoreQueue(new MemoryStore(), { logger }));
    await q.subscribe('t', 'g', async (d) => {
      if (d.id === 'm1' && d.attempt === 1) throw new Error('flaky');
      if (d.id === 'm2') throw permanent(new Error('never'));
    }, FAST);
    await q.publish(...msgs('t', 3));
    await waitFor(() => lines.filter((l) => l.level === 'debug').length === 2 && lines.some((l) => /dead-lettered/.test(l.msg ?? '')), 5000);
    await q.close();
    const warn = lines.filter((l) => l.level === 'warn');
    assert.deepEqual(warn.map((l) => [l.obj.messageId, l.msg]).sort(), [
      ['m1', 'ferry/queue: handler failed; retrying'],
      ['m2', 'ferry/queue: delivery dead-lettered'],
    ]);
    const retry = warn.find((l) => l.obj.messageId === 'm1')!;
    assert.match((retry.obj.err as Error).message, /flaky/);
    assert.equal(typeof retry.obj.delayMs, 'number');
    assert.equal('error' in retry.obj, false, 'the error goes under pino\'s err key');
    assert.deepEqual(lines.filter((l) => l.level === 'debug').map((l) => l.obj.messageId).sort(), ['m0', 'm1']);
    assert.equal(lines.filter((l) => l.level === 'info' || l.level === 'error').length, 0);
  });

  it('pino writing to a stream: JSON lines with pino\'s err serialisation and the delivery fields', async () => {
    const out: Array<Record<string, any>> = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        for (const line of String(chunk).split('\n')) if (line) out.push(JSON.parse(line));
        cb();
      },
    });
    const logger = pino({ level: 'debug' }, stream);
    const q = track(createStoreQueue(new MemoryStore(), { logger }));
    await q.subscribe('t', 'g', async (d) => {
      if (d.attempt === 1) throw new Error('first attempt fails');
    }, FAST);
    await q.publish({ topic: 't', id: 'p', payload: enc('x') });
    await waitFor(() => out.some((l) => l.level === 20), 5000, 'the completion');
    await q.close();
    const warn = out.find((l) => l.level === 40)!;
    assert.equal(warn.msg, 'ferry/queue: handler failed; retrying');
    assert.deepEqual([warn.topic, warn.group, warn.messageId, warn.attempt], ['t', 'g', 'p', 1]);
    assert.equal(warn.err.message, 'first attempt fails');
    assert.equal(warn.err.type, 'Error');
    assert.match(warn.err.stack, /first attempt fails/);
    const debug = out.find((l) => l.level === 20)!;
    assert.deepEqual([debug.msg, debug.messageId, debug.attempt], ['ferry/queue: delivery completed', 'p', 2]);
    assert.equal(typeof debug.durationMs, 'number');
  });

  it('refuses a logger missing a method with InvalidArgumentError', () => {
    assert.throws(() => createStoreQueue(new MemoryStore(), { logger: { warn() {} } as never }), /logger must have/);
  });
});

describe('completed, heard by whoever listens', () => {
  it('reaches a diagnostics_channel subscriber alone, and a listener added while the subscription runs', async () => {
    const q = track(createStoreQueue(new MemoryStore()));
    const fromChannel: Array<{ messageId: string; queue: unknown }> = [];
    const onChannel = (e: unknown) => void fromChannel.push(e as { messageId: string; queue: unknown });
    subscribeChannel(`${DIAGNOSTICS_CHANNEL_PREFIX}completed`, onChannel);
    try {
      let handled = 0;
      await q.subscribe('t', 'g', async () => void handled++, FAST);
      // No listener and no logger: only the channel hears these.
      await q.publish(...msgs('t', 3));
      await waitFor(() => fromChannel.length === 3, 5000, 'three completions on the channel');
      assert.deepEqual(fromChannel.map((e) => e.messageId).sort(), ['m0', 'm1', 'm2']);
      assert.ok(fromChannel.every((e) => e.queue === q), 'each names its queue');
      // A listener added now hears the next ones, as the channel does.
      const heard: string[] = [];
      q.on('completed', (e) => heard.push(e.messageId));
      await q.publish({ topic: 't', id: 'late', payload: enc('x') });
      await waitFor(() => heard.length === 1 && fromChannel.length === 4, 5000, 'the late completion');
      assert.deepEqual(heard, ['late']);
      assert.equal(handled, 4);
    } finally {
      unsubscribeChannel(`${DIAGNOSTICS_CHANNEL_PREFIX}completed`, onChannel);
    }
  });
});
