/**
 * Group commit of publishes, on every store: concurrent publishes share one
 * append, each still resolves only once stored, one the store refuses
 * fails alone, and a transient error retries the shared append whole.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { PUBLISH_RETRIES } from '../../src/queue/engine.js';
import { MAX_FLUSH_MESSAGES } from '../../src/queue/publish-batcher.js';
import type { StoredMessage } from '../../src/queue/types.js';
import { engineHarness, enc } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { claimReq, deferred, waitFor } from './helpers.js';

for (const factory of STORE_FACTORIES) {
  describe(`engine group commit: ${factory.name}`, { skip: factory.skip }, () => {
    const e = engineHarness(factory);

    /** Every message ID stored for `group` on `topic`, read by claiming them on a fresh handle. */
    async function storedIds(topic: string, group: string): Promise<string[]> {
      const s = await e.h.open();
      return (await s.claim(claimReq(topic, group, { max: 10_000 }))).map((c) => c.message.id).sort();
    }

    it('64 concurrent single publishes are stored by one append, each resolving with its ID', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      const ids = await Promise.all(Array.from({ length: 64 }, (_, i) => q.publish({ topic: 't', payload: enc(`m${i}`) })));
      assert.equal(store.count('append'), 1);
      const flat = ids.map((r) => r[0]!);
      assert.equal(new Set(flat).size, 64);
      assert.deepEqual(await storedIds('t', 'g'), [...flat].sort());
    });

    it('publishes arriving while a shared append runs go together into the next one', async () => {
      // A slow append: the store's synchronous appendNow (SQLite) is hidden.
      const { q, store } = await e.instance({}, ['appendNow']);
      await store.ensureGroup('t', 'g', 'latest');
      const gate = deferred();
      const sizes: number[] = [];
      store.before.append = async (msgs: StoredMessage[]) => {
        sizes.push(msgs.length);
        if (sizes.length === 1) await gate.promise;
      };
      const first = q.publish({ topic: 't', payload: enc('first') });
      await waitFor(() => sizes.length === 1, 2000, 'the first append');
      const later = Array.from({ length: 10 }, (_, i) => q.publish({ topic: 't', payload: enc(`later${i}`) }, { topic: 't', payload: enc(`x${i}`) }));
      await new Promise((r) => setTimeout(r, 30));
      assert.deepEqual(sizes, [1], 'nothing else starts while the first append runs');
      gate.resolve();
      await Promise.all([first, ...later]);
      assert.deepEqual(sizes, [1, 20]);
      assert.equal((await storedIds('t', 'g')).length, 21);
    });

    it('a publish the store refuses fails alone; the others of its group are stored', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      store.before.append = (msgs: StoredMessage[]) => {
        if (msgs.some((m) => m.id === 'bad')) throw new InvalidArgumentError('refused by the store');
      };
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => q.publish({ id: i === 3 ? 'bad' : `ok${i}`, topic: 't', payload: enc(`m${i}`) })),
      );
      assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
      assert.ok((results[3] as PromiseRejectedResult).reason instanceof InvalidArgumentError);
      // One shared try, then each publish on its own.
      assert.equal(store.count('append'), 1 + 8);
      assert.deepEqual(await storedIds('t', 'g'), ['ok0', 'ok1', 'ok2', 'ok4', 'ok5', 'ok6', 'ok7']);
    });

    it('a shared append that meets a transient error is retried whole: once per retry, not once per publish', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      let busy = 2;
      store.before.append = () => {
        if (busy-- > 0) throw new Error('database is busy');
      };
      const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => q.publish({ id: `r${i}`, topic: 't', payload: enc('x') })));
      assert.deepEqual(ids.flat(), Array.from({ length: 8 }, (_, i) => `r${i}`));
      assert.equal(store.count('append'), 3, 'the shared try and two retries of the whole batch');
      assert.equal((await storedIds('t', 'g')).length, 8);
    });

    it('a transient error that outlasts the retries fails every publish of the batch with it', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      store.before.append = () => {
        throw new Error('database is busy');
      };
      const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => q.publish({ id: `f${i}`, topic: 't', payload: enc('x') })));
      for (const r of results) assert.ok(r.status === 'rejected' && /database is busy/.test(String(r.reason)));
      assert.equal(store.count('append'), 1 + PUBLISH_RETRIES);
      assert.deepEqual(await storedIds('t', 'g'), []);
    });

    it('one ID published twice in one group is stored once, and both publishes resolve with it', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      const [a, b, c] = await Promise.all([
        q.publish({ id: 'dup', topic: 't', payload: enc('one') }),
        q.publish({ id: 'dup', topic: 't', payload: enc('two') }),
        q.publish({ id: 'other', topic: 't', payload: enc('three') }, { id: 'dup', topic: 't', payload: enc('four') }),
      ]);
      assert.deepEqual([a, b, c], [['dup'], ['dup'], ['other', 'dup']]);
      assert.equal(store.count('append'), 1);
      const s = await e.h.open();
      const got = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(got.map((d) => [d.message.id, new TextDecoder().decode(d.message.payload)]), [['dup', 'one'], ['other', 'three']]);
    });

    it(`a flush carries whole publishes up to ${MAX_FLUSH_MESSAGES} messages; a larger single publish goes whole`, async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      const sizes: number[] = [];
      store.before.append = (msgs: StoredMessage[]) => void sizes.push(msgs.length);
      const batch = (n: number) => Array.from({ length: n }, () => ({ topic: 't', payload: enc('x') }));
      await Promise.all([q.publish(...batch(600)), q.publish(...batch(600)), q.publish(...batch(1200)), q.publish(...batch(1))]);
      assert.deepEqual(sizes, [600, 600, 1200, 1]);
      assert.equal((await storedIds('t', 'g')).length, 2401);
    });

    it('close stores the publishes it was called after and those made before its subscriptions closed; later ones fail with ClosedError', async () => {
      const { q, store } = await e.instance();
      await store.ensureGroup('t', 'g', 'latest');
      const pending = Array.from({ length: 20 }, (_, i) => q.publish({ id: `c${i}`, topic: 't', payload: enc('x') }));
      const closing = q.close();
      // Taken: close has not closed its subscriptions yet (a running handler's publish lands here).
      const during = q.publish({ id: 'during', topic: 't', payload: enc('x') });
      await Promise.all([closing, during, ...pending]);
      await assert.rejects(q.publish({ topic: 't', payload: enc('late') }), { code: 'ERR_CLOSED' });
      assert.equal((await storedIds('t', 'g')).length, 21);
    });

    it('concurrent publishes with a running subscription: every message is handled once', async () => {
      const { q } = await e.instance();
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), { pollIntervalMs: 20, concurrency: 4 });
      const ids = (await Promise.all(Array.from({ length: 64 }, () => q.publish({ topic: 't', payload: enc('x') })))).flat();
      await waitFor(() => seen.length >= 64, 5000, 'all handled');
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual([...seen].sort(), [...ids].sort());
    });
  });
}
