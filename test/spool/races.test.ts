/**
 * Races a user found: a consumer that keeps up with the producer commits,
 * and retires, segments while the flush covering them is still pending, and
 * a close that lands during a commit's cursor fdatasync. The seam's `delay`
 * hook holds the fdatasyncs so the race happens every run.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DIR, FaultyFileSystem, counting, dec, drain, enc, openS, segNumbers } from './helpers.js';
import { IOError, Spool } from '../../src/spool/index.js';

/** Holds every fdatasync (and directory fsync) whose label matches until `release()`. */
function gate(fs: FaultyFileSystem, match: (label: string) => boolean) {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let held = 0;
  fs.delay = (label) => {
    if (!match(label)) return Promise.resolve();
    held++;
    return opened;
  };
  return {
    get held() {
      return held;
    },
    release: () => {
      fs.delay = undefined;
      open();
    },
  };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('races with a pending flush', () => {
  it('a commit retiring segments a pending flush listed does not roll the flush back', async () => {
    const fs = new FaultyFileSystem();
    // 12 + 8 = 20 bytes a frame: one record per segment.
    const s = await openS(fs, { segmentBytes: 20 });
    const g = gate(fs, (l) => l.startsWith('fdatasync') && l.endsWith('.seg'));
    const appends = [1, 2, 3].map((i) => s.append(new Uint8Array(8).fill(i)));
    const settled = Promise.allSettled(appends);
    await tick();
    assert.equal(g.held, 1, 'the flush waits on its first segment');
    // The consumer delivers and commits the first two records meanwhile.
    for (let i = 1; i <= 2; i++) {
      const p = (await s.pop())!;
      assert.deepEqual([...p.data], new Array(8).fill(i));
      await p.commit();
    }
    g.release();
    const results = await settled;
    assert.deepEqual(
      results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok')),
      ['ok', 'ok', 'ok'],
    );
    await s.sync();
    const st = s.stats();
    assert.equal(st.unsyncedBytes, 0);
    assert.equal(st.committed, 2);
    assert.equal(segNumbers(fs).length, 1, 'the two consumed segments are gone');
    await s.close();
    // The third record is durable: a power cut keeps it.
    fs.powerCut();
    const s2 = await openS(fs, { segmentBytes: 20 });
    const d = await drain(s2);
    assert.deepEqual(d.errors, []);
    assert.deepEqual(d.values, [dec(new Uint8Array(8).fill(3))]);
    await s2.close();
  });

  it('sync and close after such a retirement resolve (no GroupLostError)', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: 20 });
    const g = gate(fs, (l) => l.startsWith('fdatasync') && l.endsWith('.seg'));
    for (let i = 1; i <= 3; i++) await s.appendNoSync(enc(`rec${i}xyz`));
    const synced = s.sync();
    await tick();
    for (let i = 0; i < 2; i++) await (await s.pop())!.commit();
    g.release();
    await assert.doesNotReject(synced, 'sync resolves');
    assert.equal(s.stats().committed, 2);
    await assert.doesNotReject(s.close(), 'close resolves');
    // The sync that resolved covered the third record: a power cut keeps it.
    fs.powerCut();
    const s2 = await openS(fs, { segmentBytes: 20 });
    const d = await drain(s2);
    assert.deepEqual(d.errors, []);
    assert.deepEqual(d.values, ['rec3xyz']);
    await s2.close();
  });
});

describe('close during a commit', () => {
  it('close waits for a commitSync cursor fdatasync instead of closing its descriptor under it', async () => {
    const inner = new FaultyFileSystem();
    const { fs, c } = counting(inner);
    const s = await Spool.open(DIR, { fs, commitSync: true });
    for (const r of ['a', 'b', 'c']) await s.append(enc(r));
    const g = gate(inner, (l) => l.startsWith('fdatasync') && l.endsWith('/cursor'));
    const p = (await s.pop())!;
    const committed = p.commit();
    await tick();
    assert.equal(g.held, 1, 'the cursor fdatasync is running');
    const closed = s.close();
    await tick();
    g.release();
    await Promise.all([committed, closed]);
    assert.equal(c.closedUnderSync, 0, 'no descriptor was closed under its fdatasync');
    assert.equal(s.stats().cursorErrors, 0);
    assert.equal(c.open, 0, 'close released every descriptor, none reopened after it');
    // The commit was made durable: a power cut keeps it.
    inner.powerCut();
    const s2 = await Spool.open(DIR, { fs: inner });
    assert.deepEqual((await drain(s2)).values, ['b', 'c']);
    await s2.close();
  });

  it('a commit made just before close (same turn) neither fails nor reopens the cursor after close', async () => {
    const inner = new FaultyFileSystem();
    const { fs, c } = counting(inner);
    const s = await Spool.open(DIR, { fs, commitSync: true });
    for (const r of ['a', 'b']) await s.append(enc(r));
    const p = (await s.pop())!;
    await Promise.all([p.commit(), s.close()]);
    assert.equal(c.closedUnderSync, 0);
    assert.equal(s.stats().cursorErrors, 0);
    assert.equal(c.open, 0);
    inner.powerCut();
    const s2 = await Spool.open(DIR, { fs: inner });
    assert.deepEqual((await drain(s2)).values, ['b']);
    await s2.close();
  });
});

describe('a failed fdatasync', () => {
  it('rejects the append with an error named IOError (no private class name leaks)', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    fs.inject({ step: 'sync:data', error: 'EIO' });
    const err = await s.append(enc('x')).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof IOError, String(err));
    assert.equal(err.name, 'IOError');
    assert.match(String(err), /^IOError: /);
    await s.close();
  });
});
