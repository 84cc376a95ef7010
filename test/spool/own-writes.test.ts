/**
 * The head takes frames this process wrote with `appendNoSync` from memory
 * (segment.ts, `remember`) instead of reading and hashing them again. What
 * it takes must always be what the file holds at that place: never a frame
 * a rollback cut, and after a restart everything comes from the file again.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { GroupLostError, IOError } from '../../src/errors.js';
import { SpoolSegment } from '../../src/spool/segment.js';
import { STAGE_BLOCK_BYTES, WrittenMemory } from '../../src/spool/written-memory.js';
import { encodeFrame } from '../../src/spool/format.js';
import { FaultyFileSystem, DIR, dec, enc, openS, range, rec, REC_FRAME } from './helpers.js';

async function appendNoSyncAll(s: Awaited<ReturnType<typeof openS>>, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) await s.appendNoSync(enc(rec(i)));
}

describe('frames this process wrote', () => {
  it('are popped without reading the segment; after a reopen they are read from it', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    assert.equal(await s.pop(), undefined, 'a consumer: from now on the spool keeps what it writes');
    // 2 KiB records: 100 KiB, more than one read-ahead window.
    const big = (i: number) => rec(i).padEnd(2048, '.');
    for (let i = 0; i < 50; i++) await s.appendNoSync(enc(big(i)));
    await s.sync();
    fs.inject({ step: 'read', error: 'EIO', times: Infinity, path: '.seg' });
    const first = await s.popBatch(20);
    const rest = await s.popBatch(100, Infinity, first.at(-1));
    assert.deepEqual([...first, ...rest].map((p) => dec(p.data)), range(0, 50).map((_, i) => big(i)));
    assert.equal(dec((await s.pop())!.data), big(0), 'nothing committed: the head record again, from memory');
    await s.commitBatch(first);
    await s.close();
    fs.clearFaults();
    const t = await openS(fs);
    fs.inject({ step: 'read', error: 'EIO', times: Infinity, path: '.seg' });
    await assert.rejects(t.popBatch(10), IOError, 'a new process has nothing in memory');
    fs.clearFaults();
    assert.deepEqual((await t.popBatch(100)).map((p) => dec(p.data)), range(20, 50).map((_, i) => big(20 + i)));
    await t.close();
  });

  it('are not kept while nothing has popped: a producer alone reads nothing back, so it holds nothing', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    for (let i = 0; i < 50; i++) await s.appendNoSync(enc(rec(i).padEnd(2048, '.')));
    await s.sync();
    fs.inject({ step: 'read', error: 'EIO', times: Infinity, path: '.seg' });
    await assert.rejects(s.popBatch(10), IOError, 'the first pop reads the file');
    fs.clearFaults();
    assert.deepEqual((await s.popBatch(3)).map((p) => dec(p.data).slice(0, 5)), range(0, 3));
    await s.close();
  });

  it('cut by a rollback are never handed out: the frames appended in their place are', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    assert.equal(await s.pop(), undefined);
    await appendNoSyncAll(s, 0, 5);
    await s.sync();
    await appendNoSyncAll(s, 100, 110); // lost below
    const before = await s.popBatch(100);
    assert.deepEqual(before.map((p) => dec(p.data)), [...range(0, 5), ...range(100, 110)]);
    fs.inject({ step: 'sync:data', error: 'EIO' });
    await assert.rejects(s.sync(), GroupLostError);
    // Same positions, other bytes.
    await appendNoSyncAll(s, 200, 210);
    await s.sync();
    const after = await s.popBatch(100);
    assert.deepEqual(after.map((p) => dec(p.data)), [...range(0, 5), ...range(200, 210)]);
    const later = await s.popBatch(100, Infinity, after[7]);
    assert.deepEqual(later.map((p) => dec(p.data)), range(203, 210));
    await s.close();
  });

  it('a segment keeps them within its budget, gives the budget back as the head passes, and forgets them on a cut', () => {
    const fs = new FaultyFileSystem();
    fs.mkdirp(DIR);
    const seg = SpoolSegment.create(fs, DIR, 1);
    const budget = new WrittenMemory(3 * REC_FRAME);
    budget.consuming = true;
    seg.budget = budget;
    const frame = (i: number) => encodeFrame(enc(rec(i)));
    let at = 8;
    for (let i = 0; i < 5; i++) {
      const f = frame(i);
      seg.file().pwrite(f, at, 'record');
      seg.remember(at, f);
      at += f.length;
      seg.size = at;
    }
    assert.equal(budget.bytes, 3 * REC_FRAME, 'the fourth and fifth frames did not fit');
    assert.equal(dec(seg.ownFrame(8 + REC_FRAME)!), rec(1));
    assert.equal(seg.ownFrame(8 + 3 * REC_FRAME), undefined, 'not kept: read from the file');
    seg.forgetBelow(8 + 2 * REC_FRAME);
    assert.equal(budget.bytes, REC_FRAME);
    assert.equal(seg.ownFrame(8), undefined);
    assert.equal(dec(seg.ownFrame(8 + 2 * REC_FRAME)!), rec(2));
    seg.truncate(8 + 3 * REC_FRAME);
    assert.equal(budget.bytes, 0);
    assert.equal(seg.ownFrame(8 + 2 * REC_FRAME), undefined);
    seg.close();
  });
});

describe('staging blocks', () => {
  it('whatever the record sizes and where the syncs and pops fall, the head hands out what was appended, in order', async () => {
    // Bursts of every size against the 256 KiB staging blocks: filling one
    // nearly whole, spilling into the next, and reuse of blocks as the head
    // passes the bursts kept in them. Records carry their index and a
    // pattern, so a byte staged over a kept burst shows.
    const step = fc.oneof(
      fc.record({ op: fc.constant('append' as const), sizes: fc.array(fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1000, max: 70_000 })), { minLength: 1, maxLength: 40 }) }),
      fc.record({ op: fc.constant('sync' as const) }),
      fc.record({ op: fc.constant('pop' as const), n: fc.integer({ min: 1, max: 50 }), run: fc.boolean() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
        const s = await openS(new FaultyFileSystem(), { maxBytes: 0, segmentBytes: 1 << 20 });
        const body = (i: number, n: number) => {
          const b = new Uint8Array(n);
          for (let k = 0; k < n; k++) b[k] = (i * 31 + k * 7) & 0xff;
          if (n >= 4) new DataView(b.buffer).setUint32(0, i);
          return b;
        };
        const sizes: number[] = [];
        let taken = 0;
        const check = (got: Uint8Array) => {
          const i = taken++;
          assert.ok(i < sizes.length, `record ${i} popped, only ${sizes.length} appended`);
          assert.ok(Buffer.from(got).equals(Buffer.from(body(i, sizes[i]!))), `record ${i} (${sizes[i]} bytes) differs`);
        };
        try {
          await s.pop(); // a consumer: the spool keeps what it writes
          for (const st of steps) {
            if (st.op === 'append') {
              await s.appendBatchNoSync(st.sizes.map((n) => body(sizes.push(n) - 1, n)));
            } else if (st.op === 'sync') {
              await s.sync();
            } else if (st.run) {
              const r = await s.popRun(st.n);
              if (r) {
                for (let k = 0; k < r.count; k++) check(r.record(k));
                await s.commitRuns([r]);
              }
            } else {
              const b = await s.popBatch(st.n);
              for (const p of b) check(p.data);
              await s.commitBatch(b);
            }
          }
          await s.sync();
          for (let b = await s.popBatch(64); b.length > 0; b = await s.popBatch(64)) {
            for (const p of b) check(p.data);
            await s.commitBatch(b);
          }
          assert.equal(taken, sizes.length);
        } finally {
          await s.close();
        }
      }),
      { numRuns: Number(process.env.FERRY_SPOOL_RUNS ?? 150) },
    );
  });


  it('a burst that fills most of a block is still what the head hands out after the next bursts', async () => {
    // 1,000 frames of 240-byte records stage about 252 KiB: the block has
    // less than the stage's minimum rest left, so the stage moves to another
    // block while the segment keeps this burst. The next appends must not
    // be staged over it (they were, when the stage gave the block back
    // before the segment counted the burst, and took the same block again).
    for (const pop of ['popBatch', 'popRun'] as const) {
      const fs = new FaultyFileSystem();
      const s = await openS(fs);
      try {
        assert.equal(await s.pop(), undefined, 'a consumer: the spool keeps what it writes');
        const first = Array.from({ length: 1000 }, (_, i) => rec(i).padEnd(240, 'a'));
        await s.appendBatchNoSync(first.map(enc));
        await s.sync();
        const second = Array.from({ length: 300 }, (_, i) => rec(1000 + i).padEnd(240, 'b'));
        await s.appendBatchNoSync(second.map(enc));
        await s.sync();
        const got: string[] = [];
        if (pop === 'popBatch') {
          for (let b = await s.popBatch(128); b.length > 0; b = await s.popBatch(128)) {
            got.push(...b.map((p) => dec(p.data)));
            await s.commitBatch(b);
          }
        } else {
          for (let r = await s.popRun(128); r; r = await s.popRun(128)) {
            for (let k = 0; k < r.count; k++) got.push(dec(r.record(k)));
            await s.commitRuns([r]);
          }
        }
        const want = [...first, ...second];
        const wrong = got.findIndex((g, i) => g !== want[i]);
        assert.deepEqual({ count: got.length, firstWrong: wrong, at: got[wrong]?.slice(0, 5) }, { count: want.length, firstWrong: -1, at: undefined }, pop);
      } finally {
        await s.close();
      }
    }
  });


  it('go back for reuse only when the stage has moved on and no kept burst is in them', () => {
    const m = new WrittenMemory(1 << 20);
    m.consuming = true;
    const a = m.acquire();
    const burst = a.subarray(0, 100);
    assert.equal(m.keep(burst), true);
    m.release(a.buffer); // the stage moves on; the burst is still kept
    const b = m.acquire();
    assert.notEqual(b.buffer, a.buffer, 'a block with a kept burst is not handed out again');
    m.forget(burst);
    assert.equal(m.bytes, 0);
    assert.equal(m.acquire().buffer, a.buffer, 'the last user gone, the block is reused');
    assert.equal(b.length, STAGE_BLOCK_BYTES);
  });
});
