/**
 * `subscribe` and `removeGroup` of one group called at once on one queue,
 * with fast-check's scheduler deciding when each store call returns: the
 * outcome depends only on call order. Removals called before the first
 * subscribe succeed, the ones called after it are refused, and the group is
 * registered at the end, so no subscription ever runs on a removed group.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import type { Store } from '../../src/queue/types.js';

const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 100);

/** `inner` with every call of ensureGroup, removeGroup and canConsume released by the scheduler. */
function scheduled(inner: MemoryStore, s: fc.Scheduler): Store {
  return {
    ensureGroup: s.scheduleFunction((topic: string, group: string, from: 'latest' | 'earliest') => inner.ensureGroup(topic, group, from)),
    removeGroup: s.scheduleFunction((topic: string, group: string) => inner.removeGroup(topic, group)),
    canConsume: () => s.schedule(Promise.resolve(), 'canConsume').then(() => undefined),
    append: (m) => inner.append(m),
    claim: (r) => inner.claim(r),
    ack: (c) => inner.ack(c),
    retry: (c, ms, e) => inner.retry(c, ms, e),
    kill: (c, e) => inner.kill(c, e),
    extend: (c, ms) => inner.extend(c, ms),
    release: (c) => inner.release(c),
    purge: (p, n) => inner.purge(p, n),
    stats: (t, g) => inner.stats(t, g),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}

describe('subscribe and removeGroup interleavings', () => {
  it('any scheduling of the store calls gives the call-order outcome', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(fc.constantFrom('subscribe', 'remove'), { minLength: 1, maxLength: 6 }), async (s, ops) => {
        const inner = new MemoryStore();
        await inner.ensureGroup('t', 'g', 'latest'); // registered before: a removal finds it
        const q = createStoreQueue(scheduled(inner, s), { onError: () => undefined });
        try {
          const calls = ops.map((op) => (op === 'subscribe' ? q.subscribe('t', 'g', async () => undefined, { pollIntervalMs: 50 }) : q.removeGroup('t', 'g')));
          const settled = Promise.allSettled(calls);
          await s.waitFor(settled);
          const results = await settled;
          const firstSub = ops.indexOf('subscribe');
          let removedYet = false;
          ops.forEach((op, i) => {
            const r = results[i]!;
            if (op === 'subscribe') {
              assert.equal(r.status, 'fulfilled', `call ${i}: subscribe`);
              return;
            }
            if (firstSub !== -1 && i > firstSub) {
              assert.equal(r.status, 'rejected', `call ${i}: a removal after a subscribe is refused`);
              assert.ok((r as PromiseRejectedResult).reason instanceof InvalidArgumentError);
            } else {
              // Only the first removal finds the group.
              assert.deepEqual(r, { status: 'fulfilled', value: !removedYet }, `call ${i}: removal before any subscribe`);
              removedYet = true;
            }
          });
          assert.deepEqual(await inner.listGroups(), firstSub === -1 ? [] : [{ topic: 't', group: 'g' }]);
        } finally {
          await q.close({ timeoutMs: 50 });
        }
      }),
      { numRuns: RUNS },
    );
  });
});
