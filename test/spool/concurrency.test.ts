/**
 * Pairs of spool calls run at once with Promise.all: the outcome must be what
 * the Go spool's mutex would give, some order of the calls one at a time, the
 * order they were made in.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClosedError, GroupLostError, IOError } from '../../src/spool/index.js';
import { FaultyFileSystem, dec, drain, enc, openS, range, rec } from './helpers.js';

const syncs = (fs: FaultyFileSystem) => fs.trace.filter((t) => t.startsWith('sync:data')).length;

describe('concurrent calls', () => {
  it('append × append: all resolve durable, in call order, sharing fdatasyncs', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const before = syncs(fs);
    await Promise.all(range(0, 50).map((r) => s.append(enc(r))));
    assert.ok(syncs(fs) - before < 50, `group commit: ${syncs(fs) - before} fdatasyncs for 50 appends`);
    fs.powerCut();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, range(0, 50));
    await s2.close();
  });

  it('appendNoSync × sync: a sync made after the appends covers them all', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await Promise.all([...range(0, 20).map((r) => s.appendNoSync(enc(r))), s.sync(), s.sync()]);
    assert.equal(s.stats().unsyncedBytes, 0);
    fs.powerCut();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, range(0, 20));
    await s2.close();
  });

  it('sync × sync with nothing to sync: both resolve without an fdatasync', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const before = syncs(fs);
    await Promise.all([s.sync(), s.sync(), s.sync()]);
    assert.equal(syncs(fs), before);
    await s.close();
  });

  it('pop × pop: both get the same head record', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('a'));
    await s.append(enc('b'));
    const [p, q] = await Promise.all([s.pop(), s.pop()]);
    assert.equal(dec(p!.data), 'a');
    assert.equal(dec(q!.data), 'a');
    await s.close();
  });

  it('commit × commit of one record: it is retired once', async () => {
    const s = await openS(new FaultyFileSystem(), { commitSync: true });
    await Promise.all(range(0, 3).map((r) => s.append(enc(r))));
    const p = (await s.pop())!;
    await Promise.all([p.commit(), p.commit(), p.commit()]);
    assert.equal(s.stats().committed, 1);
    assert.deepEqual((await drain(s)).values, range(1, 3));
    await s.close();
  });

  it('commit × commit under commitSync, of successive records: they share cursor fdatasyncs', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { commitSync: true });
    await Promise.all(range(0, 10).map((r) => s.append(enc(r))));
    const before = fs.trace.filter((t) => t.startsWith('sync:file')).length;
    const commits: Promise<void>[] = [];
    for (let i = 0; i < 10; i++) {
      const p = (await s.pop())!;
      commits.push(p.commit());
    }
    await Promise.all(commits);
    const after = fs.trace.filter((t) => t.startsWith('sync:file')).length;
    assert.ok(after - before < 10 && after > before, `${after - before} cursor syncs for 10 commits`);
    assert.equal(await s.pop(), undefined);
    await s.close();
  });

  it('append × pop: a pop made after an append (not yet durable) sees it', async () => {
    const s = await openS(new FaultyFileSystem());
    const [, p] = await Promise.all([s.append(enc('a')), s.pop()]);
    assert.equal(dec(p!.data), 'a');
    await s.close();
  });

  it('pop × append: a pop made before the append finds the spool empty', async () => {
    const s = await openS(new FaultyFileSystem());
    const [p] = await Promise.all([s.pop(), s.append(enc('a'))]);
    assert.equal(p, undefined);
    await s.close();
  });

  it('commit × append: both take effect', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('a'));
    const p = (await s.pop())!;
    await Promise.all([p.commit(), s.append(enc('b'))]);
    assert.deepEqual((await drain(s)).values, ['b']);
    await s.close();
  });

  it('requeue × pop: a pop made during the requeue finds the record moved', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('a'));
    await s.append(enc('b'));
    const p = (await s.pop())!;
    const [rotated, q] = await Promise.all([s.requeue(p), s.pop()]);
    assert.equal(rotated, true);
    assert.equal(dec(q!.data), 'b');
    assert.deepEqual((await drain(s)).values, ['b', 'a']);
    await s.close();
  });

  it('requeue × requeue of one record: it moves once, as one at a time', async () => {
    const s = await openS(new FaultyFileSystem());
    for (const r of ['a', 'b', 'c']) await s.append(enc(r));
    const p = (await s.pop())!;
    assert.deepEqual(await Promise.all([s.requeue(p), s.requeue(p)]), [true, false]);
    assert.equal(s.stats().appended, 4, 'one copy');
    assert.deepEqual((await drain(s)).values, ['b', 'c', 'a']);
    await s.close();
  });

  it('requeue × pop × commit: the record popped during the requeue is the next one, and committing it delivers each record once', async () => {
    const s = await openS(new FaultyFileSystem());
    for (const r of ['a', 'b', 'c']) await s.append(enc(r));
    const p = (await s.pop())!;
    const rq = s.requeue(p);
    const q = (await s.pop())!;
    await Promise.all([rq, q.commit()]);
    assert.equal(dec(q.data), 'b');
    assert.deepEqual((await drain(s)).values, ['c', 'a']);
    await s.close();
  });

  it('requeue × popBatch: the batch starts after the moved record and ends with its copy', async () => {
    const s = await openS(new FaultyFileSystem());
    for (const r of ['a', 'b', 'c']) await s.append(enc(r));
    const p = (await s.pop())!;
    const [rotated, batch] = await Promise.all([s.requeue(p), s.popBatch(10)]);
    assert.equal(rotated, true);
    assert.deepEqual(batch.map((b) => dec(b.data)), ['b', 'c', 'a']);
    await s.close();
  });

  it('requeue × commit of the next batch record: the commit lands after the move, at the head', async () => {
    const s = await openS(new FaultyFileSystem());
    for (const r of ['a', 'b', 'c']) await s.append(enc(r));
    const [pa, pb] = await s.popBatch(2);
    const [rotated] = await Promise.all([s.requeue(pa!), pb!.commit()]);
    assert.equal(rotated, true);
    assert.deepEqual((await drain(s)).values, ['c', 'a']);
    await s.close();
  });

  it('requeue × close: the requeue made before close completes, and the record is queued once', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    for (const r of ['a', 'b']) await s.append(enc(r));
    const p = (await s.pop())!;
    const [rotated] = await Promise.all([s.requeue(p), s.close()]);
    assert.equal(rotated, true);
    await assert.rejects(s.requeue(p), ClosedError);
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, ['b', 'a']);
    await s2.close();
  });

  it('requeue × pop when the copy\'s fdatasync fails: the requeue rejects and the pop finds the record still at the head', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    for (const r of ['a', 'b']) await s.append(enc(r));
    const p = (await s.pop())!;
    fs.inject({ step: 'sync:data', error: 'EIO' });
    const [rq, q] = await Promise.allSettled([s.requeue(p), s.pop()]);
    assert.ok(rq.status === 'rejected' && rq.reason instanceof IOError, String(rq.status === 'rejected' && rq.reason));
    assert.equal(q.status === 'fulfilled' && dec(q.value!.data), 'a');
    assert.deepEqual((await drain(s)).values, ['a', 'b']);
    await s.close();
  });

  it('append × append when the shared fdatasync fails: both reject, both are rolled back', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.append(enc('kept'));
    fs.inject({ step: 'sync:data', error: 'EIO' });
    const res = await Promise.allSettled([s.append(enc('x')), s.append(enc('y'))]);
    for (const r of res) assert.ok(r.status === 'rejected' && r.reason instanceof IOError && !(r.reason instanceof GroupLostError));
    await s.append(enc('after'));
    assert.deepEqual((await drain(s)).values, ['kept', 'after']);
    await s.close();
  });

  it('appendNoSync × sync × sync when the fdatasync fails: both syncs report the group lost', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    fs.inject({ step: 'sync:data', error: 'EIO' });
    const res = await Promise.allSettled([s.appendNoSync(enc('x')), s.sync(), s.sync()]);
    assert.equal(res[0].status, 'fulfilled');
    for (const r of res.slice(1)) assert.ok(r.status === 'rejected' && r.reason instanceof GroupLostError);
    await s.sync(); // reported: the next sync has nothing to say
    assert.equal(await s.pop(), undefined);
    await s.close();
  });

  it('close × append: appends made before close resolve durable, ones after reject', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const a = s.append(enc('a'));
    const n = s.appendNoSync(enc('b'));
    const c = s.close();
    const late = s.append(enc('c'));
    await Promise.all([a, n, c]);
    await assert.rejects(late, ClosedError);
    fs.powerCut();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, ['a', 'b']);
    await s2.close();
  });

  it('pop × close: a commit racing the close is a no-op', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.append(enc(rec(0)));
    const p = (await s.pop())!;
    await Promise.all([s.close(), p.commit()]);
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, [rec(0)]);
    await s2.close();
  });
});
