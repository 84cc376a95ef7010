/**
 * The nats queue beyond the shared conformance cases: its config block, its
 * name and header encodings, what it refuses with `UnsupportedError`,
 * publish de-duplication, calls racing each other and close, and a close
 * that returns while the server has gone silent. The server-side tests need
 * NATS with JetStream (test/stores/nats-env.ts): skipped without it, failed
 * under CI=true.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { after, describe, it } from 'node:test';
import { ClosedError, FerryError, IOError, InvalidArgumentError, PayloadTooLargeError, UnsupportedError } from '../../src/errors.js';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { AttemptConflict, AttemptLedger, attemptLedgerStream } from '../../src/queue/brokers/nats/attempt-ledger.js';
import { resolveNatsConfig } from '../../src/queue/brokers/nats/config.js';
import { NATS_HEADER_ROOM } from '../../src/queue/brokers/nats/queue.js';
import { escapeName, streamName, subjectOf, topicOfStream, unescapeName } from '../../src/queue/brokers/nats/names.js';
import { MAX_CALLER_HEADER_BYTES, fitEscaped, fromWire, toHeaders } from '../../src/queue/brokers/nats/wire.js';
import { HEADER_DLQ_ERROR, MAX_ERROR_BYTES } from '../../src/queue/dead-letter.js';
import { permanent } from '../../src/queue/permanent.js';
import { createQueue } from '../../src/queue/registry.js';
import type { Delivery, Queue, Subscription } from '../../src/queue/types.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { NATS_SKIP, NATS_URL, deleteStreams, openTestNatsQueue, testPrefix } from '../stores/nats-env.js';
import { deferred, sleep, waitFor, within } from '../stores/helpers.js';

const enc = (s: string) => new TextEncoder().encode(s);
const FAST = { leaseDurationMs: 2000, backoffBaseMs: 5, backoffMaxMs: 20 };

describe('nats queue: config, names and headers', () => {
  it('the config block takes its keys and defaults, and refuses unknown keys and bad values', async () => {
    const d = resolveNatsConfig(undefined);
    assert.deepEqual([d.servers, d.streamPrefix, d.replicas, d.duplicateWindowMs, d.retentionHours], [['127.0.0.1:4222'], 'FERRY', 1, 120_000, 168]);
    const c = resolveNatsConfig({ servers: ['a:1', 'b:2'], streamPrefix: 'app-1', replicas: 3, duplicateWindowMs: 60_000, user: 'u', password: 'p', name: 'svc' });
    assert.deepEqual([c.servers, c.replicas, c.user, c.password, c.name], [['a:1', 'b:2'], 3, 'u', 'p', 'svc']);
    const bad: unknown[] = [
      { bogus: 1 }, { replicas: 0 }, { replicas: 6 }, { replicas: 1.5 }, { streamPrefix: 'a.b' }, { streamPrefix: 'a_b' }, { servers: [] },
      { servers: 3 }, { password: 'p' }, { token: 't', user: 'u' }, { tracing: true }, { duplicateWindowMs: 10 }, [], 'x',
      { retentionHours: 0.01, duplicateWindowMs: 120_000 }, { streamPrefix: 'app-dead' }, { streamPrefix: 'app-att' }, { streamPrefix: 'app-ATT' }, { streamPrefix: 'x-Dead' },
    ];
    for (const b of bad) assert.throws(() => resolveNatsConfig(b), InvalidArgumentError, JSON.stringify(b));
    await assert.rejects(createQueue({ type: 'nats', config: { sever: 'x' } }), InvalidArgumentError);
    // A credentials file that cannot be read is an IOError naming it, not Node's bare error.
    await assert.rejects(createQueue({ type: 'nats', config: { credsFile: '/nonexistent/ferry.creds' } }), (e: unknown) => e instanceof IOError && !e.transient && /ferry\.creds/.test(e.message));
  });

  it('topic and group names escape one-to-one into JetStream names', () => {
    const names = ['a', 'a.b', 'a_b', 'a__b', 'a._b', '_d', '.', '..', '_', 'A-b.C_d-', 'x'.repeat(100)];
    const escaped = new Set(names.map(escapeName));
    assert.equal(escaped.size, names.length);
    for (const n of names) {
      assert.equal(unescapeName(escapeName(n)), n);
      assert.match(escapeName(n), /^[A-Za-z0-9_-]+$/);
      assert.equal(topicOfStream('P', streamName('P', n)), n);
      assert.doesNotMatch(subjectOf('P', n), /\.\.|\.$/);
    }
    assert.equal(unescapeName('a_x'), undefined);
    assert.throws(() => streamName('P', '.'.repeat(150)), UnsupportedError);
  });

  it('an error text cut for a dead-letter header fits its room once escaped', () => {
    for (const text of ['%'.repeat(2000), '\n'.repeat(3000), 'a%\r\n€'.repeat(500), ' x '.repeat(600), '€'.repeat(2000)]) {
      const cut = fitEscaped(text, MAX_ERROR_BYTES);
      assert.ok(text.startsWith(cut), 'a prefix of the text');
      const escapedBytes = Buffer.byteLength(toHeaders({ id: 'i', topic: 't', payload: enc(''), publishedAt: new Date(0), headers: { e: cut } }).get('e'));
      assert.ok(escapedBytes <= MAX_ERROR_BYTES, `${escapedBytes} bytes escaped`);
      assert.ok(escapedBytes > MAX_ERROR_BYTES - 5 * 4, 'cut no more than needed');
    }
    assert.equal(fitEscaped('plain error', MAX_ERROR_BYTES), 'plain error');
  });

  it('headers survive the trip through NATS: CR, LF, % and edge whitespace included', () => {
    const headers = { a: ' x\r\ny ', b: '%0041%', c: '', d: '\t', e: 'plain value' };
    const m = { id: 'i', topic: 't', payload: enc('p'), publishedAt: new Date(1_700_000_000_123), headers };
    const h = toHeaders(m);
    for (const k of h.keys()) assert.doesNotMatch(h.get(k), /[\r\n]|^\s|\s$/);
    h.set('Nats-Msg-Id', 'i');
    const back = fromWire('t', m.payload, h, new Date(0), 'fallback');
    assert.deepEqual(back, m);
  });
});

describe('nats queue: against the server', { skip: NATS_SKIP }, () => {
  const prefixes: string[] = [];
  const queues: Queue<unknown>[] = [];
  const open = async (prefix = testPrefix(), servers: string = NATS_URL) => {
    if (!prefixes.includes(prefix)) prefixes.push(prefix);
    const q = await openTestNatsQueue(prefix, {}, servers);
    queues.push(q);
    return q;
  };
  after(async () => {
    await Promise.allSettled(queues.map((q) => q.close({ timeoutMs: 100 })));
    for (const p of prefixes) await deleteStreams(p).catch(() => undefined);
  });

  it('what JetStream cannot promise is refused with UnsupportedError, storing nothing', async () => {
    const q = await open();
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['key', () => q.publish({ topic: 't', payload: enc('a') }, { topic: 't', key: 'k', payload: enc('b') })],
      ['deliverAt', () => q.publish({ topic: 't', payload: enc('a'), deliverAt: new Date(Date.now() + 1000) })],
      ['priority', () => q.publish({ topic: 't', payload: enc('a'), priority: 3 })],
      ['rateLimit', () => q.subscribe('t', 'g', async () => undefined, { rateLimit: { max: 1, intervalMs: 1000 } })],
      ['pauseGroup', () => q.pauseGroup('t', 'g')],
      ['resumeGroup', () => q.resumeGroup('t', 'g')],
      ['schedule', () => q.schedule('s', { topic: 't', everyMs: 1000, payload: enc('x') })],
      ['listSchedules', () => q.listSchedules()],
    ];
    for (const [what, call] of cases) {
      await assert.rejects(call(), (err: unknown) => err instanceof UnsupportedError && err.code === 'ERR_UNSUPPORTED' && /nats/.test(err.message), what);
    }
    assert.deepEqual((await q.listMessages('t')).messages, []);
    await assert.rejects(q.publish({ topic: 't', payload: enc('a'), headers: { 'bad name': 'x' } }), InvalidArgumentError);
    await assert.rejects(q.publish({ topic: 't', payload: enc('a'), headers: { 'Nats-Expected-Stream': 'x' } }), InvalidArgumentError);
  });

  it("payloads leave room for headers under the server's max_payload: the default limit is below it, a larger one is refused at open", async () => {
    const q = await open();
    // This server runs with the default max_payload of 1 MiB.
    await assert.rejects(q.publish({ topic: 't', payload: new Uint8Array((1 << 20) - NATS_HEADER_ROOM + 1) }), PayloadTooLargeError);
    assert.equal((await q.publish({ topic: 't', payload: new Uint8Array((1 << 20) - NATS_HEADER_ROOM) })).length, 1);
    await assert.rejects(createQueue({ type: 'nats', config: { servers: NATS_URL, streamPrefix: testPrefix(), maxPayloadBytes: 8 << 20 } }), InvalidArgumentError);
  });

  it('a message ID published twice within the duplicate window is stored and delivered once', async () => {
    const q = await open();
    const got: Delivery[] = [];
    await q.subscribe('t', 'g', async (d) => void got.push(d as Delivery), FAST);
    assert.deepEqual(await q.publish({ id: 'same', topic: 't', payload: enc('1') }), ['same']);
    assert.deepEqual(await q.publish({ id: 'same', topic: 't', payload: enc('2') }, { id: 'other', topic: 't', payload: enc('3') }), ['same', 'other']);
    await waitFor(() => got.length === 2);
    await sleep(100);
    assert.deepEqual(got.map((d) => [d.id, new TextDecoder().decode(d.payload)]).sort(), [['other', '3'], ['same', '1']]);
    assert.equal((await q.listMessages('t')).messages.length, 2);
  });

  it('one signal passed to every close at once (a whole shutdown) gets no listener per close: no leak warning, none left behind', async () => {
    const q = await open();
    const subs = await Promise.all(Array.from({ length: 12 }, (_, i) => q.subscribe(`t${i}`, 'g', async () => {}, FAST)));
    const shutdown = new AbortController();
    const warnings: Error[] = [];
    const onWarning = (w: Error) => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      await Promise.all([...subs.map((s) => s.close({ signal: shutdown.signal, timeoutMs: 5000 })), q.close({ signal: shutdown.signal, timeoutMs: 5000 })]);
      await sleep(50); // warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
    }
    // Each close added one of its own before, and left it: 13 at once passed Node's limit of 10 (a "possible EventTarget memory leak" warning).
    assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning'), []);
    assert.ok(getEventListeners(shutdown.signal, 'abort').length <= 1, 'at most the one shared listener stays');
  });

  it('publish, subscribe and close called at once: each resolves or rejects with ClosedError, and every resolved publish is delivered', async () => {
    for (let round = 0; round < 3; round++) {
      const prefix = testPrefix();
      const producer = await open(prefix);
      const consumer = await open(prefix);
      const seen = new Set<string>();
      const handler = async (d: Delivery<unknown>) => void seen.add(d.id);
      // subscribe ∥ publish, pairwise, on two instances.
      const pairs = await Promise.all(Array.from({ length: 4 }, (_, i) => Promise.all([
        consumer.subscribe('t', 'g', handler, { ...FAST, startFrom: 'earliest' }),
        producer.publish({ id: `a${i}`, topic: 't', payload: enc('x') }),
      ])));
      const subs = pairs.map(([s]) => s);
      // Subscription.close ∥ publish.
      await Promise.all(subs.slice(0, 2).map((s, i) => Promise.all([s.close(), producer.publish({ id: `b${i}`, topic: 't', payload: enc('x') })])));
      await waitFor(() => seen.size === 6, 10_000, 'the six messages');
      // Queue.close ∥ publish and ∥ subscribe: resolved or ClosedError, nothing else.
      const racing = await Promise.allSettled([producer.publish({ id: 'c', topic: 't', payload: enc('x') }), producer.close(), consumer.subscribe('t', 'late', handler, FAST), consumer.close()]);
      for (const r of racing) if (r.status === 'rejected') assert.ok(r.reason instanceof ClosedError, String(r.reason));
      await assert.rejects(producer.publish({ topic: 't', payload: enc('x') }), ClosedError);
      await assert.rejects(consumer.subscribe('t', 'g', handler), ClosedError);
      // Once close has been called a subscribe is refused at once; a publish is taken until the
      // subscriptions have closed (a handler close waits for may feed the next stage) and is stored
      // before close resolves, then refused.
      const third = await open(prefix);
      const closing = third.close();
      const taken = third.publish({ id: 'd', topic: 't', payload: enc('taken') });
      await assert.rejects(third.subscribe('t', 'g', handler), ClosedError);
      await closing;
      assert.deepEqual(await taken, ['d']);
      await assert.rejects(third.publish({ topic: 't', payload: enc('late') }), ClosedError);
      const lateSub = racing[2];
      if (lateSub.status === 'fulfilled') await (lateSub.value as Subscription).close(); // already closed by the queue: idempotent
    }
  });

  it('close returns while the server has gone silent, aborting a running handler', async () => {
    const proxy = await TcpProxy.start(Number(NATS_URL.split(':').pop()));
    try {
      const q = await open(testPrefix(), `127.0.0.1:${proxy.port}`);
      let aborted = false;
      const started = deferred();
      await q.subscribe('t', 'g', async (_d, signal) => {
        started.resolve();
        await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        aborted = true;
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      proxy.freeze();
      await within(q.close({ timeoutMs: 100 }), 'close on a silent server', 30_000);
      assert.equal(aborted, true);
    } finally {
      await proxy.close();
    }
  });

  it('close with a deadline does not wait past it for a subscribe the silent server holds; that subscribe, and a stats call, reject with ClosedError', async () => {
    const proxy = await TcpProxy.start(Number(NATS_URL.split(':').pop()));
    try {
      const q = await open(testPrefix(), `127.0.0.1:${proxy.port}`);
      proxy.freeze();
      // Its stream and consumer requests wait on the server (nats.js times them out after seconds).
      const subscribing = q.subscribe('frozen', 'g', async () => undefined, FAST);
      const outcome = subscribing.then(
        (s) => s,
        (e: unknown) => e,
      );
      // A read waiting on the server too: cut short by close, it rejects as the engine's queues do.
      const reading = q.stats('frozen', 'g').then(
        (s) => s,
        (e: unknown) => e,
      );
      await within(q.close({ timeoutMs: 100 }), 'close while a subscribe waits on a silent server', 30_000);
      const got = await within(outcome, 'the subscribe to settle', 60_000);
      assert.ok(got instanceof ClosedError, `ClosedError, got ${String(got)}`);
      const read = await within(reading, 'the stats call to settle', 60_000);
      assert.ok(read instanceof ClosedError, `stats: ClosedError, got ${String(read)}`);
    } finally {
      await proxy.close();
    }
  });

  it("the driver's errors reach the error event as FerryErrors with a code (nats.js's own have none)", async () => {
    const proxy = await TcpProxy.start(Number(NATS_URL.split(':').pop()));
    try {
      const q = await open(testPrefix(), `127.0.0.1:${proxy.port}`);
      const first = deferred<{ err: unknown; op: string }>();
      q.on('error', (err, op) => first.resolve({ err, op }));
      await q.subscribe('silent', 'g', async () => undefined, FAST);
      proxy.freeze();
      const { err, op } = await within(first.promise, 'an error from the silent server', 120_000);
      assert.ok(err instanceof FerryError, `a FerryError for ${op}, got ${String(err)}`);
      assert.equal(typeof err.code, 'string');
      proxy.thaw();
    } finally {
      await proxy.close();
    }
  });

  it('the attempt ledger: a record reads back, of two writers expecting one record the second is refused, forget drops it', async () => {
    const prefix = testPrefix();
    prefixes.push(prefix);
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: attemptLedgerStream(prefix), subjects: [`${prefix}-att.>`], max_msgs_per_subject: 1 });
      const ledger = new AttemptLedger(jetstream(nc), jsm, prefix, 'a.b', 'g_1', async () => undefined);
      assert.deepEqual(await ledger.read(7), { attempt: 0, failed: false, seq: 0 });
      const seq = await ledger.write(7, 2, false, 0);
      assert.deepEqual(await ledger.read(7), { attempt: 2, failed: false, seq });
      // Two processes both read that record and both try to start attempt 3: one wins.
      const both = await Promise.allSettled([ledger.write(7, 3, false, seq), ledger.write(7, 3, false, seq)]);
      assert.deepEqual(both.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
      assert.ok(both.some((r) => r.status === 'rejected' && r.reason instanceof AttemptConflict));
      const won = (both.find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<number>).value;
      await assert.rejects(ledger.write(7, 3, true, seq), AttemptConflict, 'a failure written under a lost lease is refused');
      await ledger.write(7, 3, true, won);
      assert.deepEqual(await ledger.read(7), { attempt: 3, failed: true, seq: won + 1 });
      await ledger.forget(7);
      assert.deepEqual(await ledger.read(7), { attempt: 0, failed: false, seq: 0 });
      assert.equal((await jsm.streams.info(attemptLedgerStream(prefix))).state.messages, 0);
    } finally {
      await nc.close();
    }
  });

  it("removeGroup from another instance aborts a handler whose subscription has no free slot (so makes no pull)", async () => {
    const prefix = testPrefix();
    const a = await open(prefix);
    const b = await open(prefix);
    const started = deferred();
    const aborted = deferred();
    const sub = await a.subscribe('t', 'g', async (_d, signal) => {
      started.resolve();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      aborted.resolve();
    }, { ...FAST, concurrency: 1, prefetch: 0 });
    try {
      await a.publish({ topic: 't', payload: enc('x') });
      await within(started.promise, 'the handler to start', 20_000);
      assert.equal(await b.removeGroup('t', 'g'), true);
      await within(aborted.promise, 'the heartbeat to find the group gone and abort the handler', 30_000);
    } finally {
      await sub.close({ timeoutMs: 100 });
    }
  });

  it('headers over 4 KiB on the wire are refused with PayloadTooLargeError before anything is sent; within it they go through', async () => {
    const prefix = testPrefix();
    const q = await open(prefix);
    await assert.rejects(q.publish({ topic: 't', payload: enc('x'), headers: { big: 'v'.repeat(MAX_CALLER_HEADER_BYTES) } }), PayloadTooLargeError);
    // Escaping counts: 1,000 line feeds are 5,000 bytes on the wire.
    await assert.rejects(q.publish({ topic: 't', payload: enc('x'), headers: { lines: '\n'.repeat(1000) } }), PayloadTooLargeError);
    const id = await q.publish({ topic: 't', payload: enc('x'), headers: { ok: 'v'.repeat(MAX_CALLER_HEADER_BYTES - 100) } });
    assert.equal(id.length, 1);
    const page = await q.listMessages('t', { limit: 10 });
    assert.deepEqual(page.messages.map((m) => m.headers?.ok?.length), [MAX_CALLER_HEADER_BYTES - 100], 'only the message within the limit was stored');
  });

  it("a group's ack wait is the longest lease asked for: a subscription with a shorter lease does not cut the others' short", async () => {
    const prefix = testPrefix();
    const a = await open(prefix);
    const b = await open(prefix);
    const ackWaitMs = async () => {
      const nc = await connect({ servers: NATS_URL });
      try {
        const jsm = await jetstreamManager(nc);
        return (await jsm.consumers.info(streamName(prefix, 't'), 'g')).config.ack_wait! / 1e6;
      } finally {
        await nc.close();
      }
    };
    /** The ack waits read every 250 ms until one is `ms` (a generous deadline catches a hang, not a timing). */
    const ackWaitsUntil = async (ms: number) => {
      const seen = [await ackWaitMs()];
      for (const deadline = Date.now() + 60_000; seen.at(-1) !== ms && Date.now() < deadline; ) {
        await new Promise((r) => setTimeout(r, 250));
        seen.push(await ackWaitMs());
      }
      return seen;
    };
    const subs: Subscription[] = [];
    try {
      subs.push(await a.subscribe('t', 'g', async () => undefined, { leaseDurationMs: 6000 }));
      assert.equal(await ackWaitMs(), 6000);
      subs.push(await b.subscribe('t', 'g', async () => undefined, { leaseDurationMs: 1000 }));
      assert.equal(await ackWaitMs(), 6000, 'a shorter lease leaves the ack wait alone');
      // Two at once, each asking for more: the longer one wins whatever the order (at once, or, when the
      // shorter one's update landed last, at the longer one's next check, within one lease).
      subs.push(...(await Promise.all([a.subscribe('t', 'g', async () => undefined, { leaseDurationMs: 8000 }), b.subscribe('t', 'g', async () => undefined, { leaseDurationMs: 9000 })])));
      const seen = await ackWaitsUntil(9000);
      assert.equal(seen.at(-1), 9000, String(seen));
      assert.ok(seen.every((ms) => ms >= 8000), `never below a lease asked for: ${seen}`);
      // The losing order, forced: the shorter lease written over the longer one. The 9 s subscription puts it back.
      const nc = await connect({ servers: NATS_URL });
      try {
        await (await jetstreamManager(nc)).consumers.update(streamName(prefix, 't'), 'g', { ack_wait: 8000 * 1e6 });
      } finally {
        await nc.close();
      }
      const after = await ackWaitsUntil(9000);
      assert.equal(after.at(-1), 9000, String(after));
    } finally {
      await Promise.all(subs.map((s) => s.close({ timeoutMs: 100 })));
    }
  });

  it('a permanent failure of a largest message with 4 KiB of headers is dead-lettered at once, whatever its error text escapes to', async () => {
    const q = await open();
    const dead: Array<{ reason: string; attempt: number }> = [];
    q.on('deadLettered', (e) => void dead.push({ reason: e.reason, attempt: e.attempt }));
    const copies: Array<Delivery<unknown>> = [];
    const subs = [
      await q.subscribe('dlq', 'inspect', async (d) => void copies.push(d), { ...FAST, startFrom: 'earliest' }),
      await q.subscribe('t', 'g', async () => {
        throw permanent(new Error('%'.repeat(2000)));
      }, { ...FAST, maxAttempts: 3, deadLetterTopic: 'dlq' }),
    ];
    try {
      const headers = { h: 'v'.repeat(MAX_CALLER_HEADER_BYTES - 10) };
      await q.publish({ topic: 't', payload: new Uint8Array(1_040_384), headers });
      await waitFor(() => copies.length === 1 && dead.length === 1, 30_000); // the copy is stored before the event
      assert.deepEqual(dead, [{ reason: 'permanent', attempt: 1 }]);
      const err = copies[0]!.headers![HEADER_DLQ_ERROR]!;
      assert.ok(err.length > 100 && /^%+$/.test(err), 'the copy carries the (cut) error text');
      assert.equal(copies[0]!.headers!.h, headers.h);
    } finally {
      await Promise.all(subs.map((s) => s.close({ timeoutMs: 100 })));
    }
  });
});
