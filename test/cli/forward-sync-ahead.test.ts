/**
 * `ferry forward`'s intake keeps reading while a group's fdatasync runs. A
 * failed fdatasync (EIO injected through the file-system seam) must still end
 * the intake with exit 1, count as accepted only lines whose sync resolved,
 * and leave every accepted line delivered, in order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { forwardFailing } from './forward-failing.js';
import { scratch } from './helpers.js';

test('a failed fdatasync with groups read ahead ends forward; accepted lines are whole groups, all delivered', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = await scratch();
  try {
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${String(i).padStart(4, '0')}`);
    const fs = new FaultyFileSystem();
    // Three segment syncs succeed, the fourth fails (and every one after it).
    fs.inject({ step: 'sync:data', error: 'EIO', after: 3, times: Infinity });
    const { err, delivered } = await forwardFailing(dir, lines, fs, 20);
    const accepted = Number(/(\d+) lines were accepted/.exec(err.message)?.[1]);
    assert.ok(accepted > 0 && accepted < lines.length, `some lines were accepted, not all: ${err.message}`);
    assert.equal(accepted % 20, 0, `whole groups of --sync-batch lines: ${accepted}`);
    assert.deepEqual(delivered.slice(0, accepted), lines.slice(0, accepted), 'every accepted line was delivered, in order');
  } finally {
    await cleanup();
  }
});

test('one failed fdatasync among groups read ahead: the accepted count stops at it, though later groups synced', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = await scratch();
  try {
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${String(i).padStart(4, '0')}`);
    const fs = new FaultyFileSystem();
    // The fourth segment sync fails (the disk filled up, say), and the syncs
    // after it succeed (the sender's commits freed space): the group it
    // carried is cut, while the groups read ahead behind it can still land.
    fs.inject({ step: 'sync:data', error: 'ENOSPC', after: 3, times: 1 });
    const { err, delivered } = await forwardFailing(dir, lines, fs, 20);
    const accepted = Number(/the first (\d+) lines were accepted/.exec(err.message)?.[1]);
    assert.ok(accepted > 0 && accepted < lines.length, `some lines were accepted, not all: ${err.message}`);
    assert.doesNotMatch(err.message, /not stored/, 'lines after the count may have been stored');
    // The count is a prefix of the input: a rerun from line `accepted` on
    // loses nothing. Lines after it may have been delivered as well (they
    // arrive twice then), and the cut group's lines may be missing.
    assert.deepEqual(delivered.slice(0, accepted), lines.slice(0, accepted), 'every accepted line was delivered, in order');
  } finally {
    await cleanup();
  }
});
