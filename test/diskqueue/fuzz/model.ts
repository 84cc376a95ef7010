/**
 * A program of queue operations, run against a DiskQueue on the
 * fault-injecting file system and checked against a reference model of what
 * the queue owes its caller. Shared by the property test and its corpus.
 *
 * The model knows every value it added (values are `r` + a 6-digit id, so a
 * delivered value names the add it came from, and any other bytes are
 * corrupt output), which adds resolved, which commits resolved, and what a
 * power cut may take under a batched policy (the `unsyncedBytes` the queue
 * announced). Invariants, checked as the program runs and after a final
 * drain:
 *
 * - every delivered value is exactly a value that was added;
 * - within one open, deliveries come in add order;
 * - without damage, nothing durably committed is delivered again, and every
 *   durably added record is delivered: no loss is counted and no
 *   CorruptError is seen;
 * - with damage, every durably added record that was never delivered is
 *   covered by a counted loss, and after a full drain every counted event was
 *   surfaced by exactly one CorruptError;
 * - the queue never wedges: the final drain ends with an empty backlog;
 * - open never throws on damage.
 */
import assert from 'node:assert/strict';
import { HEADER_SIZE, decodeHeader } from '../../../src/diskqueue/format.js';
import { CorruptError, type DiskQueue } from '../../../src/diskqueue/index.js';
import type { Reservation } from '../../../src/diskqueue/reader.js';
import { FaultyFileSystem, openQ, segPath, segNumbers, type Opts } from '../faults/helpers.js';
import type { Tear } from '../../../src/storage/faulty.js';

export type Cmd =
  | { op: 'add'; n: number }
  | { op: 'batch'; n: number }
  | { op: 'reserve'; n: number }
  | { op: 'take'; n: number }
  | { op: 'commit' }
  | { op: 'ack'; i: number }
  | { op: 'rewind' }
  | { op: 'sync' }
  | { op: 'reopen' }
  | { op: 'crash' }
  | { op: 'powerCut'; tear?: TearKind }
  | { op: 'flip'; seg: number; header: boolean; at: number; mask: number };

export type Policy = 'perOp' | 'every4';

/** Which unsynced 512-byte blocks a power cut leaves behind. */
export type TearKind = 'none' | 'all' | 'even' | 'odd';
const TEARS: Record<TearKind, Tear | undefined> = {
  none: undefined,
  all: { block: 512, keep: () => true },
  even: { block: 512, keep: (_p, b) => b % 2 === 0 },
  odd: { block: 512, keep: (_p, b) => b % 2 === 1 },
};

export interface Program {
  policy: Policy;
  cmds: Cmd[];
}

/** Every value is 7 bytes, so every record frames to 16 and 256 fill a segment. */
const FRAME = 1 + 7 + 8;
const PER_SEGMENT = Math.floor(4096 / FRAME);
const fmt = (id: number) => `r${String(id).padStart(6, '0')}`;

const policyOpts = (p: Policy): Opts => (p === 'perOp' ? {} : { syncEvery: 4 });

class Run {
  fs = new FaultyFileSystem();
  q!: DiskQueue<string>;
  nextId = 0;
  /** Ids whose add resolved. */
  resolved: number[] = [];
  /** Ids a power cut was allowed to take (announced by `unsyncedBytes`). */
  mayBeLost = new Set<number>();
  delivered = new Set<number>();
  lastInEpoch = -1;
  held: Array<{ id: number; offset: bigint }> = [];
  /** Highest id whose commit (or ack of a contiguous prefix) is durable; without damage nothing at or below it may be delivered again. */
  durableCommit = -1;
  damaged = false;
  /** Flips per segment number: in its header, and anywhere. */
  flips = new Map<number, { header: number; all: number }>();
  corruptSeen = 0;
  /** Losses the queue counted, summed over every open. */
  counted = 0;
  opts: Opts;

  constructor(readonly policy: Policy) {
    this.opts = policyOpts(policy);
  }

  async open(): Promise<void> {
    this.q = await openQ(this.fs, this.opts); // never throws on damage
    this.lastInEpoch = -1;
    this.held = [];
    this.corruptSeen = 0;
  }

  /** Folds this open's loss counters into the running total. */
  endEpoch(): void {
    const st = this.q.stats();
    // A dropped segment's header cannot be trusted, so the queue counts only
    // the records in it that still vouch for themselves; a foreign segment's
    // records are not counted at all. Either may have held a whole segment.
    this.counted += st.lostRecords + (st.lostSegments + st.foreignSegments) * PER_SEGMENT;
    if (st.corruptions + st.foreignSegments > 0) this.damaged = true;
  }

  see(value: string): number {
    const id = Number(value.slice(1));
    assert.ok(/^r\d{6}$/.test(value) && fmt(id) === value && id < this.nextId, `delivered ${JSON.stringify(value)} was never added`);
    assert.ok(id > this.lastInEpoch, `out of order: ${id} after ${this.lastInEpoch}`);
    if (!this.damaged) assert.ok(id > this.durableCommit, `${id} was durably committed (through ${this.durableCommit}) and came back`);
    this.lastInEpoch = id;
    this.delivered.add(id);
    return id;
  }

  /** One read; false when the queue is empty. */
  async read(kind: 'take' | 'reserve'): Promise<boolean> {
    const r = this.q.reader();
    try {
      if (kind === 'take') {
        const got = await r.tryTake();
        if (!got) return false;
        const id = this.see(got.value);
        if (this.policy === 'perOp' && this.held.length === 0) this.durableCommit = Math.max(this.durableCommit, id);
        return true;
      }
      const got: Reservation<string> | undefined = await r.tryReserve();
      if (!got) return false;
      this.held.push({ id: this.see(got.value), offset: got.offset });
      return true;
    } catch (err) {
      if (!(err instanceof CorruptError)) throw err;
      assert.ok(this.damaged, `CorruptError without any damage: ${err.message}`);
      this.corruptSeen++;
      return true;
    }
  }

  async add(n: number, batch: boolean): Promise<void> {
    const ids = Array.from({ length: n }, () => this.nextId++);
    if (batch) await this.q.addBatch(ids.map(fmt));
    else for (const id of ids) await this.q.add(fmt(id));
    this.resolved.push(...ids);
  }

  async step(c: Cmd): Promise<void> {
    switch (c.op) {
      case 'add':
      case 'batch':
        return this.add(c.n, c.op === 'batch');
      case 'take':
      case 'reserve':
        for (let i = 0; i < c.n; i++) if (!(await this.read(c.op))) break;
        return;
      case 'commit': {
        const last = this.held[this.held.length - 1];
        if (!last) return;
        await this.q.reader().commit(last.offset);
        if (this.policy === 'perOp') this.durableCommit = Math.max(this.durableCommit, last.id);
        this.held = [];
        return;
      }
      case 'ack': {
        if (this.held.length === 0) return;
        const [h] = this.held.splice(c.i % this.held.length, 1);
        await this.q.reader().ack(h!.offset);
        // Only the contiguous acknowledged prefix becomes durable; the model does not claim more.
        return;
      }
      case 'rewind':
        await this.q.rewind();
        this.held = [];
        this.lastInEpoch = -1;
        return;
      case 'sync':
        return this.q.sync();
      case 'reopen':
        this.endEpoch();
        await this.q.close();
        return this.open();
      case 'crash':
        // A killed process: the page cache survives, so nothing that resolved is lost under any policy.
        this.endEpoch();
        this.fs.processCrash();
        return this.open();
      case 'powerCut': {
        this.endEpoch();
        const unsynced = this.q.stats().unsyncedBytes;
        const exposed = Math.ceil(unsynced / FRAME);
        assert.ok(this.policy !== 'perOp' || unsynced === 0, 'per-op never has unsynced bytes');
        for (const id of this.resolved.slice(Math.max(0, this.resolved.length - exposed))) this.mayBeLost.add(id);
        // Blocks written back out of order can leave a header ahead of its
        // records: a torn tail, which only a batched policy can expose, and
        // which must then be reported as damage.
        if (exposed > 0 && (c.tear === 'even' || c.tear === 'odd')) this.damaged = true;
        this.fs.powerCut(TEARS[c.tear ?? 'none']);
        return this.open();
      }
      case 'flip': {
        const segs = segNumbers(this.fs);
        if (segs.length === 0) return;
        const seq = segs[c.seg % segs.length]!;
        const path = segPath(seq);
        const bytes = this.fs.readFile(path)!;
        const h = decodeHeader(bytes.subarray(0, HEADER_SIZE));
        const end = h.ok ? h.header.writeCursor : bytes.length;
        const span = c.header ? Math.min(HEADER_SIZE, bytes.length) : end - HEADER_SIZE;
        if (span <= 0) return;
        const pos = (c.header ? 0 : HEADER_SIZE) + (c.at % span);
        bytes[pos]! ^= c.mask;
        const f = this.flips.get(seq) ?? { header: 0, all: 0 };
        f.all++;
        if (pos < HEADER_SIZE) f.header++;
        this.flips.set(seq, f);
        this.fs.writeFile(path, bytes);
        this.damaged = true;
        return;
      }
    }
  }

  /** Reopens, drains everything, and checks the accounting. */
  async finish(): Promise<void> {
    this.endEpoch();
    await this.q.close().catch(() => {});
    await this.open();
    for (let i = 0; ; i++) {
      assert.ok(i < 100_000, 'the queue wedged');
      if (!(await this.read('take'))) break;
    }
    const st = this.q.stats();
    assert.equal(st.backlog, 0, 'drained to empty');
    assert.equal(this.corruptSeen, st.corruptions, 'each counted event surfaced by exactly one CorruptError');
    this.endEpoch();
    await this.q.close();

    const missing = this.resolved.filter((id) => !this.delivered.has(id) && !this.mayBeLost.has(id));
    if (!this.damaged) {
      assert.deepEqual(missing, [], 'without damage every durable add is delivered');
      assert.equal(this.counted, 0, 'without damage no loss is counted');
    } else {
      // A header that was itself damaged and a record damaged beside it leave
      // nothing that can say how many records the segment held.
      let unknowable = 0;
      for (const f of this.flips.values()) if (f.header > 0 && f.all > 1) unknowable += PER_SEGMENT;
      assert.ok(missing.length <= this.counted + unknowable, `${missing.length} records missing, ${this.counted} counted as lost`);
    }
  }
}

/** Runs `p` and checks every invariant; throws an AssertionError naming the first broken one. */
export async function runProgram(p: Program): Promise<void> {
  const run = new Run(p.policy);
  await run.open();
  for (const c of p.cmds) await run.step(c);
  await run.finish();
}
