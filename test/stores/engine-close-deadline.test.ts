/**
 * `close({ timeoutMs })` keeps its deadline when a store call hangs, on every
 * store: each of claim, extend, ack, retry, kill, release, purge, stats,
 * append and ensureGroup is made to hang in turn (it answers only when the
 * test lets it, after close), and close must resolve while it still hangs.
 * The hung calls see their signal abort.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';
import { ClosedError } from '../../src/errors.js';
import { permanent } from '../../src/queue/permanent.js';
import { enc, engineHarness, FAST } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { deferred, sleep, waitFor } from './helpers.js';
import type { InstrumentedStore } from './helpers.js';

/** A safety net meaning "hung": far longer than any close here should take. */
const HUNG_MS = 20_000;

/** Makes `op` hang on `store` from now on, until `release` is called; `entered` resolves at the first hung call. */
function hang(store: InstrumentedStore, op: 'claim' | 'extend' | 'ack' | 'retry' | 'kill' | 'release' | 'purge' | 'stats' | 'append' | 'ensureGroup' | 'ping' | 'listGroups' | 'listMessages' | 'removeGroup') {
  const gate = deferred();
  const entered = deferred();
  let calls = 0;
  store.before[op] = async () => {
    calls++;
    entered.resolve();
    await gate.promise;
  };
  return { entered: entered.promise, release: () => gate.resolve(), calls: () => calls };
}

/** Resolves with how `p` settled, or 'hung' after HUNG_MS. */
async function settles(p: Promise<unknown>): Promise<'resolved' | 'rejected' | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), HUNG_MS)));
  try {
    return await Promise.race([p.then(() => 'resolved' as const, () => 'rejected' as const), hung]);
  } finally {
    clearTimeout(timer);
  }
}

for (const factory of STORE_FACTORIES) {
  describe(`engine close deadline: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('a hung claim: subscription.close and queue.close return while it hangs', async () => {
      const { q, store } = await t.instance();
      const h = hang(store, 'claim');
      try {
        const sub = await q.subscribe('t', 'g', async () => undefined, FAST);
        assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(sub.close({ timeoutMs: 100 })), 'resolved');
        assert.equal(await settles(q.close({ timeoutMs: 100 })), 'resolved');
      } finally {
        h.release();
      }
    });

    it('a hung lease renewal: close returns while the renewal hangs, and the handler is aborted', async () => {
      const { q, store } = await t.instance();
      const h = hang(store, 'extend');
      let aborted = false;
      try {
        const sub = await q.subscribe('t', 'g', async (_d, signal) => {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          aborted = true;
        }, { ...FAST, leaseDurationMs: 300 });
        await q.publish({ topic: 't', payload: enc('x') });
        assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(sub.close({ timeoutMs: 100 })), 'resolved');
        assert.equal(aborted, true);
        assert.equal(await settles(q.close({ timeoutMs: 100 })), 'resolved');
      } finally {
        h.release();
      }
    });

    for (const op of ['ack', 'retry', 'kill'] as const) {
      it(`a hung ${op}: close returns while the outcome's write hangs`, async () => {
        const { q, store } = await t.instance();
        const h = hang(store, op);
        try {
          const sub = await q.subscribe('t', 'g', async () => {
            if (op === 'retry') throw new Error('fails');
            if (op === 'kill') throw permanent(new Error('fails for good'));
          }, FAST);
          await q.publish({ topic: 't', payload: enc('x') });
          assert.equal(await settles(h.entered), 'resolved');
          assert.equal(await settles(sub.close({ timeoutMs: 100 })), 'resolved');
          assert.equal(await settles(q.close({ timeoutMs: 100 })), 'resolved');
        } finally {
          h.release();
        }
      });
    }

    it('a hung release of prefetched deliveries: close returns while it hangs', async () => {
      const { q, store } = await t.instance();
      const h = hang(store, 'release');
      const running = deferred();
      try {
        const sub = await q.subscribe('t', 'g', async (_d, signal) => {
          running.resolve();
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        }, { ...FAST, concurrency: 1, prefetch: 4, startFrom: 'earliest' });
        await q.publish(...Array.from({ length: 5 }, () => ({ topic: 't', payload: enc('x') })));
        await running.promise;
        await waitFor(() => store.count('claim') >= 1);
        const closing = sub.close({ timeoutMs: 100 });
        assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(closing), 'resolved');
      } finally {
        h.release();
      }
    });

    it('a hung janitor purge: queue.close returns while it hangs', async () => {
      const { q, store } = await t.instance({ janitorIntervalMs: 20 });
      const h = hang(store, 'purge');
      try {
        assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(q.close({ timeoutMs: 100 })), 'resolved');
      } finally {
        h.release();
      }
    });

    it('hung stats, publish and subscribe: queue.close returns, and each of them rejects with ClosedError', async () => {
      const { q, store } = await t.instance();
      const hs = [hang(store, 'stats'), hang(store, 'append'), hang(store, 'ensureGroup')];
      try {
        // Handled from the start: a call may reject as soon as close begins, before close resolves.
        const outcomes = [q.stats('t', 'g'), q.publish({ topic: 't', payload: enc('x') }), q.subscribe('t', 'g', async () => undefined, FAST)].map((p) =>
          p.then(() => 'resolved', (e: unknown) => e),
        );
        for (const h of hs) assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(q.close({ timeoutMs: 100 })), 'resolved');
        for (const o of await Promise.all(outcomes)) assert.ok(o instanceof ClosedError, `a ClosedError, got ${String(o)}`);
      } finally {
        for (const h of hs) h.release();
      }
    });

    it('close without timeoutMs gives a hung publish the longest subscription lease, not the 30 s default lease', async () => {
      const { q, store } = await t.instance();
      const sub = await q.subscribe('t', 'g', async () => undefined, FAST); // a 2 s lease
      const h = hang(store, 'append');
      try {
        const publish = q.publish({ topic: 't', payload: enc('x') });
        assert.equal(await settles(h.entered), 'resolved');
        // HUNG_MS (20 s) is below the default lease: under that bound, close
        // would count as hung here.
        assert.equal(await settles(q.close()), 'resolved');
        await assert.rejects(publish, ClosedError);
        assert.equal(await settles(sub.close()), 'resolved');
      } finally {
        h.release();
      }
    });

    it('a second close with an earlier deadline brings the first one\'s forward, for the subscription and the queue', async () => {
      const { q, store } = await t.instance();
      const h = hang(store, 'ack');
      try {
        const sub = await q.subscribe('t', 'g', async () => undefined, { ...FAST, leaseDurationMs: HUNG_MS * 10 });
        await q.publish({ topic: 't', payload: enc('x') });
        assert.equal(await settles(h.entered), 'resolved');
        const first = sub.close(); // its own deadline: the lease, far beyond the safety net
        const second = q.close({ timeoutMs: 100 });
        assert.equal(await settles(second), 'resolved');
        assert.equal(await settles(first), 'resolved');
      } finally {
        h.release();
      }
    });

    it('a store call of stats, ping or a listing still waiting when close ends early rejects with ClosedError', async () => {
      const { q, store } = await t.instance();
      const hs = [hang(store, 'stats'), hang(store, 'ping'), hang(store, 'listGroups'), hang(store, 'listMessages'), hang(store, 'removeGroup')];
      try {
        const calls = [q.stats('t', 'g'), q.ping(), q.listGroups(), q.listMessages('t'), q.removeGroup('t', 'g')];
        for (const h of hs) assert.equal(await settles(h.entered), 'resolved');
        assert.equal(await settles(q.close({ timeoutMs: HUNG_MS * 10 })), 'resolved'); // nothing else to wait for: close ends at once
        for (const p of calls) {
          assert.equal(await settles(p), 'rejected');
          await assert.rejects(p, ClosedError);
        }
      } finally {
        for (const h of hs) h.release();
      }
    });

    it('close with an aborted signal cuts the wait short as a deadline does', async () => {
      const { q, store } = await t.instance();
      const h = hang(store, 'claim');
      try {
        const sub = await q.subscribe('t', 'g', async () => undefined, FAST);
        assert.equal(await settles(h.entered), 'resolved');
        const ctl = new AbortController();
        const closing = sub.close({ signal: ctl.signal, timeoutMs: HUNG_MS * 10 });
        await sleep(20);
        ctl.abort();
        assert.equal(await settles(closing), 'resolved');
      } finally {
        h.release();
      }
    });

    it('one signal passed to many closes at once (a whole shutdown) adds no listener per close: no leak warning', async () => {
      const { q } = await t.instance();
      const subs = await Promise.all(Array.from({ length: 12 }, (_, i) => q.subscribe(`t${i}`, 'g', async () => undefined, FAST)));
      const shutdown = new AbortController();
      const warnings: Error[] = [];
      const onWarning = (w: Error) => void warnings.push(w);
      process.on('warning', onWarning);
      try {
        await Promise.all([...subs.map((s) => s.close({ signal: shutdown.signal, timeoutMs: HUNG_MS })), q.close({ signal: shutdown.signal, timeoutMs: HUNG_MS })]);
        await sleep(50); // warnings are emitted on a later tick
      } finally {
        process.off('warning', onWarning);
      }
      // 13 listeners at once passed Node's limit of 10 before.
      assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning'), []);
      assert.ok(getEventListeners(shutdown.signal, 'abort').length <= 1, 'at most the one shared listener stays');
    });
  });
}
