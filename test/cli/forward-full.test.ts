/**
 * `ferry forward` when the spool's disk fills up (ENOSPC injected through the
 * file-system seam): every accepted line is still delivered, the command
 * ends with exit 1, and the message names the cause, the directory and what
 * to do.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { forward } from '../../src/cli/forward.js';
import { forwardFailing } from './forward-failing.js';
import { scratch } from './helpers.js';
import { orHang } from '../stores/helpers.js';

test('forward on a full disk delivers what it accepted, exits 1 and says the disk is full', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = await scratch();
  try {
    const lines = Array.from({ length: 400 }, (_, i) => `line ${String(i).padStart(4, '0')} ${'x'.repeat(40)}`);
    const fs = new FaultyFileSystem();
    fs.capacity = 8 * 1024; // room for the cursor, the header and about a hundred lines
    const { err, delivered } = await forwardFailing(dir, lines, fs, 20);
    assert.match(err.message, /ENOSPC/);
    assert.match(err.message, /\/spool/);
    assert.match(err.message, /disk .*full|no space/i);
    assert.match(err.message, /free (some )?space/i, 'says what to do');
    const accepted = Number(/(\d+) lines were accepted/.exec(err.message)?.[1]);
    assert.ok(accepted > 0 && accepted < lines.length, `some lines were accepted: ${err.message}`);
    assert.deepEqual(delivered.slice(0, accepted), lines.slice(0, accepted), 'every accepted line was delivered, in order');
  } finally {
    await cleanup();
  }
});

test('a staged write refused mid-group: every line forward counts as accepted is delivered (none of the cut group is counted)', { timeout: 60_000 }, async () => {
  const { dir, cleanup } = await scratch();
  try {
    const lines = Array.from({ length: 8000 }, (_, i) => `line ${String(i).padStart(4, '0')} ${'x'.repeat(90)}`);
    const fs = new FaultyFileSystem();
    // Some bursts of record writes go through, then one fails: a group is cut part-way.
    fs.inject({ step: 'write:record', error: 'ENOSPC', after: 1, times: Infinity });
    const { err, delivered } = await forwardFailing(dir, lines, fs, 2000);
    const accepted = Number(/(\d+) lines were accepted/.exec(err.message)?.[1]);
    assert.ok(Number.isInteger(accepted), err.message);
    assert.deepEqual(delivered.slice(0, accepted), lines.slice(0, accepted), `every accepted line was delivered, in order: ${err.message}`);
    assert.ok(delivered.length >= accepted);
  } finally {
    await cleanup();
  }
});

test('a full spool (--max-bytes) wakes its intake with each commit of the sender, not with its next look', { timeout: 120_000 }, async () => {
  const { dir, cleanup } = await scratch();
  try {
    // 300 lines of 1 KiB through a spool capped at about 8 of them: the
    // intake finds it full again and again. Its look for room comes only
    // every 10 minutes here, so the run ends in time only if the sender's
    // commits wake it.
    const lines = Array.from({ length: 300 }, (_, i) => `line ${String(i).padStart(4, '0')} ${'x'.repeat(1014)}`);
    const input = join(dir, 'in.txt');
    writeFileSync(input, `${lines.join('\n')}\n`);
    const out = join(dir, 'out.txt');
    const status = await orHang(
      forward(input, { dir: join(dir, 'spool'), exec: `cat >> ${out}`, batch: 4, maxBytes: 8 * 1040, segmentBytes: 4 * 1040, quiet: true, fullPollMs: 600_000 }),
      'a forward whose full intake waits for commits',
    );
    assert.equal(status, 0);
    assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), lines, 'every line, once, in order');
  } finally {
    await cleanup();
  }
});
