/**
 * ferry/metrics with prom-client: counters and the histogram from the queue's
 * events, gauges read from `stats` at scrape time, checked by scraping the
 * registry as Prometheus would.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { InvalidArgumentError, InvalidNameError } from '../../src/errors.js';
import { prometheusMetrics } from '../../src/metrics/index.js';
import { MemoryStore, createStoreQueue, permanent } from '../../src/queue/index.js';
import { FAST, enc } from '../stores/engine-harness.js';
import { InstrumentedStore, sleep, waitFor } from '../stores/helpers.js';

/** A scrape, as `name{labels}` → value (histogram buckets included). */
async function scrape(registry: Registry): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

describe('prometheusMetrics', () => {
  it('10 published: 7 complete, 2 retry then complete, 1 dies — exact counters, histogram and gauges', async () => {
    const store = new InstrumentedStore(new MemoryStore());
    const q = createStoreQueue(store);
    const registry = new Registry();
    const metrics = await prometheusMetrics(q, { registry, groups: [{ topic: 't', group: 'g' }, { topic: 't', group: 'idle' }] });
    // 'idle' is registered but never consumes: its 10 deliveries wait.
    await (await q.subscribe('t', 'idle', async () => undefined, FAST)).close();
    await q.subscribe('t', 'g', async (d) => {
      const n = Number(new TextDecoder().decode(d.payload));
      if (n === 9) throw permanent(new Error('nine'));
      if ((n === 3 || n === 6) && d.attempt === 1) throw new Error('first try');
    }, { ...FAST, concurrency: 4, backoffBaseMs: 5, backoffMaxMs: 5 });
    const published = Date.now();
    await Promise.all(Array.from({ length: 10 }, (_, i) => q.publish({ topic: 't', payload: enc(String(i)) })));
    await waitFor(async () => {
      const s = await q.stats('t', 'g');
      return s.dead === 1 && s.pending + s.leased === 0;
    }, 5000, 'every outcome');
    await sleep(20);
    const statsCalls = store.count('stats');
    const m = await scrape(registry);
    const waited = Date.now() - published;

    assert.equal(m.get('ferry_queue_completed_total{topic="t",group="g"}'), 9);
    assert.equal(m.get('ferry_queue_retried_total{topic="t",group="g"}'), 2);
    assert.equal(m.get('ferry_queue_dead_lettered_total{topic="t",group="g",reason="permanent"}'), 1);
    assert.equal(m.has('ferry_queue_leases_lost_total{topic="t",group="g"}'), false, 'no lease was lost');
    assert.equal(m.get('ferry_queue_handler_duration_seconds_count{topic="t",group="g",outcome="completed"}'), 9);
    assert.equal(m.get('ferry_queue_handler_duration_seconds_count{topic="t",group="g",outcome="retried"}'), 2);
    assert.equal(m.get('ferry_queue_handler_duration_seconds_count{topic="t",group="g",outcome="dead_lettered"}'), 1);
    assert.equal(m.get('ferry_queue_handler_duration_seconds_bucket{le="+Inf",topic="t",group="g",outcome="completed"}'), 9);

    assert.equal(m.get('ferry_queue_pending{topic="t",group="g"}'), 0);
    assert.equal(m.get('ferry_queue_leased{topic="t",group="g"}'), 0);
    assert.equal(m.get('ferry_queue_dead{topic="t",group="g"}'), 1);
    assert.equal(m.get('ferry_queue_oldest_pending_age_seconds{topic="t",group="g"}'), 0);
    assert.equal(m.get('ferry_queue_pending{topic="t",group="idle"}'), 10);
    assert.equal(m.get('ferry_queue_dead{topic="t",group="idle"}'), 0);
    const age = m.get('ferry_queue_oldest_pending_age_seconds{topic="t",group="idle"}')!;
    assert.ok(age > 0 && age <= waited / 1000 + 0.05, `age ${age} s, ${waited} ms since publishing`);
    assert.equal(store.count('stats') - statsCalls, 2, 'one stats call per observed group per scrape, shared by the four gauges');

    metrics.close();
    assert.equal((await registry.metrics()).trim(), '', 'close removes every metric');
    await q.close();
  });

  it('concurrent scrapes under Promise.all agree, and a closed queue drops the gauges without failing the scrape', async () => {
    const q = createStoreQueue(new MemoryStore());
    const registry = new Registry();
    await (await q.subscribe('t', 'g', async () => undefined, FAST)).close();
    await q.publish({ topic: 't', payload: enc('x') }, { topic: 't', payload: enc('y') });
    await prometheusMetrics(q, { registry, groups: () => [{ topic: 't', group: 'g' }] });
    const [a, b] = await Promise.all([scrape(registry), scrape(registry)]);
    assert.equal(a.get('ferry_queue_pending{topic="t",group="g"}'), 2);
    assert.equal(b.get('ferry_queue_pending{topic="t",group="g"}'), 2);
    await q.close();
    const after = await scrape(registry);
    assert.equal(after.has('ferry_queue_pending{topic="t",group="g"}'), false);
  });

  it('a groups function that throws fails that scrape alone; an async one works', async () => {
    const q = createStoreQueue(new MemoryStore());
    await q.publish({ topic: 't', payload: enc('x') });
    let fail = true;
    const registry = new Registry();
    await prometheusMetrics(q, {
      registry,
      groups: () => {
        if (fail) throw new Error('groups boom');
        return [{ topic: 't', group: 'g' }];
      },
    });
    await assert.rejects(registry.metrics(), /groups boom/);
    fail = false;
    assert.equal((await scrape(registry)).get('ferry_queue_pending{topic="t",group="g"}'), 0);
    const other = new Registry();
    await prometheusMetrics(q, { registry: other, groups: async () => [{ topic: 't', group: 'g' }] });
    assert.equal((await scrape(other)).get('ferry_queue_leased{topic="t",group="g"}'), 0);
    await q.close();
  });

  it('refuses a missing registry and a registry that already has the names', async () => {
    const q = createStoreQueue(new MemoryStore());
    await assert.rejects(prometheusMetrics(q, {} as never), InvalidArgumentError);
    const registry = new Registry();
    await prometheusMetrics(q, { registry });
    await assert.rejects(prometheusMetrics(q, { registry }), /already has ferry_queue_pending/);
    await prometheusMetrics(q, { registry, prefix: 'other_' });
    await q.close();
  });

  it('refuses a bad prefix, bad buckets and a groups list of the wrong shape at once, and registers nothing', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      const registry = new Registry();
      const bad: Array<[Record<string, unknown>, RegExp]> = [
        [{ prefix: 'ferry-queue_' }, /prefix must start a Prometheus metric name/],
        [{ prefix: '1x_' }, /prefix/],
        [{ buckets: [1, 'x'] }, /buckets must be/],
        [{ buckets: [2, 1] }, /increasing/],
        [{ buckets: [] }, /buckets/],
        [{ groups: 'nope' }, /groups must be an array of \{ topic, group \}/],
        [{ groups: [{ topic: 't' }] }, /groups must be/],
        [{ groups: [{ topic: 't', group: 'g', extra: 1 }] }, /unknown metrics groups entry key "extra"/],
        [{ prefx: 'a_' }, /unknown prometheusMetrics option "prefx"/],
      ];
      for (const [opts, message] of bad) {
        await assert.rejects(prometheusMetrics(q, { registry, ...opts } as never), (e) => e instanceof InvalidArgumentError && message.test(e.message), JSON.stringify(opts));
      }
      // A name no queue accepts would only ever read as a pair without gauges.
      for (const groups of [[{ topic: 'orders billing', group: 'g' }], [{ topic: 't', group: '' }]]) {
        await assert.rejects(prometheusMetrics(q, { registry, groups }), (e) => e instanceof InvalidNameError && /metrics groups: (topic|group) name/.test(e.message), JSON.stringify(groups));
      }
      assert.equal((await registry.getMetricsAsJSON()).length, 0, 'nothing registered');
      assert.equal((await registry.metrics()).trim(), '', 'the scrape still works');
    } finally {
      await q.close();
    }
  });
});
