/**
 * Open descriptors stay bounded however large the backlog grows: a sealed
 * segment gives its descriptor back once it is durable and reopens it when
 * read, so a backlog of thousands of segments cannot hit EMFILE.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { UNBOUNDED } from '../../src/spool/index.js';
import { FaultyFileSystem, DIR, counting, dec, drain, enc, range, rec } from './helpers.js';
import { Spool } from '../../src/spool/index.js';

// One record per 30-byte segment.
const OPTS = { segmentBytes: 30, maxBytes: UNBOUNDED };

describe('open descriptors', () => {
  it('stay bounded while awaited appends build a backlog of 300 segments, and while it drains', async () => {
    const inner = new FaultyFileSystem();
    const { fs, c } = counting(inner);
    const s = await Spool.open(DIR, { fs, ...OPTS });
    for (let i = 0; i < 300; i++) await s.append(enc(rec(i)));
    assert.equal(s.segments, 300);
    assert.ok(c.open <= 3, `${c.open} descriptors open for 300 segments`);
    const d = await drain(s);
    assert.deepEqual(d.values, range(0, 300));
    assert.ok(c.peak <= 4, `at most ${c.peak} descriptors open at once`);
    await s.close();
    assert.equal(c.open, 0, 'close releases every descriptor');
  });

  it('stay bounded for an appendNoSync burst over 300 segments; sync still covers them all', async () => {
    const inner = new FaultyFileSystem();
    const { fs, c } = counting(inner);
    const s = await Spool.open(DIR, { fs, ...OPTS });
    for (let i = 0; i < 300; i++) await s.appendNoSync(enc(rec(i)));
    await s.sync();
    assert.equal(s.stats().unsyncedBytes, 0);
    assert.ok(c.peak <= 40, `at most ${c.peak} descriptors open at once`);
    await s.close();
    inner.powerCut();
    const s2 = await Spool.open(DIR, { fs: inner, ...OPTS });
    assert.deepEqual((await drain(s2)).values, range(0, 300));
    await s2.close();
  });

  it('stay bounded while open recovers a backlog of 300 segments', async () => {
    const inner = new FaultyFileSystem();
    const s = await Spool.open(DIR, { fs: inner, ...OPTS });
    for (let i = 0; i < 300; i++) await s.appendNoSync(enc(rec(i)));
    await s.close();
    const { fs, c } = counting(inner);
    const s2 = await Spool.open(DIR, { fs, ...OPTS });
    assert.ok(c.peak <= 4, `at most ${c.peak} descriptors open at once during open`);
    assert.deepEqual((await drain(s2)).values, range(0, 300));
    await s2.close();
  });

  it('stay bounded for popBatch reading ahead across segments', async () => {
    const inner = new FaultyFileSystem();
    const { fs, c } = counting(inner);
    const s = await Spool.open(DIR, { fs, ...OPTS });
    for (let i = 0; i < 100; i++) await s.append(enc(rec(i)));
    const b = await s.popBatch(100);
    assert.deepEqual(b.map((p) => dec(p.data)), range(0, 100));
    assert.ok(c.open <= 4, `${c.open} descriptors open after a batch over 100 segments`);
    for (const p of b) await p.commit();
    assert.equal(s.segments, 1);
    await s.close();
  });
});
