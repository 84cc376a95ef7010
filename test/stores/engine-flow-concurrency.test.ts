/**
 * `pauseGroup` and `resumeGroup` run at once (`Promise.all`) with each
 * other, `subscribe`, `close`, `removeGroup` and `publish`, on one queue and
 * on two instances, on every store that keeps pause state (flow-stores.ts):
 * whatever order the calls land in, what they resolve with agrees with what
 * the store then does (a group reported paused claims nothing until resumed,
 * a running one delivers), and nothing is lost or delivered twice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClosedError } from '../../src/errors.js';
import type { StoreQueue } from '../../src/queue/engine.js';
import type { Message } from '../../src/queue/types.js';
import { enc, engineHarness, FAST, polls } from './engine-harness.js';
import { FLOW_FACTORIES } from './flow-stores.js';
import { HOUR_POLL, type InstrumentedStore, waitFor } from './helpers.js';

const m = (id: string): Message => ({ id, topic: 't', payload: enc(id) });

/** Settles to the value, or to the error's name. */
const outcome = <T>(p: Promise<T>): Promise<T | string> => p.catch((err: Error) => err.name);

for (const { factory, pause } of FLOW_FACTORIES) {
  describe(`engine pause and resume at once: ${factory.name}`, { skip: pause }, () => {
    const t = engineHarness(factory);

    /**
     * Checks that the group is in the state `stats` reports: publishes `id`
     * through `q`; when paused, polls pass on `store` without it being
     * delivered, then the group is resumed. Either way `id` is then handled
     * exactly once (`seen` is the group's handler log).
     */
    async function holdsItsState(q: StoreQueue, store: InstrumentedStore, seen: string[], id: string): Promise<boolean> {
      const paused = (await q.stats('t', 'g')).paused;
      await q.publish(m(id));
      if (paused) {
        await polls(store);
        assert.ok(!seen.includes(id), `${id} delivered while the group was reported paused`);
        assert.equal(await q.resumeGroup('t', 'g'), true);
      }
      await waitFor(() => seen.includes(id), 5000, id);
      assert.equal(seen.filter((s) => s === id).length, 1);
      return paused;
    }

    it('pauseGroup ∥ resumeGroup: both resolve true; on one queue the later call wins; across instances the group is in the state stats reports', async () => {
      const a = await t.instance();
      const b = await t.instance();
      const seen: string[] = [];
      for (const x of [a, b]) await x.q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
      assert.deepEqual(await Promise.all([a.q.pauseGroup('t', 'g'), a.q.resumeGroup('t', 'g')]), [true, true]);
      assert.equal(await holdsItsState(a.q, a.store, seen, 'one-resumed'), false);
      assert.deepEqual(await Promise.all([a.q.resumeGroup('t', 'g'), a.q.pauseGroup('t', 'g')]), [true, true]);
      assert.equal(await holdsItsState(a.q, a.store, seen, 'one-paused'), true);
      for (let i = 0; i < 4; i++) {
        const [x, y] = i % 2 === 0 ? [a, b] : [b, a];
        assert.deepEqual(await Promise.all([x.q.pauseGroup('t', 'g'), y.q.resumeGroup('t', 'g')]), [true, true]);
        await holdsItsState(a.q, a.store, seen, `two-${i}`);
      }
    });

    it('pauseGroup ∥ pauseGroup on two instances: both true, the group paused', async () => {
      const a = await t.instance();
      const b = await t.instance();
      const seen: string[] = [];
      await a.q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
      assert.deepEqual(await Promise.all([a.q.pauseGroup('t', 'g'), b.q.pauseGroup('t', 'g')]), [true, true]);
      assert.equal(await holdsItsState(b.q, a.store, seen, 'x'), true);
    });

    it('pauseGroup ∥ subscribe of a new group: on one queue in call order; across instances paused (true) or never registered (false), and the subscription agrees', async () => {
      const other = await t.instance();
      for (let i = 0; i < 4; i++) {
        const { q, store } = await t.instance();
        const seen: string[] = [];
        const subscribing = q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
        const pausing = i < 2 ? q.pauseGroup('t', 'g') : other.q.pauseGroup('t', 'g');
        const [sub, paused] = await Promise.all([subscribing, pausing]);
        if (i < 2) assert.equal(paused, true, 'called after subscribe on the same queue: the group is registered');
        assert.equal((await q.stats('t', 'g')).paused, paused);
        assert.equal(await holdsItsState(q, store, seen, `m${i}`), paused);
        await sub.close();
        assert.equal(await q.removeGroup('t', 'g'), true);
        // The other order on one queue: pause finds no group.
        const [early] = await Promise.all([q.pauseGroup('t', 'g'), q.subscribe('t', 'g', async () => undefined, FAST).then((s) => s.close())]);
        assert.equal(early, false);
        assert.equal(await q.removeGroup('t', 'g'), true);
      }
    });

    it('resumeGroup ∥ subscribe of a paused group: the subscription gets the backlog without waiting for a poll', async () => {
      const { q } = await t.instance();
      await (await q.subscribe('t', 'g', async () => undefined, FAST)).close(); // registers the group
      assert.equal(await q.pauseGroup('t', 'g'), true);
      await q.publish(m('waiting'));
      const seen: string[] = [];
      const [resumed] = await Promise.all([q.resumeGroup('t', 'g'), q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, pollIntervalMs: HOUR_POLL })]);
      assert.equal(resumed, true);
      await waitFor(() => seen.length === 1, 5000, 'the backlog');
      assert.deepEqual(seen, ['waiting']);
    });

    it('pauseGroup ∥ close and resumeGroup ∥ close: each resolves true or rejects with ClosedError; what resolved is stored', async () => {
      const other = await t.instance();
      for (const paused of [true, false]) {
        const { q } = await t.instance();
        await q.subscribe('t', 'g', async () => undefined, FAST);
        const call = paused ? q.pauseGroup('t', 'g') : q.resumeGroup('t', 'g');
        const [result] = await Promise.all([outcome(call), q.close()]);
        assert.ok(result === true || result === 'ClosedError', String(result));
        if (result === true) assert.equal((await other.q.stats('t', 'g')).paused, paused);
        await assert.rejects(q.pauseGroup('t', 'g'), ClosedError);
        await assert.rejects(q.resumeGroup('t', 'g'), ClosedError);
      }
    });

    it('pauseGroup ∥ removeGroup: on one queue in call order; across instances the group is gone either way, and registered again it runs', async () => {
      const { q } = await t.instance();
      const other = await t.instance();
      const register = async () => (await q.subscribe('t', 'g', async () => undefined, FAST)).close();
      await register();
      assert.deepEqual(await Promise.all([q.pauseGroup('t', 'g'), q.removeGroup('t', 'g')]), [true, true]);
      await register();
      assert.deepEqual(await Promise.all([q.removeGroup('t', 'g'), q.pauseGroup('t', 'g')]), [true, false]);
      for (let i = 0; i < 4; i++) {
        await register();
        const [removed, paused] = await Promise.all([q.removeGroup('t', 'g'), other.q.pauseGroup('t', 'g')]);
        assert.equal(removed, true);
        assert.equal(typeof paused, 'boolean');
        assert.deepEqual(await q.listGroups('t'), []);
        assert.equal(await q.pauseGroup('t', 'g'), false, 'no such group any more');
        const seen: string[] = [];
        const sub = await other.q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
        assert.equal((await other.q.stats('t', 'g')).paused, false, 'registered anew: not paused');
        await other.q.publish(m(`m${i}`));
        await waitFor(() => seen.length === 1);
        await sub.close();
        await q.removeGroup('t', 'g');
      }
    });

    it('resumeGroup ∥ publish: every message published is delivered once, without waiting for a poll', async () => {
      const { q } = await t.instance();
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, pollIntervalMs: HOUR_POLL });
      for (let i = 0; i < 4; i++) {
        assert.equal(await q.pauseGroup('t', 'g'), true);
        const [resumed] = await Promise.all([q.resumeGroup('t', 'g'), q.publish(m(`a${i}`)), q.publish(m(`b${i}`))]);
        assert.equal(resumed, true);
        await waitFor(() => seen.length === 2 * (i + 1), 5000, `round ${i}`);
      }
      assert.equal(new Set(seen).size, 8, 'no message twice');
    });

    it('pauseGroup ∥ publish: the message is stored, and delivered once after resume at the latest', async () => {
      const { q, store } = await t.instance();
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
      for (let i = 0; i < 4; i++) {
        const [paused] = await Promise.all([q.pauseGroup('t', 'g'), q.publish(m(`p${i}`))]);
        assert.equal(paused, true);
        await polls(store);
        assert.equal(await q.resumeGroup('t', 'g'), true);
        await waitFor(() => seen.includes(`p${i}`), 5000, `p${i}`);
      }
      assert.deepEqual(seen, ['p0', 'p1', 'p2', 'p3']);
    });
  });
}
