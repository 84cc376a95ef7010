/**
 * A staged write of an `appendNoSync` group fails (a full disk): the group
 * is lost, and the producer re-appends it after `sync()` reports that. A
 * record appended after the failure and before that report once landed
 * where the cut frames had been, so a reader got it ahead of the re-appended
 * group: out of order, after a gap (seen on a 2 MiB tmpfs: record 28,960
 * right after 25,368). Now such an append rejects with the group's
 * `GroupLostError` itself and places nothing.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { FaultyFileSystem } from '../../../src/storage/faulty.js';
import { GroupLostError } from '../../../src/errors.js';
import { drain, enc, openS, range, rec } from '../helpers.js';

describe('spool: appends after a lost group', () => {
  it('the next append is refused and places nothing, sync() reports the loss, and the re-appended group reads back whole and in order', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      for (let i = 0; i < 3; i++) await s.appendNoSync(enc(rec(i)));
      await s.sync();
      fs.inject({ step: 'write:record', error: 'ENOSPC' });
      await s.appendNoSync(enc(rec(3))); // staged; its burst is written at the end of this turn, and fails
      await turn();
      await assert.rejects(s.appendNoSync(enc(rec(4))), (e) => e instanceof GroupLostError && e.code === 'ERR_GROUP_LOST' && /ENOSPC/.test(String((e.cause as Error | undefined)?.message)));
      await assert.rejects(s.sync(), GroupLostError, 'sync() still reports the loss: whatever it resolves for is stored');
      // The producer re-appends its group since the last sync, and the record after it.
      for (let i = 3; i < 5; i++) await s.appendNoSync(enc(rec(i)));
      await s.sync();
    } finally {
      await s.close();
    }
    fs.powerCut();
    const again = await openS(fs);
    try {
      assert.deepEqual((await drain(again)).values, range(0, 5), 'each record once, in order');
    } finally {
      await again.close();
    }
  });

  it('with sync() as the first call after the failure, the loss is reported there, as before, and appends go on', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      await s.appendNoSync(enc(rec(0)));
      await s.sync();
      fs.inject({ step: 'write:record', error: 'ENOSPC' });
      await s.appendNoSync(enc(rec(1)));
      await assert.rejects(s.sync(), GroupLostError);
      await s.appendNoSync(enc(rec(1)));
      await s.sync();
      assert.deepEqual((await drain(s)).values, range(0, 2));
    } finally {
      await s.close();
    }
  });

  it('concurrent appends racing the failed burst: each either lands in order or rejects, and the stored records are a gapless prefix after a re-append', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const stored: number[] = [];
    try {
      await s.appendNoSync(enc(rec(0)));
      await s.sync();
      stored.push(0);
      fs.inject({ step: 'write:record', error: 'ENOSPC' });
      // Ten appends at once; the first burst write fails at the end of the turn.
      const results = await Promise.allSettled(range(1, 11).map((_, k) => turn().then(() => s.appendNoSync(enc(rec(k + 1))))));
      for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof GroupLostError, String(r.reason));
      await s.sync().catch((e: unknown) => assert.ok(e instanceof GroupLostError));
      // Re-append the whole group since the last good sync, as a producer does.
      for (let i = 1; i < 11; i++) await s.appendNoSync(enc(rec(i)));
      await s.sync();
      for (let i = 1; i < 11; i++) stored.push(i);
    } finally {
      await s.close();
    }
    fs.powerCut();
    const again = await openS(fs);
    try {
      const got = (await drain(again)).values;
      // At least once: whatever survived of the first try comes before the re-append, in order, with no gap.
      const firstTry = got.slice(0, got.length - 10);
      assert.deepEqual(got.slice(got.length - 10), range(1, 11), 'the re-appended group, whole and in order, at the end');
      assert.deepEqual(firstTry, range(0, firstTry.length), 'before it, a gapless prefix');
    } finally {
      await again.close();
    }
  });
});
