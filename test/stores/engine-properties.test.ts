/**
 * A property over the engine on every store: for any mix of keyed and unkeyed
 * messages, any number of failures per message (below maxAttempts) and any
 * concurrency, every message succeeds exactly once, a key's messages succeed
 * in publish order, and no two of one key ever run at the same time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { createStoreQueue } from '../../src/queue/engine.js';
import { QUEUE_FACTORIES } from './factories.js';
import { waitFor, counts } from './helpers.js';

const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 25);

const scenario = fc.record({
  messages: fc.array(fc.record({ key: fc.constantFrom(undefined, 'a', 'b', 'c'), failures: fc.nat({ max: 2 }) }), { minLength: 1, maxLength: 25 }),
  concurrency: fc.integer({ min: 1, max: 6 }),
  batchSize: fc.integer({ min: 1, max: 8 }),
});

for (const factory of QUEUE_FACTORIES) {
  describe(`engine properties: ${factory.name}`, { skip: factory.skip }, () => {
    it('exactly one success per message, in order and one at a time per key', async () => {
      await fc.assert(
        fc.asyncProperty(scenario, async ({ messages, concurrency, batchSize }) => {
          const h = await factory.create();
          // A broker builds its own queue; one that refuses keys gets the same messages without them.
          const q = h.openQueue ? await h.openQueue({ onError: () => undefined }) : createStoreQueue(await h.open(), { onError: () => undefined });
          const keyOf = (k: string | undefined) => (factory.unsupported?.keys !== undefined ? undefined : k);
          try {
            const successes: number[] = [];
            const failuresLeft = messages.map((m) => m.failures);
            const runningKeys = new Set<string>();
            let overlap = false;
            await q.subscribe('t', 'g', async (d) => {
              const i = Number(d.headers!.i);
              if (d.key !== undefined) {
                if (runningKeys.has(d.key)) overlap = true;
                runningKeys.add(d.key);
              }
              await new Promise((r) => setImmediate(r));
              if (d.key !== undefined) runningKeys.delete(d.key);
              if (failuresLeft[i]! > 0) {
                failuresLeft[i]!--;
                throw new Error('planned failure');
              }
              successes.push(i);
            }, { concurrency, batchSize, pollIntervalMs: 10, backoffBaseMs: 2, backoffMaxMs: 4, maxAttempts: 5 });
            await q.publish(...messages.map((m, i) => ({ topic: 't', key: keyOf(m.key), payload: new Uint8Array([i]), headers: { i: String(i) } })));
            await waitFor(async () => successes.length >= messages.length && (await q.stats('t', 'g')).leased === 0, 10_000);
            assert.equal(overlap, false, 'two messages of one key ran at once');
            assert.deepEqual([...successes].sort((x, y) => x - y), messages.map((_, i) => i), 'every message succeeded exactly once');
            for (const key of ['a', 'b', 'c']) {
              const published = messages.flatMap((m, i) => (keyOf(m.key) === key ? [i] : []));
              assert.deepEqual(successes.filter((i) => keyOf(messages[i]!.key) === key), published, `key ${key} out of order`);
            }
            assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
          } finally {
            await q.close({ timeoutMs: 100 });
            await h.cleanup();
          }
        }),
        { numRuns: RUNS },
      );
    });
  });
}
