/**
 * Concurrent programs against a DiskQueue, with fast-check's scheduler
 * deciding the interleaving, checked against a model of what the queue owes
 * its callers.
 *
 * A program is a list of waves. Every call of a wave starts at once on the
 * readers it names; the scheduler decides in which order the calls start, in
 * which order the queue's promises settle, and when each fdatasync and
 * directory fsync of the file-system seam completes. Between waves the
 * program may reopen the queue; a wave may also close it while its other
 * calls are in flight.
 *
 * What the model checks (values are `v` + a 6-digit id, so a delivered value
 * names the add it came from):
 * - every delivered value was added, and decodes to exactly its bytes;
 * - no record is delivered twice, except a reservation a rewind gave back,
 *   or, across a close, one not yet retired (an ack or commit that failed or
 *   was still waiting on an older reservation). A requeued copy carries its
 *   original's value, so one id can name two records, and each of them earns
 *   its own replay;
 * - FIFO in real time: a read never returns a record older than one a read
 *   that had already finished returned (while the log order is the add order:
 *   no requeue, rewind or addWait in the epoch);
 * - after a final drain, every record whose add resolved was delivered or
 *   skipped, with no loss counted, no CorruptError, a backlog of 0 and at most
 *   two segments left;
 * - gauges stay sane at every observation: backlog and in-flight bytes never
 *   negative, nothing committed that was not delivered, skipped or requeued;
 * - every call settles with its result or a documented error (ClosedError
 *   once closed, OffsetError for an ack a rewind cancelled, FullError,
 *   the abort reason of a blocked call cut off at the end of its wave).
 */
import assert from 'node:assert/strict';
import type fc from 'fast-check';
import { ClosedError, FullError, OffsetError, type DiskQueue } from '../../../src/diskqueue/index.js';
import type { Reader } from '../../../src/diskqueue/reader.js';
import { FaultyFileSystem, openQ, type Opts } from '../faults/helpers.js';

export type Call =
  | { op: 'add' }
  | { op: 'addBatch'; n: number }
  | { op: 'addWait' }
  | { op: 'reserve' | 'tryReserve' | 'take' | 'tryTake' | 'skip' | 'requeue' | 'tryPeek' | 'commit'; r: number }
  | { op: 'ack'; pick: number }
  | { op: 'ackBatch'; picks: number[] }
  | { op: 'takeBatch' | 'reserveBatch'; r: number; n: number }
  | { op: 'drain' | 'follow'; r: number; n: number }
  | { op: 'rewind' | 'sync' | 'stats' | 'close' };

export interface Wave {
  calls: Call[];
  /** Close and reopen after the wave (always done after a wave that closed). */
  reopen: boolean;
}

export type Policy = 'perOp' | 'every3' | 'noSync';

export interface ConcurrentProgram {
  policy: Policy;
  /** Backlog cap in bytes, 0 for none: small enough to make adds wait. */
  maxBytes: number;
  readers: number;
  waves: Wave[];
}

/** 200-byte payloads frame to 210 bytes: 19 records fill a 4 KiB segment, so programs roll and reclaim segments. */
const PAD = '.'.repeat(193);
const value = (id: number) => `v${String(id).padStart(6, '0')}${PAD}`;
const FRAME = 1 + 200 + 8;

const POLICY: Record<Policy, Opts> = { perOp: {}, every3: { syncEvery: 3 }, noSync: { noSync: true } };

interface Held {
  id: number;
  offset: bigint;
  /** Rewinds seen when the reserve started; an older reservation may have been cancelled. */
  gen: number;
}

/** Calls that move the read cursor. */
const CONSUMING: Partial<Record<Call['op'], true>> = {
  take: true,
  tryTake: true,
  reserve: true,
  tryReserve: true,
  skip: true,
  requeue: true,
  takeBatch: true,
  reserveBatch: true,
  drain: true,
  follow: true,
};

class Run {
  readonly fs = new FaultyFileSystem();
  q!: DiskQueue<string>;
  readers: Reader<string>[] = [];
  nextId = 0;
  /** Ids whose add resolved (or which a partial batch reported placed). */
  placed = new Set<number>();
  deliveries = new Map<number, number>();
  mayReplay = new Set<number>();
  held: Held[] = [];
  /** Reserving calls, and acks or commits, started and not yet settled. */
  reserving = 0;
  acking = 0;
  /** Delivered since nothing was last outstanding: what a rewind may give back. */
  sinceQuiet = new Set<number>();
  gen = 0;
  /**
   * Records read and not retired that no caller holds any more (a rewind gave
   * them back, or their ack failed) and no read has returned again: nothing
   * behind them can retire until one does.
   */
  loose = new Set<number>();
  /**
   * Requeues done behind an outstanding reservation: the original is retired
   * only once that reservation is, so a close before then replays both the
   * original and its copy. Each such requeue allows one second delivery.
   */
  requeuesSinceQuiet = 0;
  /**
   * Second records of an id (a requeued copy, or the original once its copy
   * was read) delivered since nothing was last outstanding. `mayReplay` and
   * `sinceQuiet` hold ids, and a requeued copy carries its original's id: a
   * close that replays both needs one more allowance for each of these.
   */
  copiesSinceQuiet = 0;
  extraDeliveries = 0;
  skips = 0;
  requeues = 0;
  /** The newest id a finished read returned in this epoch, and whether log order still equals id order. */
  newestDone = -1;
  ordered = true;
  closedNow = false;
  /** The seam's step count when a concurrent close resolved: nothing may touch the files after it. */
  stepsAtClose: number | undefined;
  /** Per open: delivered + skipped + requeued, against `stats().committed`. */
  consumedThisOpen = 0;
  /** Records consuming calls in flight may have taken already (their cursor moves before they settle). */
  consumingNow = 0;

  constructor(
    readonly p: ConcurrentProgram,
    readonly s: fc.Scheduler,
  ) {
    this.fs.delay = (label) => s.schedule(Promise.resolve(label), label);
  }

  async open(): Promise<void> {
    this.q = await this.s.waitFor(openQ(this.fs, { ...POLICY[this.p.policy], maxBytes: this.p.maxBytes }));
    this.readers = Array.from({ length: this.p.readers }, () => this.q.reader());
    this.held = [];
    this.newestDone = -1;
    // Log order is id order again only once nothing written out of order is left.
    if (this.q.stats().backlog === 0) this.ordered = true;
    this.closedNow = false;
    this.consumedThisOpen = 0;
    this.sinceQuiet.clear();
    this.copiesSinceQuiet = 0;
  }

  private quietCheck(): void {
    if (this.held.length === 0 && this.reserving === 0 && this.acking === 0 && this.loose.size === 0) {
      this.sinceQuiet.clear();
      this.requeuesSinceQuiet = 0;
      this.copiesSinceQuiet = 0;
    }
  }

  /** Records one delivered value; `floor` is the newest id finished reads had returned when this read started. */
  private deliver(v: string, floor: number): number {
    assert.ok(/^v\d{6}\.{193}$/.test(v), `delivered bytes that were never added: ${JSON.stringify(v.slice(0, 20))}`);
    const id = Number(v.slice(1, 7));
    assert.ok(id < this.nextId, `delivered v${id}, which no add started`);
    const seen = this.deliveries.get(id) ?? 0;
    if (seen > 0 && !this.mayReplay.has(id)) {
      assert.ok(this.extraDeliveries > 0, `v${id} delivered twice with nothing to give it back`);
      this.extraDeliveries--;
      this.copiesSinceQuiet++;
    }
    if (this.ordered && seen === 0) assert.ok(id > floor, `v${id} delivered after v${floor} had been`);
    this.deliveries.set(id, seen + 1);
    this.loose.delete(id);
    this.mayReplay.delete(id);
    this.sinceQuiet.add(id);
    this.consumedThisOpen++;
    return id;
  }

  private settledRead(id: number): void {
    if (id > this.newestDone) this.newestDone = id;
  }

  /** Errors a call may end with in this program; anything else fails it. */
  private expected(err: unknown, ok: { full?: boolean; offset?: boolean; abort?: boolean }): void {
    if (err instanceof ClosedError && this.closedNow) return;
    if (ok.full && err instanceof FullError) return;
    if (ok.offset && err instanceof OffsetError) return;
    if (ok.abort && (err as Error)?.name === 'AbortError') return;
    throw err;
  }

  /** An ack or commit that failed retired nothing: those records, and what was read behind them, may come back. */
  private failedAck(held: Held[]): void {
    this.giveBack(held);
    for (const id of this.sinceQuiet) this.mayReplay.add(id);
  }

  /**
   * Reservations that come back: each may be delivered once more. A requeued
   * copy and its original share an id, so when both are given back at once
   * the second needs an allowance of its own.
   */
  private giveBack(held: Held[]): void {
    for (const h of held) {
      this.mayReplay.add(h.id);
      this.loose.add(h.id);
    }
    const twins = held.length - new Set(held.map((h) => h.id)).size;
    this.extraDeliveries += twins;
    // Delivering such a twin again spends this allowance and counts as a copy
    // read; it is the same record, so it must not earn a second allowance.
    this.copiesSinceQuiet = Math.max(0, this.copiesSinceQuiet - twins);
  }

  private newIds(n: number): number[] {
    return Array.from({ length: n }, () => this.nextId++);
  }

  private checkGauges(): void {
    if (this.closedNow) return;
    const st = this.q.stats();
    assert.ok(st.backlog >= 0, `backlog ${st.backlog}`);
    assert.ok(st.backlogBytes >= 0 && st.inFlightBytes >= 0, `backlogBytes ${st.backlogBytes}, inFlightBytes ${st.inFlightBytes}`);
    assert.ok(st.inFlightBytes <= st.backlogBytes, `inFlightBytes ${st.inFlightBytes} > backlogBytes ${st.backlogBytes}`);
    const bound = this.consumedThisOpen + this.consumingNow;
    assert.ok(st.committed <= bound, `committed ${st.committed} > consumed ${this.consumedThisOpen} + ${this.consumingNow} in flight`);
    assert.equal(st.corruptions + st.lostRecords + st.lostSegments, 0, 'nothing damaged the queue');
  }

  /** Runs one call; its promise settles when the call did. */
  async call(c: Call, signal: AbortSignal): Promise<void> {
    const takes = CONSUMING[c.op] === undefined ? 0 : 'n' in c ? c.n : 1;
    this.consumingNow += takes;
    try {
      await this.step(c, signal);
    } finally {
      this.consumingNow -= takes;
    }
  }

  private async step(c: Call, signal: AbortSignal): Promise<void> {
    const floor = this.newestDone;
    const reader = 'r' in c ? this.readers[c.r % this.readers.length]! : undefined;
    switch (c.op) {
      case 'add':
      case 'addWait': {
        const [id] = this.newIds(1);
        if (c.op === 'addWait') this.ordered = false;
        try {
          await (c.op === 'add' ? this.q.add(value(id!)) : this.q.addWait(value(id!), { signal }));
          this.placed.add(id!);
        } catch (err) {
          this.expected(err, { full: c.op === 'add', abort: true });
        }
        return;
      }
      case 'addBatch': {
        const ids = this.newIds(c.n);
        try {
          assert.equal(await this.q.addBatch(ids.map(value)), c.n);
          for (const id of ids) this.placed.add(id);
        } catch (err) {
          this.expected(err, { full: true });
          const placed = (err as { placed?: number }).placed ?? 0;
          for (const id of ids.slice(0, placed)) this.placed.add(id);
        }
        return;
      }
      case 'take':
      case 'tryTake':
      case 'skip':
      case 'requeue': {
        // A requeued copy goes to the back with its old id: log order is no longer id order.
        if (c.op === 'requeue') this.ordered = false;
        try {
          if (c.op === 'skip' || c.op === 'requeue') {
            if (!(await reader![c.op]())) return;
            if (c.op === 'skip') this.skips++;
            else {
              this.requeues++;
              this.requeuesSinceQuiet++;
            }
            this.consumedThisOpen++;
            return;
          }
          const got = c.op === 'take' ? { value: await reader!.take({ signal }) } : await reader!.tryTake();
          if (got) this.settledRead(this.deliver(got.value, floor));
        } catch (err) {
          this.expected(err, { abort: c.op === 'take' });
        }
        return;
      }
      case 'reserve':
      case 'tryReserve': {
        const gen = this.gen;
        this.reserving++;
        try {
          const got = c.op === 'reserve' ? await reader!.reserve({ signal }) : await reader!.tryReserve();
          if (got) {
            const id = this.deliver(got.value, floor);
            this.settledRead(id);
            if (gen !== this.gen) this.mayReplay.add(id);
            this.held.push({ id, offset: got.offset, gen });
          }
        } catch (err) {
          this.expected(err, { abort: c.op === 'reserve' });
        } finally {
          this.reserving--;
        }
        return;
      }
      case 'takeBatch':
      case 'reserveBatch': {
        const gen = this.gen;
        if (c.op === 'reserveBatch') this.reserving++;
        try {
          if (c.op === 'takeBatch') {
            const got = await reader!.takeBatch(c.n);
            assert.ok(got.length <= c.n);
            for (const v of got) this.settledRead(this.deliver(v, floor));
          } else {
            const got = await reader!.reserveBatch(c.n);
            assert.ok(got.length <= c.n);
            for (const g of got) {
              const id = this.deliver(g.value, floor);
              this.settledRead(id);
              if (gen !== this.gen) this.mayReplay.add(id);
              this.held.push({ id, offset: g.offset, gen });
            }
          }
        } catch (err) {
          this.expected(err, {});
        } finally {
          if (c.op === 'reserveBatch') this.reserving--;
        }
        return;
      }
      case 'ackBatch': {
        const picked: Held[] = [];
        for (const p of c.picks) {
          if (this.held.length === 0) break;
          picked.push(...this.held.splice(p % this.held.length, 1));
        }
        if (picked.length === 0) return;
        this.acking++;
        try {
          await this.readers[0]!.ackBatch(picked.map((h) => h.offset));
        } catch (err) {
          // All or nothing: one reservation a rewind cancelled fails the whole batch.
          this.expected(err, { offset: picked.some((h) => h.gen !== this.gen) });
          this.failedAck(picked);
        } finally {
          this.acking--;
        }
        this.quietCheck();
        return;
      }
      case 'ack': {
        if (this.held.length === 0) return;
        const [h] = this.held.splice(c.pick % this.held.length, 1);
        this.acking++;
        try {
          await this.readers[0]!.ack(h!.offset);
        } catch (err) {
          // An ack of a record a rewind gave back finds no reservation.
          this.expected(err, { offset: h!.gen !== this.gen });
          this.failedAck([h!]);
        } finally {
          this.acking--;
        }
        this.quietCheck();
        return;
      }
      case 'commit': {
        if (this.held.length === 0) return;
        const newest = this.held.reduce((a, b) => (b.offset > a.offset ? b : a));
        const covered = this.held.filter((h) => h.offset <= newest.offset);
        this.held = this.held.filter((h) => h.offset > newest.offset);
        this.acking++;
        try {
          await reader!.commit(newest.offset);
        } catch (err) {
          this.expected(err, { offset: newest.gen !== this.gen });
          this.failedAck(covered);
        } finally {
          this.acking--;
        }
        this.quietCheck();
        return;
      }
      case 'tryPeek': {
        try {
          const got = await reader!.tryPeek();
          if (got) assert.ok(/^v\d{6}\.{193}$/.test(got.value) && Number(got.value.slice(1, 7)) < this.nextId, 'peeked a value never added');
        } catch (err) {
          this.expected(err, {});
        }
        return;
      }
      case 'drain':
      case 'follow': {
        try {
          let n = 0;
          const it = c.op === 'drain' ? reader!.drain() : reader!.follow({ signal });
          for await (const v of it) {
            this.settledRead(this.deliver(v, floor));
            if (++n >= c.n) break;
          }
        } catch (err) {
          this.expected(err, {});
        }
        return;
      }
      case 'rewind': {
        if (this.closedNow) {
          await assert.rejects(this.q.rewind(), ClosedError);
          return;
        }
        // Every outstanding reservation comes back; what was taken, acked, skipped or requeued does not.
        this.giveBack(this.held);
        this.held = [];
        this.gen++;
        this.ordered = false;
        try {
          await this.q.rewind();
        } catch (err) {
          this.expected(err, {});
        }
        return;
      }
      case 'sync':
        try {
          await this.q.sync();
        } catch (err) {
          this.expected(err, {});
        }
        return;
      case 'stats':
        this.checkGauges();
        return;
      case 'close':
        this.closedNow = true;
        await this.q.close();
        this.stepsAtClose = this.fs.steps;
        return;
    }
  }

  async wave(w: Wave, index: number): Promise<void> {
    const ac = new AbortController();
    const calls = w.calls.map((c, i) => this.s.schedule(Promise.resolve(), `start ${index}.${i} ${c.op}`).then(() => this.call(c, ac.signal)));
    const all = Promise.all(calls);
    await this.s.waitIdle();
    // Blocked calls (take on an empty queue, addWait on a full one) are cut off.
    ac.abort();
    await this.s.waitFor(all);
    if (this.stepsAtClose !== undefined) assert.equal(this.fs.steps, this.stepsAtClose, 'file-system steps ran after close resolved');
    this.stepsAtClose = undefined;
    this.quietCheck();
    this.checkGauges();
    if (w.reopen || this.closedNow) await this.reopen();
  }

  /** Acknowledges what is held, closes, and opens again: nothing retired may come back. */
  async reopen(): Promise<void> {
    if (this.closedNow) {
      for (const h of this.held) this.mayReplay.add(h.id);
    } else {
      const held = this.held.splice(0);
      await this.s.waitFor(
        Promise.all(held.map((h) => this.readers[0]!.ack(h.offset).catch((err) => this.expected(err, { offset: h.gen !== this.gen })))),
      );
      await this.s.waitFor(this.q.close());
    }
    if (this.closedNow || this.loose.size > 0) {
      // Closed with work outstanding, or behind a loose record no read took
      // again: what was read but not yet retired replays.
      // A copy read since then replays as well as its original.
      for (const id of this.sinceQuiet) this.mayReplay.add(id);
      this.extraDeliveries += this.requeuesSinceQuiet + this.copiesSinceQuiet;
    }
    this.held = [];
    this.loose.clear();
    this.requeuesSinceQuiet = 0;
    await this.open();
  }

  /** Drains what is left and checks the accounting. */
  async finish(): Promise<void> {
    await this.reopen();
    const r = this.q.reader();
    for (let i = 0; ; i++) {
      assert.ok(i <= this.nextId + this.requeues, 'the queue wedged');
      const got = await this.s.waitFor(r.tryTake());
      if (!got) break;
      this.deliver(got.value, -1);
    }
    const st = this.q.stats();
    assert.equal(st.backlog, 0, 'drained to empty');
    assert.equal(st.corruptions + st.lostRecords + st.lostSegments, 0, 'no loss counted');
    assert.ok(st.segments <= 2, `${st.segments} segments left after a full drain`);
    await this.s.waitFor(this.q.close());
    const missing = [...this.placed].filter((id) => !this.deliveries.has(id));
    assert.ok(missing.length <= this.skips, `${missing.length} resolved adds never delivered (${this.skips} skips): ${missing.slice(0, 5).join(', ')}`);
  }
}

/** The bytes one record frames to, for sizing `maxBytes` in records. */
export const RECORD_FRAME = FRAME;

/** Runs `p` under scheduler `s`; throws an AssertionError naming the first broken rule. */
export async function runConcurrent(p: ConcurrentProgram, s: fc.Scheduler): Promise<void> {
  const run = new Run(p, s);
  await run.open();
  for (const [i, w] of p.waves.entries()) await run.wave(w, i);
  await run.finish();
}
