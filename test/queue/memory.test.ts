/** Memory-store specifics: its wake source across handles, and its injectable clock. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createStoreQueue } from '../../src/queue/engine.js';
import { MemoryBacking, MemoryStore } from '../../src/queue/stores/memory.js';
import { HOUR_POLL, orHang } from '../stores/helpers.js';

describe('memory store', () => {
  it('wakes subscribers on other handles of the same backing (listen)', async () => {
    const backing = new MemoryBacking();
    const producer = createStoreQueue(new MemoryStore({ backing }));
    const consumer = createStoreQueue(new MemoryStore({ backing }));
    try {
      let resolveGot!: (id: string) => void;
      const got = new Promise<string>((r) => (resolveGot = r));
      await consumer.subscribe('t', 'g', async (d) => resolveGot(d.id), { pollIntervalMs: HOUR_POLL });
      await new Promise((r) => setTimeout(r, 50)); // the first poll found nothing
      const [id] = await producer.publish({ topic: 't', payload: new Uint8Array([1]) });
      // The poll is hourly: a delivery before the hang deadline came from the wake-up.
      assert.equal(await orHang(got, 'the woken delivery'), id, 'the consumer handle got the message published through the producer handle');
    } finally {
      await producer.close();
      await consumer.close();
    }
  });

  it('keeps leases, backoffs and schedules on its own clock', async () => {
    let now = 1_000_000;
    const store = new MemoryStore({ backing: new MemoryBacking({ now: () => now }) });
    await store.ensureGroup('t', 'g', 'latest');
    await store.append([{ id: 'a', topic: 't', payload: new Uint8Array(0), publishedAt: new Date(now), deliverAt: new Date(now + 500) }]);
    const req = { topic: 't', group: 'g', runnerId: 'r', max: 10, leaseMs: 1000, maxInFlight: 0 };
    assert.deepEqual(await store.claim(req), []);
    now += 500;
    const [c] = await store.claim(req);
    assert.equal(c!.attempt, 1);
    now += 999;
    assert.deepEqual(await store.claim(req), []);
    now += 1;
    const [c2] = await store.claim(req);
    assert.equal(c2!.attempt, 2);
    assert.equal(await store.retry(c2!, 250, 'x'), true);
    now += 249;
    assert.deepEqual(await store.claim(req), []);
    now += 1;
    assert.equal((await store.claim(req))[0]!.attempt, 3);
    await store[Symbol.asyncDispose]();
    await assert.rejects(store.ping(), /closed/);
  });
});
