/**
 * What `Queue.schedule` accepts and refuses, and with which error, before
 * anything is stored; payloads through the queue's codec; and the
 * `UnsupportedError` of a store that keeps no schedules. On the memory
 * store: the checks are the engine's, the same for every store.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { codecs } from '../../src/codecs.js';
import { ClosedError, CodecError, InvalidArgumentError, InvalidNameError, PayloadTooLargeError, UnsupportedError } from '../../src/errors.js';
import { StoreQueue, createStoreQueue } from '../../src/queue/engine.js';
import { HEADER_SCHEDULE } from '../../src/queue/schedules/tick-message.js';
import type { ScheduleOptions } from '../../src/queue/schedules/types.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { InstrumentedStore, waitFor } from '../stores/helpers.js';

describe('schedule options', () => {
  const queues: StoreQueue<any>[] = [];
  after(() => Promise.all(queues.map((q) => q.close())));
  const queue = <T = Uint8Array>(cfg: Parameters<typeof createStoreQueue<T>>[1] = {}) => {
    const q = createStoreQueue<T>(new MemoryStore(), { fireSchedules: false, ...cfg });
    queues.push(q);
    return q;
  };

  it('refuses a bad name with InvalidNameError and bad options with InvalidArgumentError, storing nothing', async () => {
    const q = queue();
    const ok: ScheduleOptions = { everyMs: 1000, topic: 't' };
    for (const name of ['', 'a b', 'x'.repeat(201), 'a@b', undefined as unknown as string]) {
      await assert.rejects(q.schedule(name, ok), InvalidNameError, JSON.stringify(name));
    }
    await assert.rejects(q.schedule('s', { everyMs: 1000, topic: 'no spaces' }), InvalidNameError);
    const bad: Array<[string, unknown]> = [
      ['neither cron nor everyMs', { topic: 't' }],
      ['both', { cron: '* * * * *', everyMs: 1000, topic: 't' }],
      ['everyMs below 1000', { everyMs: 999, topic: 't' }],
      ['everyMs not an integer', { everyMs: 1000.5, topic: 't' }],
      ['everyMs a string', { everyMs: '1000', topic: 't' }],
      // Before, accepted: its next tick was an Invalid Date, and listing the schedules failed for all of them.
      ['everyMs whose next tick is past what a Date holds', { everyMs: 8.7e15, topic: 't' }],
      ['everyMs whose next tick is past what a Date holds, just', { everyMs: 8.64e15 + 1000, topic: 't' }],
      ['everyMs an integer past 2^53', { everyMs: 1e16, topic: 't' }],
      ['timezone with everyMs', { everyMs: 1000, timezone: 'UTC', topic: 't' }],
      ['cron that does not parse', { cron: '61 * * * *', topic: 't' }],
      ['cron with four fields', { cron: '* * * *', topic: 't' }],
      ['an ISO date as cron', { cron: '2030-01-01T00:00:00', topic: 't' }],
      ['cron that never matches again', { cron: '0 0 0 1 1 * 2020', topic: 't' }],
      ['cron not a string', { cron: 5, topic: 't' }],
      ['unknown time zone', { cron: '* * * * *', timezone: 'Mars/Olympus', topic: 't' }],
      ['unknown option', { everyMs: 1000, topic: 't', every: 5 }],
      ['catchUp word', { everyMs: 1000, topic: 't', catchUp: 'all' }],
      ['catchUp maxTicks 0', { everyMs: 1000, topic: 't', catchUp: { maxTicks: 0 } }],
      ['catchUp maxTicks past the cap', { everyMs: 1000, topic: 't', catchUp: { maxTicks: 10_001 } }],
      ['catchUp withinMs negative', { everyMs: 1000, topic: 't', catchUp: { withinMs: -1 } }],
      ['catchUp unknown key', { everyMs: 1000, topic: 't', catchUp: { max: 1 } }],
      ['key empty', { everyMs: 1000, topic: 't', key: '' }],
      ['header not a string', { everyMs: 1000, topic: 't', headers: { a: 1 } }],
      ['payload not bytes without a codec', { everyMs: 1000, topic: 't', payload: 'text' }],
      ['options not an object', null],
    ];
    for (const [what, opts] of bad) await assert.rejects(q.schedule('s', opts as ScheduleOptions), InvalidArgumentError, what);
    await assert.rejects(q.schedule('s', { everyMs: 1000, topic: 't', payload: new Uint8Array(2 << 20) }), PayloadTooLargeError);
    assert.deepEqual(await q.listSchedules(), []);
  });

  it('keeps the canonical time zone name, UTC by default, and reports each schedule sorted by name', async () => {
    const q = queue();
    await q.schedule('b', { cron: '0 3 * * *', timezone: 'europe/berlin', topic: 't', catchUp: { maxTicks: 5 } });
    await q.schedule('a', { cron: '@daily', topic: 't', key: 'k', headers: { h: 'v' } });
    const [a, b] = await q.listSchedules();
    assert.deepEqual([a!.name, a!.cron, a!.timezone, a!.key, a!.headers, a!.catchUp, a!.payload.byteLength], ['a', '@daily', 'UTC', 'k', { h: 'v' }, 'latest', 0]);
    assert.deepEqual([b!.name, b!.timezone, b!.catchUp], ['b', 'Europe/Berlin', { maxTicks: 5 }]);
    assert.ok(b!.nextTickAt! > b!.updatedAt);
  });

  it("encodes the payload once with the queue's codec; the handler gets it decoded; an omitted payload is empty bytes", async () => {
    const q = queue<{ job: string }>({ codec: codecs.json, fireSchedules: true });
    const got: unknown[] = [];
    await q.subscribe('t', 'g', async (d) => void got.push(d.payload), { pollIntervalMs: 20 });
    await q.schedule('s', { everyMs: 1000, topic: 't', payload: { job: 'report' } });
    assert.deepEqual(new TextDecoder().decode((await q.listSchedules())[0]!.payload), '{"job":"report"}');
    await waitFor(() => got.length >= 1, 10_000, 'a tick');
    assert.deepEqual(got[0], { job: 'report' });

    const bad = queue({ codec: { encode: () => { throw new Error('no'); }, decode: (b: Uint8Array) => b } });
    await assert.rejects(bad.schedule('s', { everyMs: 1000, topic: 't', payload: new Uint8Array(1) }), CodecError);
    assert.equal(await bad.schedule('s', { everyMs: 1000, topic: 't' }), true, 'no payload: the codec is not asked');
    assert.equal((await bad.listSchedules())[0]!.payload.byteLength, 0);
  });

  it('a store without the schedule methods: UnsupportedError from each, and no scheduler runs', async () => {
    const errors: unknown[] = [];
    const q = createStoreQueue(new InstrumentedStore(new MemoryStore()), { onError: (err) => errors.push(err) });
    queues.push(q);
    await assert.rejects(q.schedule('s', { everyMs: 1000, topic: 't' }), UnsupportedError);
    await assert.rejects(q.unschedule('s'), UnsupportedError);
    await assert.rejects(q.listSchedules(), UnsupportedError);
    assert.deepEqual(errors, []);
  });

  it('after close every schedule call rejects with ClosedError', async () => {
    const q = createStoreQueue(new MemoryStore());
    await q.close();
    await assert.rejects(q.schedule('s', { everyMs: 1000, topic: 't' }), ClosedError);
    await assert.rejects(q.unschedule('s'), ClosedError);
    await assert.rejects(q.listSchedules(), ClosedError);
  });

  it('a stored schedule this engine cannot read is reported once and passed over; the others still fire', async () => {
    const T0 = Date.parse('2026-01-05T00:00:00.000Z');
    const store = new MemoryStore();
    await store.putSchedule({ name: 'bad', revision: 'x', spec: { cron: 'not a cron', timezone: 'UTC', topic: 't', catchUp: 'none' }, payload: new Uint8Array(), updatedAt: new Date(T0) });
    const clock = new FakeClock(T0);
    const errors: string[] = [];
    const q = new StoreQueue(store, { onError: (_err, op) => errors.push(op) }, { clock });
    queues.push(q);
    const rounds = async () => {
      while (clock.pending === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    };
    await q.schedule('good', { everyMs: 1000, topic: 't' });
    await rounds();
    for (let at = T0 + 1000; at <= T0 + 3000; at += 1000) {
      clock.set(at);
      await rounds();
    }
    const ticks = (await q.listMessages('t')).messages.map((m) => m.headers?.[HEADER_SCHEDULE]);
    assert.deepEqual(ticks, ['good', 'good', 'good']);
    assert.deepEqual(errors, ['schedule bad']);
  });

  it('a schedule stored before everyMs was range checked, its next tick past what a Date holds, lists with no next tick and never fires (before: listing it threw on an Invalid Date)', async () => {
    const T0 = Date.parse('2026-01-05T00:00:00.000Z');
    const store = new MemoryStore();
    await store.putSchedule({ name: 'far', revision: 'x', spec: { everyMs: 9e15, topic: 't', catchUp: 'none' }, payload: new Uint8Array(), updatedAt: new Date(T0) });
    const clock = new FakeClock(T0);
    const errors: string[] = [];
    const q = new StoreQueue(store, { onError: (_err, op) => errors.push(op) }, { clock });
    queues.push(q);
    const [info] = await q.listSchedules();
    assert.equal(info!.name, 'far');
    assert.equal(info!.everyMs, 9e15);
    assert.equal('nextTickAt' in info!, false);
    assert.doesNotThrow(() => JSON.stringify(info));
    await q.schedule('good', { everyMs: 1000, topic: 't' });
    while (clock.pending === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    clock.set(T0 + 1000);
    while (clock.pending === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual((await q.listMessages('t')).messages.map((m) => m.headers?.[HEADER_SCHEDULE]), ['good']);
    assert.deepEqual(errors, []);
  });

  it('fireSchedules must be a boolean', () => {
    assert.throws(() => createStoreQueue(new MemoryStore(), { fireSchedules: 'yes' as unknown as boolean }), InvalidArgumentError);
  });
});
