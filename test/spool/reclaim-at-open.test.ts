/**
 * A spool whose only segment is all consumed starts a new segment at open
 * and retires the old one, so its space comes back before the segment has
 * filled. A disk the spool itself filled (a segment larger than the disk)
 * otherwise refused every append after a rerun: the consumed records held
 * the whole disk and the segment never rotated.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { FerryError } from '../../src/errors.js';
import { decodeCursor } from '../../src/spool/format.js';
import { appendAll, CURSOR, drain, enc, openS, range, rec, segNumbers } from './helpers.js';

/** Appends records from `from` until the disk refuses one; returns how many went in. */
async function fillDisk(s: Awaited<ReturnType<typeof openS>>, from: number): Promise<number> {
  for (let i = from; ; i++) {
    try {
      await s.append(enc(rec(i)));
    } catch (err) {
      assert.ok(err instanceof FerryError, `a FerryError, got ${String(err)}`);
      assert.match(String((err as Error).message) + String((err as { cause?: Error }).cause?.message), /ENOSPC/);
      return i - from;
    }
  }
}

/** A spool on a new file system that took records 0 to 3 and delivered them all, closed. */
async function drained(): Promise<FaultyFileSystem> {
  const fs = new FaultyFileSystem();
  const s = await openS(fs);
  await appendAll(s, 0, 4);
  assert.deepEqual((await drain(s)).values, range(0, 4));
  await s.close();
  return fs;
}

/** Reopens `fs`'s spool: segment 2 replaced segment 1, nothing is delivered again, and records 4 and 5 go through. */
async function reopenedTakesMore(fs: FaultyFileSystem): Promise<void> {
  const again = await openS(fs);
  try {
    assert.deepEqual(segNumbers(fs), [2]);
    assert.deepEqual((await drain(again)).values, []);
    await appendAll(again, 4, 6);
    assert.deepEqual((await drain(again)).values, range(4, 6));
  } finally {
    await again.close();
  }
}

describe('spool: a consumed segment is reclaimed at open', () => {
  it('a disk the spool filled takes records again after the backlog is delivered and the spool reopened', async () => {
    const fs = new FaultyFileSystem();
    fs.capacity = 4096;
    const s = await openS(fs); // the default segment size, far larger than the disk
    // One record delivered first, so the cursor file has its bytes before the disk fills.
    await appendAll(s, 0, 1);
    assert.deepEqual((await drain(s)).values, range(0, 1));
    const first = 1 + (await fillDisk(s, 1));
    assert.ok(first > 10, `some records fit (${first})`);
    assert.deepEqual((await drain(s)).values, range(1, first));
    assert.equal(s.stats().cursorErrors, 0);
    // Still full: the consumed records hold the only segment, which has not filled.
    assert.equal(await fillDisk(s, first), 0);
    await s.close();
    assert.deepEqual(segNumbers(fs), [1]);

    const again = await openS(fs);
    try {
      assert.deepEqual(segNumbers(fs), [2], 'segment 1 retired, segment 2 started');
      assert.deepEqual(decodeCursor(fs.readFile(CURSOR)!), { seq: 2, offset: 8 }, 'the cursor names the new segment');
      assert.equal(again.stats().backlogBytes, 0);
      const second = await fillDisk(again, first);
      assert.ok(second >= first - 1, `the whole disk is free for records again (${second} of ${first})`);
      assert.deepEqual((await drain(again)).values, range(first, first + second));
    } finally {
      await again.close();
    }
  });

  it('a segment with records still to deliver is kept, and they are delivered', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await appendAll(s, 0, 6);
    const p = (await s.pop())!;
    await p.commit();
    await s.close();
    const again = await openS(fs);
    try {
      assert.deepEqual(segNumbers(fs), [1]);
      assert.deepEqual((await drain(again)).values, range(1, 6));
    } finally {
      await again.close();
    }
  });

  it('a disk left with no room at all: the consumed segment goes first, then the new one is made', async () => {
    const fs = await drained();
    fs.capacity = fs.usedBytes();
    await reopenedTakesMore(fs);
  });

  it('a crash between the old segment\'s removal and the new one\'s creation: the next open numbers on from the cursor', async () => {
    const fs = await drained();
    // The new segment cannot be made: the open fails after the removal.
    fs.inject({ step: 'open', error: 'EACCES', path: '00000000000000000002' });
    await assert.rejects(openS(fs), FerryError);
    fs.clearFaults();
    assert.deepEqual(segNumbers(fs), []);
    await reopenedTakesMore(fs);
  });

  it('an empty spool (only a header) is not rotated at each open', async () => {
    const fs = new FaultyFileSystem();
    for (let i = 0; i < 3; i++) await (await openS(fs)).close();
    assert.deepEqual(segNumbers(fs), [1]);
  });
});
