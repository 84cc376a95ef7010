/**
 * The SQLite store's `ackAndClaim` (acks and the next claim in one
 * transaction), and the engine's use of it: an ack refused inside the
 * combined call is still reported per delivery, a failed claim leaves its
 * acks unwritten, concurrent callers never share a delivery, and a key lane
 * runs in order with one store call per message.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { createStoreQueue } from '../../src/queue/index.js';
import type { AckAndClaimed, Claimed, ClaimRequest, KillOptions, PurgePolicy, StartFrom, Store, StoredMessage } from '../../src/queue/index.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { claimReq, counts, ids, msg, waitFor } from '../stores/helpers.js';

describe('sqlite ackAndClaim', () => {
  let dir: string;
  const opened: Array<{ close(): Promise<void> }> = [];
  const open = async (name = 'q.db') => {
    const s = await SqliteStore.open({ path: join(dir, name) });
    opened.push(s);
    return s;
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-ack-claim-'));
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('acks first, so the claim in the same call takes the next message of the lane the ack freed', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    const m = [msg('t', { key: 'k' }), msg('t', { key: 'k' }), msg('t', { key: 'k' })];
    await s.append(m);
    const [first] = await s.claim(claimReq('t', 'g'));
    assert.deepEqual(ids([first!]), [m[0]!.id]); // the lane holds the rest back
    const r = await s.ackAndClaim([first!], claimReq('t', 'g'));
    assert.deepEqual(r.acked, [first!.deliveryId]);
    assert.deepEqual(ids(r.claimed), [m[1]!.id]);
    const r2 = await s.ackAndClaim(r.claimed, claimReq('t', 'g'));
    assert.deepEqual(ids(r2.claimed), [m[2]!.id]);
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
  });

  it('reports an ack that is no longer held as not acked, and acks and claims the rest', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t'), msg('t')]);
    const [a, b] = await s.claim(claimReq('t', 'g', { max: 2 }));
    await s.release([b!]); // b's token is stale now
    const r = await s.ackAndClaim([a!, b!], claimReq('t', 'g'));
    assert.deepEqual(r.acked, [a!.deliveryId]);
    // b came back and is claimed again with the third message, under new tokens.
    assert.equal(r.claimed.length, 2);
    assert.equal(r.claimed[0]!.deliveryId, b!.deliveryId);
    assert.notEqual(r.claimed[0]!.claimToken, b!.claimToken);
  });

  it('honours maxInFlight after the acks: the leases they end make room in the same call', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t'), msg('t')]);
    const held = await s.claim(claimReq('t', 'g', { max: 2, maxInFlight: 2 }));
    assert.equal(held.length, 2);
    assert.equal((await s.claim(claimReq('t', 'g', { maxInFlight: 2 }))).length, 0);
    const r = await s.ackAndClaim([held[0]!], claimReq('t', 'g', { maxInFlight: 2 }));
    assert.equal(r.claimed.length, 1);
  });

  it('is atomic: when the claim part fails, the acks are not written either', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t')]);
    const [a] = await s.claim(claimReq('t', 'g', { max: 1 }));
    // A runner ID SQLite cannot bind makes the lease of the second message throw inside the transaction.
    const bad = claimReq('t', 'g', { runnerId: { not: 'bindable' } as unknown as string });
    await assert.rejects(s.ackAndClaim([a!], bad));
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 0 });
    assert.deepEqual(await s.ack([a!]), [a!.deliveryId]); // still held: the failed call wrote nothing
  });

  it('concurrent callers on two handles of one file ack each delivery once and never share a claim', async () => {
    const s1 = await open();
    const s2 = await open();
    await s1.ensureGroup('t', 'g', 'latest');
    const keys = ['a', 'b', 'c', 'd'];
    const published = Array.from({ length: 80 }, (_, i) => msg('t', { key: keys[i % keys.length]! }));
    await s1.append(published);
    const order = new Map<string, string[]>(); // key -> message IDs in the order their claims were made
    let acked = 0;
    const worker = async (s: SqliteStore) => {
      let holding: Claimed[] = await s.claim(claimReq('t', 'g', { max: 2 }));
      for (let idle = 0; idle < 50; ) {
        for (const c of holding) order.set(c.message.key!, [...(order.get(c.message.key!) ?? []), c.message.id]);
        const r = await s.ackAndClaim(holding, claimReq('t', 'g', { max: 2 }));
        acked += r.acked.length;
        assert.equal(r.acked.length, holding.length); // nobody else holds these
        holding = r.claimed;
        if (holding.length === 0) {
          idle++;
          await new Promise<void>((resolve) => setImmediate(resolve));
        } else idle = 0;
      }
    };
    await Promise.all([worker(s1), worker(s2), worker(s1), worker(s2)]);
    assert.equal(acked, published.length);
    for (const k of keys) assert.deepEqual(order.get(k), published.filter((m) => m.key === k).map((m) => m.id));
    assert.deepEqual(counts(await s1.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  describe('through the engine', () => {
    /** The SQLite store, counting calls; `beforeAckAndClaim` may act on the store first. */
    class Spy implements Store {
      calls = { claim: 0, ack: 0, ackAndClaim: 0 };
      beforeAckAndClaim?: (acks: Claimed[]) => Promise<void>;
      constructor(readonly s: SqliteStore) {}
      ensureGroup(topic: string, group: string, from: StartFrom) {
        return this.s.ensureGroup(topic, group, from);
      }
      append(msgs: StoredMessage[]) {
        return this.s.append(msgs);
      }
      claim(req: ClaimRequest) {
        this.calls.claim++;
        return this.s.claim(req);
      }
      ack(cs: Claimed[]) {
        this.calls.ack++;
        return this.s.ack(cs);
      }
      async ackAndClaim(acks: Claimed[], req: ClaimRequest): Promise<AckAndClaimed> {
        this.calls.ackAndClaim++;
        await this.beforeAckAndClaim?.(acks);
        return this.s.ackAndClaim(acks, req);
      }
      retry(c: Claimed, backoffMs: number, lastError: string) {
        return this.s.retry(c, backoffMs, lastError);
      }
      kill(c: Claimed, lastError: string, opts?: KillOptions) {
        return this.s.kill(c, lastError, opts);
      }
      extend(cs: Claimed[], leaseMs: number) {
        return this.s.extend(cs, leaseMs);
      }
      release(cs: Claimed[]) {
        return this.s.release(cs);
      }
      purge(policy: PurgePolicy, batch: number) {
        return this.s.purge(policy, batch);
      }
      stats(topic: string, group: string) {
        return this.s.stats(topic, group);
      }
      ping() {
        return this.s.ping();
      }
      close = () => this.s.close();
    }

    it('runs one key lane in order, writing each ack with the next claim', async () => {
      const spy = new Spy(await open());
      const q = createStoreQueue(spy, { onError: () => {} });
      opened.push(q);
      await spy.ensureGroup('t', 'g', 'latest');
      const n = 40;
      const sent = await q.publish(...Array.from({ length: n }, (_, i) => ({ topic: 't', key: 'k', payload: new TextEncoder().encode(String(i)) })));
      const seen: string[] = [];
      const completed: string[] = [];
      q.on('completed', (e) => completed.push(e.messageId));
      const sub = await q.subscribe('t', 'g', async (d) => {
        seen.push(d.id);
      }, { concurrency: 4, pollIntervalMs: 3_600_000 });
      try {
        await waitFor(() => completed.length === n, 120_000, 'every message completed');
      } finally {
        await sub.close();
      }
      assert.deepEqual(seen, sent);
      assert.deepEqual(completed, sent);
      // Each message but the last one's ack went in with a claim; the last, its claim finding nothing, maybe too.
      assert.ok(spy.calls.ackAndClaim >= n - 1, `ackAndClaim calls ${spy.calls.ackAndClaim}`);
      assert.ok(spy.calls.ack <= 1, `plain ack calls ${spy.calls.ack}`);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('two subscriptions at once, one lane each: every ack goes in with its lane\'s next claim, whichever of a turn\'s callbacks runs first', async () => {
      const spy = new Spy(await open());
      const q = createStoreQueue(spy, { onError: () => {} });
      opened.push(q);
      const groups = ['g1', 'g2'];
      for (const g of groups) await spy.ensureGroup('t', g, 'latest');
      const n = 30;
      const sent = await q.publish(...Array.from({ length: n }, (_, i) => ({ topic: 't', key: 'k', payload: new TextEncoder().encode(String(i)) })));
      const seen = new Map(groups.map((g) => [g, [] as string[]]));
      let completed = 0;
      q.on('completed', () => void completed++);
      // Concurrency 1: each claim comes back full, so the loop's next claim is due in the next turn as the ack is written.
      const subs = await Promise.all(groups.map((g) => q.subscribe('t', g, async (d) => void seen.get(d.group)!.push(d.id), { concurrency: 1, pollIntervalMs: 3_600_000 })));
      try {
        await waitFor(() => completed === 2 * n, 120_000, 'every message completed in both groups');
      } finally {
        await Promise.all(subs.map((sub) => sub.close()));
      }
      for (const g of groups) assert.deepEqual(seen.get(g), sent, `${g} in publish order`);
      assert.ok(spy.calls.ackAndClaim >= 2 * (n - 1), `ackAndClaim calls ${spy.calls.ackAndClaim}`);
      assert.ok(spy.calls.ack <= 2, `plain ack calls ${spy.calls.ack}`);
    });

    it('reports an ack refused inside the combined call as a lost lease, and completes none twice', async () => {
      const spy = new Spy(await open());
      const q = createStoreQueue(spy, { onError: () => {} });
      opened.push(q);
      await spy.ensureGroup('t', 'g', 'latest');
      const [first, second] = await q.publish({ topic: 't', key: 'k', payload: new Uint8Array(1) }, { topic: 't', key: 'k', payload: new Uint8Array(1) });
      const lost: Array<{ messageId: string; op: string }> = [];
      const completed: string[] = [];
      q.on('leaseLost', (e) => lost.push({ messageId: e.messageId, op: e.op }));
      q.on('completed', (e) => completed.push(e.messageId));
      // The first ack to go in a combined call finds its lease gone (another consumer's claim could have taken it back).
      let stolen = false;
      spy.beforeAckAndClaim = async (acks) => {
        if (stolen) return;
        stolen = true;
        await spy.s.release(acks);
      };
      const runs: string[] = [];
      const sub = await q.subscribe('t', 'g', async (d) => {
        runs.push(d.id);
      }, { concurrency: 1, pollIntervalMs: 3_600_000 });
      try {
        await waitFor(() => completed.includes(second!), 120_000, 'the second message completed');
      } finally {
        await sub.close();
      }
      assert.deepEqual(lost, [{ messageId: first, op: 'ack' }]);
      // The released first message ran again before the second (its lane), and completed once.
      assert.deepEqual(runs, [first, first, second]);
      assert.deepEqual(completed, [first, second]);
      assert.ok(spy.calls.ackAndClaim >= 2);
    });

    it('reports a failed combined call as an ack error; the deliveries come back and finish', async () => {
      const spy = new Spy(await open());
      const errors: string[] = [];
      const q = createStoreQueue(spy, { onError: (_err, where) => errors.push(where) });
      opened.push(q);
      await spy.ensureGroup('t', 'g', 'latest');
      const [only] = await q.publish({ topic: 't', key: 'k', payload: new Uint8Array(1) });
      let failed = false;
      spy.beforeAckAndClaim = async () => {
        if (failed) return;
        failed = true;
        throw new Error('injected');
      };
      const completed: string[] = [];
      q.on('completed', (e) => completed.push(e.messageId));
      let runs = 0;
      const sub = await q.subscribe('t', 'g', async () => {
        runs++;
      }, { concurrency: 1, leaseDurationMs: 1_000, pollIntervalMs: 50 });
      try {
        await waitFor(() => completed.length === 1, 120_000, 'the message completed after its lease ran out');
      } finally {
        await sub.close();
      }
      assert.deepEqual(errors, ['ack']);
      assert.deepEqual(completed, [only]);
      assert.equal(runs, 2); // at least once: the unwritten ack's delivery ran again
    });
  });
});
