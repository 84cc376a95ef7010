import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { readFile, writeFile, truncate, open, copyFile, readdir, unlink, mkdir, rm, symlink } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { DEFAULT_SEGMENT_SIZE, DiskQueue, LockedError, verifyQueue, type VerifyDamage } from '../../src/diskqueue/index.js';
import { decodeHeader, encodeHeader } from '../../src/diskqueue/format.js';
import { Spool } from '../../src/spool/index.js';
import { ferry, scratch } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());
let n = 0;

const SEGMENT_SIZE = 4096;
const HEADER = 64;
// Records "alpha", "bravo", "charlie": each is a 1-byte length, the payload and an 8-byte checksum.
const R1 = HEADER; // alpha: 64..78
const R2 = R1 + 1 + 5 + 8; // bravo: 78..92, payload at 79
const R3 = R2 + 1 + 5 + 8; // charlie: 92..108
const END = R3 + 1 + 7 + 8; // the write cursor
const FILE_SIZE = HEADER + SEGMENT_SIZE;

/** A closed queue holding alpha, bravo, charlie (the first `taken` of them committed). */
async function makeQueue(taken = 0): Promise<{ dir: string; seg: string }> {
  const dir = join(tmp.dir, `q${++n}`);
  const q = await DiskQueue.open(dir, { segmentSize: SEGMENT_SIZE });
  for (const word of ['alpha', 'bravo', 'charlie']) await q.add(Buffer.from(word));
  const r = q.reader();
  for (let i = 0; i < taken; i++) assert.ok(await r.tryTake());
  await q.close();
  return { dir, seg: join(dir, 'data.00000001') };
}

async function patch(path: string, at: number, bytes: number[]): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    await fh.write(Buffer.from(bytes), 0, bytes.length, at);
  } finally {
    await fh.close();
  }
}

async function xorByte(path: string, at: number): Promise<void> {
  const buf = await readFile(path);
  await patch(path, at, [buf[at]! ^ 0xff]);
}

/** Rewrites the header of `path` with `change` applied and a valid checksum. */
async function rewriteHeader(path: string, change: (h: ReturnType<typeof headerOf>) => void): Promise<void> {
  const buf = await readFile(path);
  const h = headerOf(buf);
  change(h);
  await patch(path, 0, [...encodeHeader(h)]);
}
function headerOf(buf: Buffer) {
  const res = decodeHeader(buf.subarray(0, HEADER));
  assert.ok(res.ok);
  return res.header;
}

test('a clean queue verifies ok, committed records included', async () => {
  const { dir } = await makeQueue(1);
  const report = await verifyQueue(dir);
  assert.deepEqual(report, { ok: true, segments: 1, records: 3, bytes: END - HEADER, committedRecords: 1, damage: [] });
});

// One row per kind of damage: what is changed, what verify must report, how many records stay intact.
const cases: Array<{ name: string; damage(seg: string, dir: string): Promise<void>; expect: VerifyDamage[]; records: number }> = [
  {
    name: 'payload byte flipped: that record only, the walk continues after it',
    damage: (seg) => xorByte(seg, R2 + 1),
    expect: [{ segment: 1, position: R2, reason: 'checksum', lostBytes: R3 - R2, lostRecords: 1 }],
    records: 2,
  },
  {
    name: 'stored checksum flipped: same as a payload flip',
    damage: (seg) => xorByte(seg, R3 - 1),
    expect: [{ segment: 1, position: R2, reason: 'checksum', lostBytes: R3 - R2, lostRecords: 1 }],
    records: 2,
  },
  {
    name: 'length prefix runs past the write cursor: rest of the segment',
    damage: (seg) => patch(seg, R2, [0x7f]),
    expect: [{ segment: 1, position: R2, reason: 'length', lostBytes: END - R2, lostRecords: 2 }],
    records: 1,
  },
  {
    name: 'malformed length prefix (11 continuation bytes): rest of the segment',
    damage: (seg) => patch(seg, R1, Array(11).fill(0xff)),
    expect: [{ segment: 1, position: R1, reason: 'length', lostBytes: END - R1, lostRecords: 3 }],
    records: 0,
  },
  {
    name: 'file cut inside the last record: shorter than its write cursor',
    damage: (seg) => truncate(seg, R3 + 4),
    expect: [{ segment: 1, position: R3, reason: 'truncated', lostBytes: END - R3, lostRecords: 1 }],
    records: 2,
  },
  {
    name: 'file cut at a record boundary',
    damage: (seg) => truncate(seg, R2),
    expect: [{ segment: 1, position: R2, reason: 'truncated', lostBytes: END - R2, lostRecords: 2 }],
    records: 1,
  },
  {
    name: 'bad magic over intact records: an open salvages them',
    damage: (seg) => xorByte(seg, 0),
    expect: [{ segment: 1, position: 0, reason: 'header-magic', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
  {
    name: 'bad magic and no intact record: the whole segment',
    damage: async (seg) => {
      await xorByte(seg, 0);
      await xorByte(seg, R1 + 3); // alpha's payload
    },
    // Nothing survives to estimate from, and no sound header gives the geometry: one record, a default segment's bytes.
    expect: [{ segment: 1, position: 0, reason: 'segment-magic', lostBytes: DEFAULT_SEGMENT_SIZE, lostRecords: 1 }],
    records: 0,
  },
  {
    name: 'unknown format version',
    damage: (seg) => rewriteHeader(seg, (h) => (h.version = 9)),
    expect: [{ segment: 1, position: 0, reason: 'segment-version', lostBytes: FILE_SIZE }],
    records: 0,
  },
  {
    name: 'version byte flipped: the checksum fails, so it is a torn header, not a foreign one',
    damage: (seg) => patch(seg, 40, [9]),
    expect: [{ segment: 1, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
  {
    name: 'short header',
    damage: (seg) => truncate(seg, 30),
    expect: [{ segment: 1, position: 0, reason: 'segment-short', lostBytes: DEFAULT_SEGMENT_SIZE, lostRecords: 1 }],
    records: 0,
  },
  {
    name: 'torn header checksum: records still counted, the open would rebuild it',
    damage: (seg) => xorByte(seg, 60),
    expect: [{ segment: 1, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
  {
    name: 'header claims more records than the segment holds',
    damage: (seg) => rewriteHeader(seg, (h) => (h.writtenCount = 4)),
    expect: [{ segment: 1, position: END, reason: 'count-mismatch', lostBytes: 0, lostRecords: 1 }],
    records: 3,
  },
  {
    name: 'commit cursor inside a record',
    damage: (seg) => rewriteHeader(seg, (h) => ((h.commitCursor = R2 + 3), (h.committedCount = 1))),
    expect: [{ segment: 1, position: R2 + 3, reason: 'commit-cursor', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
  {
    name: 'committed count disagrees with the commit cursor',
    damage: (seg) => rewriteHeader(seg, (h) => ((h.commitCursor = R2), (h.committedCount = 2))),
    expect: [{ segment: 1, position: R2, reason: 'commit-cursor', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
  {
    name: 'checksummed header with impossible cursors over intact records: an open salvages them',
    damage: (seg) => rewriteHeader(seg, (h) => (h.commitCursor = END + 100)),
    expect: [{ segment: 1, position: 0, reason: 'header-insane', lostBytes: 0, lostRecords: 0 }],
    records: 3,
  },
];

for (const c of cases) {
  test(`verify: ${c.name}`, async () => {
    const { dir, seg } = await makeQueue();
    await c.damage(seg, dir);
    const before = await readFile(seg);
    const report = await verifyQueue(dir);
    assert.deepEqual(report.damage, c.expect);
    assert.equal(report.records, c.records);
    assert.equal(report.ok, c.expect.length === 0);
    assert.ok((await readFile(seg)).equals(before), 'verify changed nothing');
  });
}

test('a zero-length last segment is a cut-short creation, not damage; one in the middle is', async () => {
  const { dir } = await makeQueue();
  await writeFile(join(dir, 'data.00000002'), '');
  assert.deepEqual((await verifyQueue(dir)).damage, []);
  await writeFile(join(dir, 'data.00000003'), '');
  const report = await verifyQueue(dir);
  assert.equal(report.segments, 3);
  // Estimated from segment 1, the nearest survivor before it, as the open estimates it.
  assert.deepEqual(report.damage, [{ segment: 2, position: 0, reason: 'segment-zero', lostBytes: END - HEADER, lostRecords: 3 }]);
});

test('progress is reported in data bytes up to the total', async () => {
  const { dir } = await makeQueue();
  const seen: Array<[number, number]> = [];
  await verifyQueue(dir, { onProgress: (done, total) => seen.push([done, total]) });
  assert.deepEqual(seen.at(-1), [END - HEADER, END - HEADER]);
});

test('verifyQueue refuses a directory a queue holds', async () => {
  const { dir } = await makeQueue();
  const q = await DiskQueue.open(dir, { segmentSize: SEGMENT_SIZE });
  try {
    await assert.rejects(verifyQueue(dir), LockedError);
  } finally {
    await q.close();
  }
});

test('ferry verify: exit 0 when clean, 1 with the damage listed after a payload flip, files unchanged', async () => {
  const dir = join(tmp.dir, 'cli');
  const push = await ferry(['push', dir, '--segment-size', String(SEGMENT_SIZE), '-q'], { input: 'alpha\nbravo\ncharlie\n' });
  assert.equal(push.code, 0, push.stderr);
  const clean = await ferry(['verify', dir]);
  assert.equal(clean.code, 0, clean.stderr);
  assert.equal(clean.stdout.toString(), 'ok: 1 segments, 3 intact records (44 B), 0 committed\n');

  const seg = join(dir, 'data.00000001');
  await xorByte(seg, R2 + 1);
  const before = await readFile(seg);
  const human = await ferry(['verify', dir]);
  assert.equal(human.code, 1);
  assert.equal(
    human.stdout.toString(),
    `DAMAGED: 1 segments, 2 intact records (30 B), 0 committed\n  segment 1 at byte ${R2}: checksum (loses 1 records, 14 bytes)\n`,
  );
  const json = await ferry(['verify', dir, '--json']);
  assert.equal(json.code, 1);
  const report = JSON.parse(json.stdout.toString());
  assert.equal(report.ok, false);
  assert.deepEqual(report.damage, [{ segment: 1, position: R2, reason: 'checksum', lostBytes: 14, lostRecords: 1 }]);
  assert.ok((await readFile(seg)).equals(before), 'verify changed nothing');

  // A drain steps past the damage, reports it and exits 1; the intact records come out.
  const drained = await ferry(['drain', dir]);
  assert.equal(drained.code, 1);
  assert.equal(drained.stdout.toString(), 'alpha\ncharlie\n');
  assert.match(drained.stderr, /skipped damaged data: corrupt data \(checksum\) in segment 1 at byte 78/);
  assert.match(drained.stderr, /1 damaged span\(s\) were skipped \(1 records lost\)/);
});

test('ferry verify: a run of missing segments is one line, and its records count in the summary', async () => {
  const { dir, seg } = await makeQueue();
  // A stray copy far above: numbers 2 to 8 are missing, each estimated from segment 1 (3 records).
  await writeFile(join(dir, 'data.00000009'), await readFile(seg));
  const res = await ferry(['verify', dir]);
  assert.equal(res.code, 1);
  assert.equal(
    res.stdout.toString(),
    `DAMAGED: 2 segments, 6 intact records (88 B), 0 committed\n  segments 2-8 at byte 0: segment-missing (loses 21 records, ${7 * (END - HEADER)} bytes)\n`,
  );
  assert.match(res.stderr, /1 damaged span\(s\), about 21 records lost/);
});

test('ferry verify: a segment lost whole counts the records the open estimates, not 0', async () => {
  const { dir } = await makeQueue();
  await writeFile(join(dir, 'data.00000002'), '');
  await copyFile(join(dir, 'data.00000001'), join(dir, 'data.00000003'));
  const res = await ferry(['verify', dir]);
  assert.equal(res.code, 1);
  assert.match(res.stdout.toString(), /segment 2 at byte 0: segment-zero \(loses 3 records, 44 bytes\)/);
  assert.match(res.stderr, /about 3 records lost/);
});

test('ferry verify: the first record taken, then its length prefix damaged: exit 0, as a drain loses nothing', async () => {
  const { dir, seg } = await makeQueue(1);
  await patch(seg, R1, [0x7f]);
  const res = await ferry(['verify', dir]);
  assert.equal(res.code, 0, res.stdout.toString() + res.stderr);
  const drained = await ferry(['drain', dir]);
  assert.equal(drained.code, 0, drained.stderr);
  assert.equal(drained.stdout.toString(), 'bravo\ncharlie\n');
});

test('ferry verify of a path that is not a directory exits 2', async () => {
  const file = join(tmp.dir, 'plain-file');
  await writeFile(file, 'x');
  const res = await ferry(['verify', file]);
  assert.equal(res.code, 2);
  assert.equal(res.stderr, `ferry: no queue at ${file}: not a directory (a regular file)\n`);
});

test('ferry verify, stats and drain on a queue whose segment is a FIFO fail with exit 2, naming it, instead of waiting for a writer or writing into it, on both formats; so does a directory, a symbolic link to a missing file and a socket', async () => {
  const { dir, seg } = await makeQueue();
  const spoolDir = join(tmp.dir, 'fifo-spool');
  const spool = await Spool.open(spoolDir);
  await spool.append(Buffer.from('a'));
  await spool.close();
  const spoolSeg = join(spoolDir, (await readdir(spoolDir)).find((f) => f !== 'cursor' && !f.startsWith('.') && !f.includes('lock'))!);
  for (const path of [seg, spoolSeg]) {
    await unlink(path);
    execFileSync('mkfifo', [path]);
  }
  for (const d of [dir, spoolDir]) {
    for (const cmd of ['verify', 'stats', 'drain']) {
      // The kill only catches a hang: before, verify waited in open(2) for a writer that never came.
      const res = await ferry([cmd, d], { timeoutMs: 60_000 });
      assert.equal(res.code, 2, `${cmd} ${d}: ${res.stderr}`);
      assert.match(res.stderr, /is not a regular file \(a FIFO\)/, `${cmd} ${d}`);
    }
  }
  // A directory under the name: every command names it the same way (stats and drain open it for writing, where it fails first).
  for (const path of [seg, spoolSeg]) {
    await unlink(path);
    await mkdir(path);
  }
  for (const d of [dir, spoolDir]) {
    for (const cmd of ['verify', 'stats', 'drain']) {
      const res = await ferry([cmd, d], { timeoutMs: 60_000 });
      assert.equal(res.code, 2, `${cmd} ${d}: ${res.stderr}`);
      assert.match(res.stderr, /is not a regular file \(a directory\)/, `${cmd} ${d}`);
    }
  }
  // A symbolic link to a missing file: named as such, with its target (before: the raw ENOENT of the link's own name).
  for (const path of [seg, spoolSeg]) {
    await rm(path, { recursive: true });
    await symlink(join(tmp.dir, 'no-such-target'), path);
  }
  for (const d of [dir, spoolDir]) {
    for (const cmd of ['verify', 'stats', 'drain']) {
      const res = await ferry([cmd, d], { timeoutMs: 60_000 });
      assert.equal(res.code, 2, `${cmd} ${d}: ${res.stderr}`);
      assert.match(res.stderr, /is a symbolic link to \S*no-such-target, which does not exist/, `${cmd} ${d}`);
    }
  }
  // A Unix socket: open(2) fails with ENXIO, before the raw errno text.
  const servers: Server[] = [];
  try {
    for (const path of [seg, spoolSeg]) {
      await rm(path);
      const server = createServer().listen(path);
      servers.push(server);
      await once(server, 'listening');
    }
    for (const d of [dir, spoolDir]) {
      for (const cmd of ['verify', 'stats', 'drain']) {
        const res = await ferry([cmd, d], { timeoutMs: 60_000 });
        assert.equal(res.code, 2, `${cmd} ${d}: ${res.stderr}`);
        assert.match(res.stderr, /is not a regular file \(a socket\)/, `${cmd} ${d}`);
      }
    }
  } finally {
    for (const server of servers) server.close();
  }
});

test('ferry push, verify, stats and drain on a path that is a file, or a link to nothing, say so (exit 2) and leave it alone', async () => {
  const file = join(tmp.dir, 'plain-file');
  await writeFile(file, 'mine');
  const res = await ferry(['push', file], { input: 'a\n' });
  assert.equal(res.code, 2, res.stderr);
  assert.match(res.stderr, /plain-file exists and is not a directory \(a regular file\)/);
  assert.equal(await readFile(file, 'utf8'), 'mine');
  // The commands that only read say what is there too; a link to nothing is named as one.
  const link = join(tmp.dir, 'dangling-dir');
  await symlink(join(tmp.dir, 'no-such-dir'), link);
  for (const cmd of ['verify', 'stats', 'drain']) {
    const onFile = await ferry([cmd, file]);
    assert.equal(onFile.code, 2, onFile.stderr);
    assert.match(onFile.stderr, /not a directory \(a regular file\)/, cmd);
    const onLink = await ferry([cmd, link]);
    assert.equal(onLink.code, 2, onLink.stderr);
    assert.match(onLink.stderr, /is a symbolic link to \S*no-such-dir, which does not exist/, cmd);
  }
  // So do the commands that create a queue (before: "ENOENT: no such file or directory, mkdir", naming the link as missing).
  for (const args of [['push', link], ['forward', '--dir', link, '--exec', 'cat']]) {
    const res = await ferry(args, { input: 'a\n' });
    assert.equal(res.code, 2, `${args}: ${res.stderr}`);
    assert.match(res.stderr, /is a symbolic link to \S*no-such-dir, which does not exist/, args.join(' '));
  }
});
