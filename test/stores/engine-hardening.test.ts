/**
 * Inputs a handler or codec can hand the engine that once broke a store or
 * the loop: error text with NUL (Postgres text cannot hold it), and a codec
 * whose decode returns a promise. On every store.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HEADER_DLQ_ERROR } from '../../src/queue/dead-letter.js';
import { permanent } from '../../src/queue/permanent.js';
import type { Delivery } from '../../src/queue/types.js';
import { enc, engineHarness, FAST } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { waitFor } from './helpers.js';

for (const factory of STORE_FACTORIES) {
  describe(`engine hardening: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('an error text with NUL is recorded (as U+FFFD) on retry and on the dead letter, without a store error', async () => {
      const { q } = await t.instance();
      const copies: Delivery[] = [];
      await q.subscribe('dlq', 'read', async (d) => void copies.push(d), FAST);
      let runs = 0;
      await q.subscribe('t', 'g', async () => {
        runs++;
        if (runs === 1) throw new Error('first\0try');
        throw permanent(new Error('bad\0err'));
      }, { ...FAST, deadLetterTopic: 'dlq', maxAttempts: 5 });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => copies.length === 1);
      assert.equal(runs, 2, 'a retry, then the permanent failure: no lease ran out in between');
      assert.equal(copies[0]!.headers?.[HEADER_DLQ_ERROR], 'bad\uFFFDerr');
      assert.deepEqual(t.errors.filter((e) => e.op !== 'claim'), []);
    });

    it('a subscribe racing close completes as if it ran first and close closes it; one called after close registers nothing', async () => {
      const { q } = await t.instance();
      let ran = 0;
      const sub = q.subscribe('t', 'raced', async () => void ran++, FAST);
      const closed = q.close();
      const [s] = await Promise.all([sub, closed]);
      assert.ok(s, 'the subscribe resolved');
      await s.close(); // idempotent: close already closed it
      await assert.rejects(q.subscribe('t', 'late', async () => undefined, FAST), { code: 'ERR_CLOSED' });
      const other = await t.instance();
      assert.deepEqual(await other.q.listGroups('t'), [{ topic: 't', group: 'raced' }]);
      await other.q.publish({ topic: 't', payload: enc('x') });
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(ran, 0, 'the closed subscription runs nothing');
      assert.equal((await other.q.stats('t', 'raced')).pending, 1);
    });

    it('a decode that returns a promise dead-letters the delivery (reason decode) and the loop goes on', async () => {
      const died: string[] = [];
      const { q } = await t.instance();
      q.on('deadLettered', (e) => void died.push(`${e.messageId}:${e.reason}`));
      const seen: string[] = [];
      const codec = { encode: (v: string) => enc(v), decode: (b: Uint8Array) => (b[0] === 0x21 ? (Promise.reject(new Error('async')) as never) : new TextDecoder().decode(b)) };
      await q.subscribe('t', 'g', async (d) => void seen.push(d.payload as string), { ...FAST, codec });
      await q.publish({ id: 'bad', topic: 't', payload: enc('!') }, { id: 'good', topic: 't', payload: enc('ok') });
      await waitFor(() => died.length === 1 && seen.length === 1);
      assert.deepEqual(died, ['bad:decode']);
      assert.deepEqual(seen, ['ok']);
    });
  });
}
