/**
 * Power cuts at every step. Each scenario is run once to
 * enumerate the file-system steps its operation takes; then, for every step
 * n, it is run again and the durable image "between step n and step n + 1" is
 * reopened (`FaultyFileSystem.crashImage`, which drops every byte and name no
 * completed sync covered) while the original queue runs on untouched.
 *
 * Each cut is taken four ways: dropping every unsynced byte, keeping them
 * all, and keeping every other 512-byte block (even or odd), since a disk
 * writes dirty blocks back in no order.
 *
 * What must hold at every cut: the reopen succeeds; under per-op it reports
 * no damage, whatever blocks survived; what is delivered was added, in order,
 * starting at a commit point; every add that had resolved is delivered
 * (per-op), or at most `syncEvery` of them are lost, each announced by
 * `unsyncedBytes`, and any torn tail is reported as damage, never delivered.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { DiskQueue } from '../../../src/diskqueue/index.js';
import type { Reservation } from '../../../src/diskqueue/reader.js';
import { FaultyFileSystem, openQ, drainAll, val, type Opts } from './helpers.js';
import type { Tear } from '../../../src/storage/faulty.js';

/** Records of `val(i)`: 1 length byte + 5 payload bytes + 8 checksum bytes. */
const FRAME = 14;
/** How many such records fill one 4096-byte segment. */
const PER_SEGMENT = Math.floor(4096 / FRAME);

/**
 * Which unsynced 512-byte blocks survive the cut: none (what a sync covered,
 * and nothing else), all (the page cache reached the disk), or every other
 * one (a disk that wrote back some blocks and not others).
 */
const TEARS: Record<string, Tear | undefined> = {
  none: undefined,
  all: { block: 512, keep: () => true },
  even: { block: 512, keep: (_p, b) => b % 2 === 0 },
  odd: { block: 512, keep: (_p, b) => b % 2 === 1 },
  // A disk (or LazyFS) that kept a record write but not the header write
  // before it: every unsynced 64-byte block but the header's.
  records: { block: 64, keep: (_p, b) => b > 0 },
};

/**
 * When a created file's name becomes durable: at the directory sync (what
 * POSIX promises), or at creation (what ext4 often does). The second makes a
 * cut during a segment roll leave the new file with whichever of its blocks
 * reached the disk.
 */
const NAMINGS = ['dir-sync', 'create'] as const;
type Naming = (typeof NAMINGS)[number];

interface World {
  q: DiskQueue<string>;
  /** Values whose add was started, in order. */
  attempted: string[];
  /** Values whose add resolved, in order. */
  resolved: string[];
  /** Values whose commit (of everything up to and including them) resolved. */
  committedThrough: number;
  held: Reservation<string>[];
}

interface Scenario {
  name: string;
  opts: Opts;
  setup(w: World): Promise<void>;
  op(w: World): Promise<void>;
  /** Index of the first record a reopen may deliver, given whether the op's commit is durable. */
  replayFrom(w: World, opCommitted: boolean): number;
}

async function add(w: World, v: string): Promise<void> {
  w.attempted.push(v);
  await w.q.add(v);
  w.resolved.push(v);
}

async function addN(w: World, n: number, pad = 0): Promise<void> {
  for (let i = 0; i < n; i++) await add(w, val(w.attempted.length).padEnd(pad, '.'));
}

/** Framed size of the 300-byte values of the torn-tail scenario. */
const BIG_FRAME = 2 + 300 + 8;

async function reserveN(w: World, n: number): Promise<void> {
  const r = w.q.reader();
  for (let i = 0; i < n; i++) w.held.push((await r.tryReserve())!);
}

const scenarios: Scenario[] = [
  {
    name: 'add (per-op)',
    opts: {},
    setup: (w) => addN(w, 3),
    op: (w) => addN(w, 1),
    replayFrom: () => 0,
  },
  {
    name: 'add (syncEvery 5)',
    opts: { syncEvery: 5 },
    setup: (w) => addN(w, 2),
    op: (w) => addN(w, 12),
    replayFrom: () => 0,
  },
  {
    // Records of 310 framed bytes span 512-byte blocks, so the header's
    // block can survive a cut without the records it names.
    name: 'add, 300-byte records (syncEvery 5)',
    opts: { syncEvery: 5 },
    setup: (w) => addN(w, 2, 300),
    op: (w) => addN(w, 9, 300),
    replayFrom: () => 0,
  },
  {
    name: 'commit (per-op)',
    opts: {},
    async setup(w) {
      await addN(w, 5);
      await reserveN(w, 3);
    },
    async op(w) {
      await w.q.reader().commit(w.held[1]!.offset);
      w.committedThrough = 2;
    },
    replayFrom: (_w, durable) => (durable ? 2 : 0),
  },
  {
    name: 'segment roll (per-op)',
    opts: {},
    setup: (w) => addN(w, PER_SEGMENT),
    op: (w) => addN(w, 2),
    replayFrom: () => 0,
  },
  {
    name: 'reclaim (per-op)',
    opts: {},
    async setup(w) {
      await addN(w, PER_SEGMENT + 2);
      await reserveN(w, PER_SEGMENT);
    },
    async op(w) {
      await w.q.reader().commit(w.held[PER_SEGMENT - 1]!.offset);
      w.committedThrough = PER_SEGMENT;
    },
    replayFrom: (_w, durable) => (durable ? PER_SEGMENT : 0),
  },
];

/**
 * How reclaimed segments are unlinked: on the thread pool, as on the real file
 * system (`unlinkAsync`), or synchronously, as on a file system without it.
 */
const UNLINKS = ['async', 'sync'] as const;
type Unlinks = (typeof UNLINKS)[number];

async function prepare(s: Scenario, names: Naming = 'dir-sync', unlinks: Unlinks = 'async'): Promise<{ fs: FaultyFileSystem; w: World }> {
  const fs = new FaultyFileSystem({ names });
  if (unlinks === 'sync') fs.unlinkAsync = undefined;
  const w: World = { q: await openQ(fs, s.opts), attempted: [], resolved: [], committedThrough: 0, held: [] };
  await s.setup(w);
  return { fs, w };
}

describe('power cut at every step', () => {
  for (const s of scenarios) for (const naming of NAMINGS) for (const unlinks of UNLINKS) {
    it(`${s.name}, names durable at ${naming}, ${unlinks} unlinks`, async (t) => {
      // Dry run: enumerate the steps of the operation.
      const dry = await prepare(s, naming, unlinks);
      const from = dry.fs.trace.length;
      await s.op(dry.w);
      const opSteps = dry.fs.trace.slice(from);
      await dry.w.q.close();
      assert.ok(opSteps.some((x) => x.startsWith('sync:')), `${s.name} syncs: ${opSteps.join(', ')}`);
      const syncEvery = s.opts.syncEvery ?? 1;

      for (let k = 0; k <= opSteps.length; k++) {
        await t.test(`cut after step ${k}${k ? ` (${opSteps[k - 1]})` : ''}`, async () => {
          const { fs, w } = await prepare(s, naming, unlinks);
          let images: Array<{ tear: string; fs: FaultyFileSystem }> = [];
          let resolvedAtCut: string[] = [];
          let committedAtCut = 0;
          let unsyncedAtCut = 0;
          const cut = () => {
            images = Object.entries(TEARS).map(([tear, t]) => ({ tear, fs: fs.crashImage(t) }));
            resolvedAtCut = [...w.resolved];
            committedAtCut = w.committedThrough;
            unsyncedAtCut = w.q.stats().unsyncedBytes;
          };
          const base = fs.steps;
          if (k === 0) cut();
          fs.onStep = (n) => {
            if (n === base + k) cut();
          };
          await s.op(w);
          fs.onStep = undefined;
          await w.q.close();
          assert.equal(images.length, Object.keys(TEARS).length, `step ${k} was reached`);

          for (const image of images) {
            const msg = (what: string) => `${what} (unsynced blocks: ${image.tear})`;
            const q = await openQ(image.fs, s.opts);
            const got = await drainAll(q.reader());
            const st = q.stats();
            await q.close();
            // Per-op orders every header after the data it publishes, so no
            // mix of surviving blocks is damage; under a batched policy a torn
            // tail may be, and is caught by the record checksums.
            const clean = syncEvery <= 1 || image.tear === 'none' || image.tear === 'all' || image.tear === 'records';
            if (clean) {
              assert.deepEqual(got.errors, [], msg('no damage'));
              assert.equal(st.corruptions, 0, msg('no damage'));
            }
            assert.equal(got.errors.length, st.corruptions, msg('every counted event is reported'));
            if (clean) assert.equal(st.lostRecords + st.lostBytes + st.lostSegments, 0, msg('nothing counted as lost'));

            // In add order, from a commit point, nothing never added.
            const idx = got.values.map((v) => w.attempted.indexOf(v));
            assert.ok(idx.every((i) => i >= 0), msg('nothing that was never added'));
            assert.ok(idx.every((i, j) => j === 0 || i > idx[j - 1]!), msg('in order'));
            const from = [s.replayFrom(w, false), s.replayFrom(w, true)];
            const start = from.find((i) => idx.length === 0 || idx[0] === i || (!clean && idx[0]! >= i));
            assert.notEqual(start, undefined, msg(`delivery starts at a commit point: ${got.values[0]}`));
            if (committedAtCut > 0 && idx.length > 0) assert.ok(idx[0]! >= s.replayFrom(w, true), msg('a resolved commit is not undone'));
            if (clean) assert.deepEqual(got.values, w.attempted.slice(start, start! + got.values.length), msg('a contiguous run'));

            // Every resolved add is delivered, or (batched) at most syncEvery lost, all announced.
            const mustHave = resolvedAtCut.slice(start!);
            const missing = mustHave.filter((v) => !got.values.includes(v));
            if (syncEvery <= 1) {
              assert.deepEqual(missing, [], msg('every add that resolved survives'));
            } else {
              const frame = w.attempted[0]!.length > 5 ? BIG_FRAME : FRAME;
              const exposed = resolvedAtCut.slice(Math.max(0, resolvedAtCut.length - Math.ceil(unsyncedAtCut / frame)));
              assert.ok(missing.length <= syncEvery, msg(`${missing.length} lost > syncEvery ${syncEvery}`));
              assert.ok(missing.every((v) => exposed.includes(v)), msg(`lost ${missing}; unsyncedBytes said ${unsyncedAtCut}`));
            }
          }
        });
      }
    });
  }

  it('covers every step kind of the roll and reclaim paths', async () => {
    // The enumeration above is only as good as the steps it saw.
    const s = scenarios.find((x) => x.name.startsWith('segment roll'))!;
    const { fs, w } = await prepare(s);
    const from = fs.trace.length;
    await s.op(w);
    const kinds = new Set(fs.trace.slice(from).map((x) => x.split(' ')[0]));
    for (const k of ['open', 'write:allocate', 'write:header', 'write:record', 'sync:data', 'sync:dir', 'sync:header']) assert.ok(kinds.has(k), k);
    await w.q.close();
    const r = scenarios.find((x) => x.name.startsWith('reclaim'))!;
    const b = await prepare(r);
    const from2 = b.fs.trace.length;
    await r.op(b.w);
    assert.ok(b.fs.trace.slice(from2).some((x) => x.startsWith('unlink data.00000001')));
    await b.w.q.close();
  });
});
