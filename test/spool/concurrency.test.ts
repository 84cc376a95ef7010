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

  it('requeue × pop: the pop made during the requeue still sees the record at the head', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('a'));
    await s.append(enc('b'));
    const p = (await s.pop())!;
    const [rotated, q] = await Promise.all([s.requeue(p), s.pop()]);
    assert.equal(rotated, true);
    assert.equal(dec(q!.data), 'a');
    assert.deepEqual((await drain(s)).values, ['b', 'a']);
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
