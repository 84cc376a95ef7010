/**
 * Go parity in what an open reports and how it leaves a segment: a torn tail past the records a header published is discarded, not
 * lost (`discardedBytes`, never `lostBytes`), and cleared so no later walk can
 * step into it; a segment found cut short is extended back to its capacity
 * and keeps taking appends, as the Go diskqueue does, instead of being
 * sealed; stats carry `maxSegments` and `foreignBytes`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decodeHeader, encodeRecord, frameSize, HEADER_SIZE } from '../../src/diskqueue/format.js';
import { FaultyFileSystem, openQ, drainAll, segPath, segNumbers, addAll, SEG } from './faults/helpers.js';

const enc = (s: string) => new TextEncoder().encode(s);

/** Framed bytes of `values`, back to back. */
function frames(values: string[]): Uint8Array {
  const out = new Uint8Array(values.reduce((n, v) => n + frameSize(enc(v).length), 0));
  let at = 0;
  for (const v of values) at += encodeRecord(enc(v), out, at);
  return out;
}

function writeCursor(fs: FaultyFileSystem, seq: number): number {
  const res = decodeHeader(fs.readFile(segPath(seq))!.subarray(0, HEADER_SIZE));
  assert.ok(res.ok);
  return res.header.writeCursor;
}

describe('discardedBytes', () => {
  it('records past the published write cursor (adds that never resolved) are discarded, not lost', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['a1', 'a2', 'a3']);
    await q.close();
    // What a cut between an add's record write and its header leaves.
    const wc = writeCursor(fs, 1);
    const tail = frames(['never1', 'never2']);
    const file = fs.readFile(segPath(1))!;
    file.set(tail, wc);
    fs.writeFile(segPath(1), file);

    q = await openQ(fs);
    const st = q.stats();
    assert.equal(st.discardedBytes, tail.length);
    assert.equal(st.lostBytes, 0);
    assert.equal(st.lostRecords, 0);
    assert.equal(st.corruptions, 0);
    assert.ok(fs.readFile(segPath(1))!.subarray(wc, wc + tail.length).every((b) => b === 0), 'the torn tail is cleared');
    await q.add('b1');
    assert.deepEqual(await drainAll(q.reader()), { values: ['a1', 'a2', 'a3', 'b1'], errors: [] });
    await q.close();
    q = await openQ(fs);
    assert.equal(q.stats().discardedBytes, 0, 'discarded once');
    await q.close();
  });

  it('a torn partial record past the cursor counts too, up to its last byte', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['a1']);
    await q.close();
    const wc = writeCursor(fs, 1);
    const file = fs.readFile(segPath(1))!;
    file.set(frames(['a-record-cut-short']).subarray(0, 7), wc);
    fs.writeFile(segPath(1), file);
    q = await openQ(fs);
    assert.equal(q.stats().discardedBytes, 7);
    assert.equal(q.stats().corruptions, 0);
    await q.close();
  });

  it('a clean close discards nothing', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['a1', 'a2']);
    await q.close();
    q = await openQ(fs);
    assert.equal(q.stats().discardedBytes, 0);
    await q.close();
  });
});

describe('a segment found cut short is extended back and keeps taking appends', () => {
  it('the tail cut at a record boundary: the lost records are reported, the file is whole again, and appends go on in it', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['r0', 'r1', 'r2', 'r3']);
    await q.close();
    const cut = HEADER_SIZE + 2 * frameSize(2);
    fs.writeFile(segPath(1), fs.readFile(segPath(1))!.slice(0, cut));

    q = await openQ(fs);
    assert.equal(fs.readFile(segPath(1))!.length, HEADER_SIZE + SEG, 'extended to its capacity');
    assert.equal(q.stats().diskBytes, HEADER_SIZE + SEG);
    assert.equal(q.stats().lostRecords, 2);
    await addAll(q, ['r4', 'r5']);
    assert.deepEqual(segNumbers(fs), [1], 'appended to the same segment, not a new one');
    const got = await drainAll(q.reader());
    assert.deepEqual(got.values, ['r0', 'r1', 'r4', 'r5']);
    assert.equal(got.errors.length, 1);
    assert.equal(got.errors[0]!.reason, 'truncated');
    await q.close();
    q = await openQ(fs);
    assert.equal(q.stats().corruptions, 0);
    await q.close();
  });

  it('the tail cut only in its slack: no loss, extended, appendable', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['r0', 'r1']);
    await q.close();
    fs.writeFile(segPath(1), fs.readFile(segPath(1))!.slice(0, 1000));
    q = await openQ(fs);
    assert.equal(q.stats().corruptions, 0);
    assert.equal(fs.readFile(segPath(1))!.length, HEADER_SIZE + SEG);
    await q.add('r2');
    assert.deepEqual(segNumbers(fs), [1]);
    assert.deepEqual((await drainAll(q.reader())).values, ['r0', 'r1', 'r2']);
    await q.close();
  });

  it('a sealed segment cut short keeps its length, and diskBytes reports it', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await q.addBatch(Array.from({ length: 300 }, (_, i) => `v${String(i).padStart(4, '0')}`)); // 14-byte frames: 292 per segment
    await q.close();
    assert.deepEqual(segNumbers(fs), [1, 2]);
    fs.writeFile(segPath(1), fs.readFile(segPath(1))!.slice(0, 2000));
    q = await openQ(fs);
    assert.equal(q.stats().diskBytes, 2000 + HEADER_SIZE + SEG);
    assert.equal(fs.readFile(segPath(1))!.length, 2000);
    await q.close();
  });
});

describe('stats carry the caps', () => {
  it('maxSegments is the option (default 32, 0 for none)', async () => {
    for (const [opts, want] of [[{}, 32], [{ maxSegments: 5 }, 5], [{ maxSegments: 0 }, 0]] as const) {
      const q = await openQ(new FaultyFileSystem(), opts);
      assert.equal(q.stats().maxSegments, want);
      await q.close();
    }
  });
});
