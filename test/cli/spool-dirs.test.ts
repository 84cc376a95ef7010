/** push, drain, stats and verify on a spool directory: the format is told from the files. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Spool } from '../../src/spool/index.js';
import { encodeCursor } from '../../src/spool/format.js';
import { ferry, scratch } from './helpers.js';

async function spoolWith(dir: string, lines: string[]): Promise<void> {
  const s = await Spool.open(dir);
  for (const l of lines) await s.append(new TextEncoder().encode(l));
  await s.close();
}

test('push appends lines to an existing spool; drain delivers and commits them; stats says spool', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a', 'b']);
    const pushed = await ferry(['push', sp], { input: 'c\nd\n' });
    assert.equal(pushed.code, 0, pushed.stderr);
    const st = await ferry(['stats', sp, '--json']);
    const stats = JSON.parse(st.stdout.toString()) as { format: string; backlogBytes: number };
    assert.equal(stats.format, 'spool');
    assert.equal(stats.backlogBytes, 4 * 13);
    const drained = await ferry(['drain', sp]);
    assert.equal(drained.code, 0, drained.stderr);
    assert.equal(drained.stdout.toString(), 'a\nb\nc\nd\n');
    const again = await ferry(['drain', sp]);
    assert.equal(again.stdout.toString(), '', 'committed: nothing comes back');
  } finally {
    await cleanup();
  }
});

test('push honours --max-bytes on a spool directory', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a']);
    // Frames: 13 bytes for 'a', 21 for each nine-letter line; a 40-byte cap admits one more.
    const res = await ferry(['push', sp, '--max-bytes', '40', '--batch', '1'], { input: 'bbbbbbbbb\nccccccccc\n' });
    assert.equal(res.code, 1, res.stderr);
    assert.match(res.stderr, /maxBytes 40/);
    assert.equal((await ferry(['drain', sp, '-q'])).stdout.toString(), 'a\nbbbbbbbbb\n');
  } finally {
    await cleanup();
  }
});

test("push refuses a DiskQueue's options on a spool directory (they were taken and ignored), and stores nothing", async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a']);
    for (const [args, named] of [
      [['--max-segments', '2'], '--max-segments'],
      [['--no-sync'], '--no-sync'],
      [['--sync-every', '10'], '--sync-every'],
    ] as const) {
      const res = await ferry(['push', sp, ...args], { input: 'b\n' });
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, new RegExp(`${named}: for a DiskQueue directory; .* is a spool`));
    }
    assert.equal((await ferry(['drain', sp, '-q'])).stdout.toString(), 'a\n');
  } finally {
    await cleanup();
  }
});

test('drain --exec on a spool: a failing command commits nothing of its record', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a', 'b']);
    const res = await ferry(['drain', sp, '--exec', 'read x; [ "$x" = a ]']);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /the record stays queued; 1 records were delivered/);
    const rest = await ferry(['drain', sp]);
    assert.equal(rest.stdout.toString(), 'b\n');
  } finally {
    await cleanup();
  }
});

test('verify reads a spool without changing it, and finds a flipped payload byte', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['hello', 'world']);
    const clean = await ferry(['verify', sp, '--json']);
    assert.equal(clean.code, 0);
    assert.deepEqual(JSON.parse(clean.stdout.toString()), { format: 'spool', ok: true, segments: 1, records: 2, bytes: 10, consumed: 0, cursor: null, cursorFile: 'empty', damage: [] });
    const text = await ferry(['verify', sp]);
    assert.match(text.stdout.toString(), /^ok: spool, 1 segments, 2 intact records \(10 B\), 0 of them consumed, nothing committed yet$/m);
    const seg = join(sp, '00000000000000000001.seg');
    const bytes = readFileSync(seg);
    bytes[8 + 12 + 1]! ^= 0x20;
    writeFileSync(seg, bytes);
    const bad = await ferry(['verify', sp]);
    assert.equal(bad.code, 1);
    assert.match(bad.stdout.toString(), /DAMAGED: spool, 1 segments, 1 intact records/);
    assert.match(bad.stdout.toString(), /segment 1 at byte 8: checksum \(loses 17 bytes\)/);
    assert.ok(readFileSync(seg).equals(bytes), 'verify changed nothing');
  } finally {
    await cleanup();
  }
});

test('verify and open agree on a flipped byte in the newest segment\'s last record: a torn tail, cut at open', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['hello', 'world']);
    const seg = join(sp, '00000000000000000001.seg');
    const bytes = readFileSync(seg);
    bytes[8 + 17 + 12 + 1]! ^= 0x20;
    writeFileSync(seg, bytes);
    const res = await ferry(['verify', sp]);
    assert.equal(res.code, 1);
    assert.match(res.stdout.toString(), /segment 1 at byte 25: torn \(loses 17 bytes\)/);
    const s = await Spool.open(sp);
    assert.equal(s.stats().discardedBytes, 17, 'open cut the same 17 bytes');
    await s.close();
  } finally {
    await cleanup();
  }
});

test('verify reports a cursor that points inside a frame, with what the head then drops, as drain finds it', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    // Frames of 17 bytes at 8, 25, 42 and 59; a checksummed cursor 5 bytes into the second.
    await spoolWith(sp, ['hello', 'world', 'again', 'after']);
    writeFileSync(join(sp, 'cursor'), encodeCursor({ seq: 1, offset: 30 }));
    const res = await ferry(['verify', sp, '--json']);
    assert.equal(res.code, 1, res.stdout.toString());
    const report = JSON.parse(res.stdout.toString()) as { ok: boolean; damage: Array<{ segment: number; position: number; reason: string; lostBytes: number }> };
    assert.equal(report.ok, false);
    // The head reads a length from the middle of 'world': it overruns the file, so the rest of the segment goes.
    assert.deepEqual(report.damage, [{ segment: 1, position: 30, reason: 'cursor', lostBytes: 76 - 30 }]);
    const drained = await ferry(['drain', sp]);
    assert.equal(drained.code, 1);
    assert.match(drained.stderr, /skipped damaged data: .*segment 1 at byte 30/);
    assert.equal(drained.stdout.toString(), '');
    // A cursor on a frame's first byte is no damage.
    await spoolWith(join(dir, 'sp2'), ['hello', 'world']);
    writeFileSync(join(dir, 'sp2', 'cursor'), encodeCursor({ seq: 1, offset: 25 }));
    const ok = await ferry(['verify', join(dir, 'sp2')]);
    assert.equal(ok.code, 0, ok.stdout.toString());
    assert.match(ok.stdout.toString(), /2 intact records \(10 B\), 1 of them consumed/);
  } finally {
    await cleanup();
  }
});

test('verify after a full drain counts the records as consumed, at the cursor', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a', 'b', 'c']);
    assert.equal((await ferry(['drain', sp, '-q'])).code, 0);
    const res = await ferry(['verify', sp]);
    assert.equal(res.code, 0, res.stdout.toString());
    assert.match(res.stdout.toString(), /3 intact records \(3 B\), 3 of them consumed, cursor at segment 1 byte 47/);
  } finally {
    await cleanup();
  }
});

test('a spool held by a running process: stats, push, drain and verify exit 2', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a']);
    const held = await Spool.open(sp);
    try {
      for (const args of [['stats', sp], ['push', sp], ['drain', sp], ['verify', sp]]) {
        const res = await ferry(args, { input: 'x\n' });
        assert.equal(res.code, 2, args.join(' '));
        assert.match(res.stderr, /locked/);
      }
    } finally {
      await held.close();
    }
  } finally {
    await cleanup();
  }
});

test('a directory holding both a DiskQueue and a spool is refused by verify, stats and drain, which read nothing', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const both = join(dir, 'both');
    const { DiskQueue } = await import('../../src/diskqueue/index.js');
    const q = await DiskQueue.open(both);
    for (const l of ['1', '2', '3', '4', '5']) await q.add(new TextEncoder().encode(l));
    await q.close();
    // What a spool left there before opens refused the other format.
    writeFileSync(join(both, 'cursor'), '');
    writeFileSync(join(both, '00000000000000000001.seg'), '');
    for (const cmd of ['verify', 'stats', 'drain']) {
      const res = await ferry([cmd, both]);
      assert.equal(res.code, 2, `${cmd}: ${res.stderr}`);
      assert.match(res.stderr, /holds both a DiskQueue \(data\.00000001\) and a spool \(00000000000000000001\.seg, cursor\)/, cmd);
      assert.equal(res.stdout.toString(), '', cmd);
    }
  } finally {
    await cleanup();
  }
});

test('drain on a spool whose cursor cannot be written (a FIFO under its name) refuses with exit 2 before delivering anything, the records staying queued; stats says so and exits 1, push says so', async () => {
  const { dir, cleanup } = await scratch();
  try {
    const sp = join(dir, 'sp');
    await spoolWith(sp, ['a', 'b']);
    rmSync(join(sp, 'cursor'));
    execFileSync('mkfifo', [join(sp, 'cursor')]);
    // Before: each run delivered the same records again (first exiting 0, later 1 saying they would come again).
    for (const args of [[], ['--follow', '--poll-ms', '20']]) {
      const res = await ferry(['drain', ...args, sp], { timeoutMs: 60_000 });
      assert.equal(res.stdout.toString(), '', `${args}: nothing delivered`);
      assert.equal(res.code, 2, `${args}: ${res.stderr}`);
      assert.match(res.stderr, /cannot write .*cursor .*nothing was delivered.*the records stay queued/);
    }
    // stats says so too, and exits 1 (before: 0, with only "cursorErrors 1" in its table).
    const st = await ferry(['stats', sp], { timeoutMs: 60_000 });
    assert.equal(st.code, 1, st.stderr);
    assert.match(st.stderr, /cannot write .*cursor .*would deliver the same records at every run/);
    assert.match(st.stdout.toString(), /cursorErrors\s+1/);
    // push stores its records (exit 0) and says the same.
    const pushed = await ferry(['push', sp], { input: 'c\n', timeoutMs: 60_000 });
    assert.equal(pushed.code, 0, pushed.stderr);
    assert.match(pushed.stderr, /cannot write .*cursor .*would deliver the same records at every run/);
    // A cursor that is a symbolic link to nothing is named as such (before: "EEXIST: file already exists").
    rmSync(join(sp, 'cursor'));
    symlinkSync(join(dir, 'nowhere'), join(sp, 'cursor'));
    const linked = await ferry(['stats', sp], { timeoutMs: 60_000 });
    assert.equal(linked.code, 1, linked.stderr);
    assert.match(linked.stderr, /cursor is a symbolic link to \S*nowhere, which does not exist/);
    // Mended, a drain delivers every record, the pushed one too: none was lost to the refusals.
    rmSync(join(sp, 'cursor'));
    const mended = await ferry(['drain', sp], { timeoutMs: 60_000 });
    assert.equal(mended.code, 0, mended.stderr);
    assert.equal(mended.stdout.toString(), 'a\nb\nc\n');
  } finally {
    await cleanup();
  }
});
