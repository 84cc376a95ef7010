/**
 * The SQLite store makes deliveries lazily (schema version 3): a publish
 * writes only its message, and a claim turns the messages past its group's
 * cursor into deliveries. These check what that must not change: every group
 * sees each message once and in order, stats count messages no claim has
 * reached, the janitor never removes them, a claim finds a due message behind
 * many scheduled ones, and two handles claiming at once never share one.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { claimReq, counts, ids, msg } from '../stores/helpers.js';

const HOUR = 3_600_000;

/** Publishes `n` messages to topic `t` scheduled an hour ahead, 1,000 per append. */
async function scheduleAhead(s: SqliteStore, n: number): Promise<void> {
  const later = new Date(Date.now() + HOUR);
  for (let i = 0; i < n; i += 1000) await s.append(Array.from({ length: Math.min(1000, n - i) }, (_, j) => msg('t', { id: `s${i + j}`, deliverAt: later })));
}

describe('sqlite store: deliveries made at claim time', () => {
  let dir: string;
  let n = 0;
  const open = () => SqliteStore.open({ path: join(dir, `c${++n}.db`) });
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-cursor-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a publish writes no delivery row; the first claim makes them, in order, for its group only', async () => {
    const s = await open();
    await s.ensureGroup('t', 'a', 'latest');
    await s.ensureGroup('t', 'b', 'latest');
    const m = [1, 2, 3].map((i) => msg('t', { id: `m${i}` }));
    await s.append(m);
    const raw = new Database(join(dir, `c${n}.db`), { readonly: true });
    const rows = raw.prepare('SELECT count(*) FROM ferry_deliveries').pluck();
    assert.equal(rows.get(), 0);
    assert.deepEqual(counts(await s.stats('t', 'a')), { pending: 3, leased: 0, dead: 0 });
    assert.deepEqual(ids(await s.claim(claimReq('t', 'a', { max: 2 }))), ['m1', 'm2']);
    assert.equal(rows.get(), 3); // the whole chunk past a's cursor; none for b
    assert.deepEqual(counts(await s.stats('t', 'a')), { pending: 1, leased: 2, dead: 0 });
    assert.deepEqual(counts(await s.stats('t', 'b')), { pending: 3, leased: 0, dead: 0 });
    assert.deepEqual(ids(await s.claim(claimReq('t', 'b'))), ['m1', 'm2', 'm3']);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'a'))), ['m3']);
    raw.close();
    await s.close();
  });

  it("'latest' skips what was stored before the group; 'earliest' starts at the oldest stored message", async () => {
    const s = await open();
    await s.append([msg('t', { id: 'old' })]);
    await s.ensureGroup('t', 'late', 'latest');
    await s.ensureGroup('t', 'early', 'earliest');
    await s.append([msg('t', { id: 'new' })]);
    // A second ensureGroup changes nothing, whatever it asks for.
    await s.ensureGroup('t', 'late', 'earliest');
    assert.deepEqual(ids(await s.claim(claimReq('t', 'late'))), ['new']);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'early'))), ['old', 'new']);
    assert.deepEqual(await s.claim(claimReq('t', 'nobody')), []);
    await s.close();
  });

  it('the janitor keeps a message until every group of its topic has passed it and acked it', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t', { id: 'kept' }), msg('orphan', { id: 'gone' })]);
    const policy = { ackedRetentionMs: -HOUR, deadRetentionMs: HOUR };
    assert.equal(await s.purge(policy, 100), 1); // only the message of a topic with no group
    const [c] = await s.claim(claimReq('t', 'g'));
    assert.equal(c!.message.id, 'kept');
    assert.equal(await s.purge(policy, 100), 0); // leased
    await s.ack([c!]);
    assert.equal(await s.purge(policy, 100), 1);
    assert.deepEqual((await s.listMessages('t', { limit: 10 })).messages, []);
    await s.close();
  });

  it('a claim reaches a due message behind more scheduled ones than one chunk, and counts them all', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await scheduleAhead(s, 700);
    await s.append([msg('t', { id: 'now' }), msg('t', { id: 'then' })]);
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 702, leased: 0, dead: 0 });
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 1 }))), ['now']);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 5 }))), ['then']);
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 700, leased: 2, dead: 0 });
    await s.close();
  });

  it('one claim finds a due message behind scheduled ones in many transactions, letting the event loop run between them', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await scheduleAhead(s, 10_000);
    await s.append([msg('t', { id: 'due' })]);
    let turned = false;
    setImmediate(() => (turned = true));
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 4 }))), ['due']);
    assert.ok(turned, 'the claim yielded to the event loop between its transactions');
    assert.deepEqual(await s.claim(claimReq('t', 'g')), []); // the rest are made and not due
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 10_000, leased: 1, dead: 0 });
    await s.close();
  });

  it('claims run at once on one handle, all past scheduled messages, interleave their transactions and share nothing', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await scheduleAhead(s, 6000);
    await s.append(['d1', 'd2', 'd3'].map((id) => msg('t', { id })));
    const got = await Promise.all([s.claim(claimReq('t', 'g', { max: 2 })), s.claim(claimReq('t', 'g', { max: 2 })), s.claim(claimReq('t', 'g', { max: 2 }))]);
    const all = got.flatMap(ids);
    assert.deepEqual([...all].sort(), ['d1', 'd2', 'd3']);
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 6000, leased: 3, dead: 0 });
    await s.close();
  });

  it('two handles on one file claiming at once hand each message out once, in order per key', async () => {
    const path = join(dir, 'two.db');
    const [a, b] = await Promise.all([SqliteStore.open({ path }), SqliteStore.open({ path })]);
    await a.ensureGroup('t', 'g', 'latest');
    await a.append(Array.from({ length: 500 }, (_, i) => msg('t', { id: `m${String(i).padStart(3, '0')}`, key: `k${i % 7}` })));
    const seen: string[] = [];
    for (let round = 0; round < 200 && seen.length < 500; round++) {
      const got = await Promise.all([a.claim(claimReq('t', 'g', { max: 9 })), b.claim(claimReq('t', 'g', { max: 13 }))]);
      for (const [i, cs] of got.entries()) {
        seen.push(...ids(cs));
        await (i === 0 ? a : b).ack(cs);
      }
    }
    assert.equal(seen.length, 500);
    assert.equal(new Set(seen).size, 500);
    for (let k = 0; k < 7; k++) {
      const lane = seen.filter((id) => Number(id.slice(1)) % 7 === k);
      assert.deepEqual(lane, [...lane].sort());
    }
    await a.close();
    await b.close();
  });
});
