/**
 * The reference model of the spool for the interleaving property test: a list
 * of records, each live, committed or gone, durable or not, and the rules of
 * the spool's contract as plain array operations. The harness drives a real
 * spool on the fault-injecting file system whose fdatasyncs complete when
 * fast-check's scheduler says so, and checks the spool against this model
 * after every scheduled step. A requeue holds the consumer calls made after
 * it (pop, popBatch, commit, requeue) until its copy's fdatasync settles; the
 * model holds their expectations the same way, so each is judged against the
 * state the calls one at a time, in call order, would have met. A `close`
 * in the program makes every later call but commit reject with ClosedError.
 */
import assert from 'node:assert/strict';
import type { Scheduler } from 'fast-check';
import { FaultyFileSystem } from '../../../src/storage/faulty.js';
import type { FileHandle, FileSystem } from '../../../src/storage/fs.js';
import { ClosedError, GroupLostError, IOError, Spool, type Popped, type PoppedRun } from '../../../src/spool/index.js';

export type Cmd =
  | { op: 'append' }
  | { op: 'appendNoSync' }
  | { op: 'appendRun'; n: number }
  | { op: 'sync' }
  | { op: 'pop' }
  | { op: 'popBatch'; n: number }
  | { op: 'popRun'; n: number; after: boolean }
  | { op: 'commitRun'; k: number }
  | { op: 'commit'; k: number }
  | { op: 'requeue'; k: number }
  | { op: 'fail' }
  | { op: 'close' };

export interface Program {
  commitSync: boolean;
  cmds: Cmd[];
}

interface Rec {
  payload: string;
  state: 'live' | 'committed' | 'gone';
  durable: boolean;
  noSync: boolean;
  /** Gone with an appendNoSync group no sync has reported yet. */
  unreported: boolean;
  /** A requeue's copy: the commit the spool makes as soon as the copy is durable. */
  then?: () => void;
  /** A requeue's copy: the requeue settled (durable or rolled back), the consumer calls held behind it run. */
  settled?: () => void;
}

interface Pop {
  spool: Popped;
  rec: Rec;
}

/** A run `popRun` handed out, with the model's records it holds. */
interface Run {
  spool: PoppedRun;
  recs: Rec[];
}

const FRAME = 12 + 6;

/** `payloads` as lines of one buffer, newline after each: the run `appendRunNoSync` takes. */
function lineRun(payloads: string[]): { bytes: Uint8Array; starts: number[]; lengths: number[] } {
  const bytes = new TextEncoder().encode(payloads.map((p) => `${p}\n`).join(''));
  const starts: number[] = [];
  const lengths: number[] = [];
  let at = 0;
  for (const p of payloads) {
    starts.push(at);
    lengths.push(p.length);
    at += p.length + 1;
  }
  return { bytes, starts, lengths };
}
const tick = () => new Promise<void>((r) => setImmediate(r));

/** The model plus the seam hooks that keep it in step with the spool's fdatasyncs. */
class Model {
  recs: Rec[] = [];
  epoch = 0;
  failNext = false;
  /** Epochs whose rollback took appendNoSync records. */
  lostEpochs: number[] = [];
  closed = false;
  /**
   * Consumer calls (pop, popBatch, commit, requeue) made while a requeue's
   * copy waits for its fdatasync: they take effect, in call order, once it
   * settles, as they would one at a time.
   */
  held: Array<() => void> | undefined;
  private ids = 0;

  /** Runs a consumer call's effect now, or after the requeue in flight. */
  turn(f: () => void): void {
    if (this.held) this.held.push(f);
    else f();
  }

  release(): void {
    const queue = this.held ?? [];
    this.held = undefined;
    while (queue.length > 0) {
      queue.shift()!();
      if (this.held) {
        (this.held as Array<() => void>).push(...queue);
        return;
      }
    }
  }

  head(): Rec | undefined {
    return this.recs.find((r) => r.state === 'live');
  }

  add(noSync: boolean, payload = `m${String(this.ids++).padStart(5, '0')}`): Rec {
    const r: Rec = { payload, state: 'live', durable: false, noSync, unreported: false };
    this.recs.push(r);
    return r;
  }

  /** Records an fdatasync covers: everything written when it starts. */
  pending(): Rec[] {
    return this.recs.filter((r) => r.state !== 'gone' && !r.durable);
  }

  synced(covered: Rec[]): void {
    const now = covered.filter((r) => r.state !== 'gone');
    for (const r of now) r.durable = true;
    for (const r of now) {
      r.then?.();
      r.settled?.();
    }
  }

  rolledBack(): void {
    this.epoch++;
    const cut: Rec[] = [];
    for (const r of this.recs) {
      if (r.durable || r.state === 'gone') continue;
      r.state = 'gone';
      cut.push(r);
      if (r.noSync) {
        r.unreported = true;
        if (this.lostEpochs[this.lostEpochs.length - 1] !== this.epoch) this.lostEpochs.push(this.epoch);
      }
    }
    for (const r of cut) r.settled?.();
  }

  unreported(): boolean {
    return this.recs.some((r) => r.unreported);
  }

  reported(): void {
    for (const r of this.recs) r.unreported = false;
  }

  /**
   * A pop is stale only when its record is no longer the head: committed, or
   * cut by a rollback (then gone). A rollback that cut other records leaves
   * a durable head record as it was.
   */
  commit(p: Pop): void {
    if (this.head() === p.rec) p.rec.state = 'committed';
  }

  bytes(): number {
    return this.recs.filter((r) => r.state === 'live').length * FRAME;
  }

  unsynced(): number {
    return this.recs.filter((r) => r.state !== 'gone' && !r.durable).length * FRAME;
  }
}

/** The fault-injecting file system with segment fdatasyncs released by the scheduler. */
function scheduledFs(inner: FaultyFileSystem, model: Model, sched: { s?: Scheduler }): FileSystem {
  const wrap = (h: FileHandle): FileHandle => ({
    path: h.path,
    pwrite: (b, p, step) => h.pwrite(b, p, step),
    pread: (b, p) => h.pread(b, p),
    size: () => h.size(),
    truncate: (n) => h.truncate(n),
    allocate: (n) => h.allocate(n),
    close: () => h.close(),
    datasync: (step) => {
      const s = sched.s;
      if (!s) return h.datasync(step);
      const seg = h.path.endsWith('.seg');
      const covered = seg ? model.pending() : [];
      const fail = seg && model.failNext;
      if (fail) model.failNext = false;
      const run = s.schedule(Promise.resolve(), `fdatasync ${seg ? 'segment' : 'cursor'}${fail ? ' (fails)' : ''}`).then(async () => {
        if (fail) throw Object.assign(new Error('EIO: fdatasync (injected)'), { code: 'EIO' });
        await h.datasync(step);
      });
      // The model moves first, then the spool's own continuation.
      return run.then(
        () => {
          if (seg) model.synced(covered);
        },
        (err) => {
          if (seg) model.rolledBack();
          throw err;
        },
      );
    },
  });
  return {
    open: (p, m) => wrap(inner.open(p, m)),
    readdir: (d) => inner.readdir(d),
    mkdirp: (d) => inner.mkdirp(d),
    unlink: (p) => inner.unlink(p),
    rename: (a, b) => inner.rename(a, b),
    syncDir: (d) => inner.syncDir(d),
    lock: (d) => inner.lock(d),
  };
}

/** Runs one program under `s` and checks the spool against the model throughout. */
export async function runScheduled(s: Scheduler, p: Program): Promise<void> {
  const model = new Model();
  const sched: { s?: Scheduler } = {};
  const fs = new FaultyFileSystem();
  const spool = await Spool.open('/m', { fs: scheduledFs(fs, model, sched), commitSync: p.commitSync });
  sched.s = s;
  const pops: Pop[] = [];
  const runs: Run[] = [];
  const failures: string[] = [];
  const expect = (ok: boolean, what: string) => {
    if (!ok) failures.push(what);
  };
  const watch = <T>(pr: Promise<T>, onOk: (v: T) => void, onErr: (e: unknown) => void) => pr.then(onOk, onErr);

  const pick = (k: number) => pops[pops.length - 1 - (k % Math.max(1, pops.length))];
  const rejectsClosed = (pr: Promise<unknown>, tag: string) =>
    watch(pr, () => expect(false, `${tag} resolved after close`), (e) => expect(e instanceof ClosedError, `${tag} after close threw ${String(e)}`));
  let closing: Promise<void> | undefined;

  const issue = (c: Cmd, i: number): Promise<unknown> | undefined => {
    const tag = `#${i} ${c.op}`;
    if (model.closed) {
      switch (c.op) {
        case 'append':
          return rejectsClosed(spool.append(new TextEncoder().encode('late')), tag);
        case 'appendNoSync':
          return rejectsClosed(spool.appendNoSync(new TextEncoder().encode('late')), tag);
        case 'appendRun':
          return rejectsClosed(spool.appendRunNoSync(lineRun(Array.from({ length: c.n }, () => 'late'))), tag);
        case 'sync':
          return rejectsClosed(spool.sync(), tag);
        case 'pop':
          return rejectsClosed(spool.pop(), tag);
        case 'popBatch':
          return rejectsClosed(spool.popBatch(c.n), tag);
        case 'popRun':
          return rejectsClosed(spool.popRun(c.n), tag);
        case 'commitRun': {
          // A no-op after close.
          const run = runs[runs.length - 1 - (c.k % Math.max(1, runs.length))];
          return run ? watch(spool.commitRuns([run.spool]), () => {}, (e) => expect(false, `${tag} threw ${String(e)}`)) : undefined;
        }
        case 'requeue': {
          const pop = pick(c.k);
          return pop ? rejectsClosed(spool.requeue(pop.spool), tag) : undefined;
        }
        case 'commit': {
          // A no-op after close.
          const pop = pick(c.k);
          return pop ? watch(pop.spool.commit(), () => {}, (e) => expect(false, `${tag} threw ${String(e)}`)) : undefined;
        }
        case 'fail':
          return undefined;
        case 'close':
          return closing;
      }
    }
    switch (c.op) {
      case 'append':
      case 'appendNoSync': {
        if (model.unreported()) {
          // A lost group not yet reported: the call is refused and places
          // nothing, so no record lands ahead of the group's re-append.
          const bytes = new TextEncoder().encode('refused');
          const call = c.op === 'append' ? spool.append(bytes) : spool.appendNoSync(bytes);
          // Refused, not reported: the next sync() still reports the loss.
          return watch(
            call,
            () => expect(false, `${tag} resolved while a lost group was unreported`),
            (e) => expect(e instanceof GroupLostError, `${tag} rejected with ${String(e)}, not the lost group`),
          );
        }
        const r = model.add(c.op === 'appendNoSync');
        const call = c.op === 'append' ? spool.append(new TextEncoder().encode(r.payload)) : spool.appendNoSync(new TextEncoder().encode(r.payload));
        return watch(
          call,
          () => expect(c.op === 'appendNoSync' || (r.durable && r.state !== 'gone'), `${tag} resolved but its record is not durable`),
          (e) => expect(c.op === 'append' && e instanceof IOError && r.state === 'gone', `${tag} rejected (${String(e)}) but its record is ${r.state}`),
        );
      }
      case 'appendRun': {
        if (model.unreported()) {
          return watch(
            spool.appendRunNoSync(lineRun(Array.from({ length: c.n }, () => 'refused'))),
            () => expect(false, `${tag} resolved while a lost group was unreported`),
            (e) => expect(e instanceof GroupLostError && e.placed === 0, `${tag} rejected with ${String(e)}, not the lost group`),
          );
        }
        // Records laid out as lines of one read: staged at once, as appendNoSync of each in turn.
        const rs = Array.from({ length: c.n }, () => model.add(true));
        return watch(
          spool.appendRunNoSync(lineRun(rs.map((r) => r.payload))),
          () => {},
          (e) => expect(false, `${tag} rejected (${String(e)})`),
        );
      }
      case 'sync': {
        const before = model.recs.filter((r) => r.noSync);
        const epoch = model.epoch;
        return watch(
          spool.sync(),
          () => {
            expect(!model.unreported(), `${tag} resolved while a lost group is unreported`);
            for (const r of before) expect(r.durable || (r.state === 'gone' && !r.unreported), `${tag} resolved but ${r.payload} is not durable`);
          },
          (e) => {
            if (e instanceof GroupLostError) {
              // Every sync waiting on the failed fdatasync hears of it.
              expect(model.unreported() || model.lostEpochs.some((e) => e > epoch), `${tag} reported a group lost that was not`);
              model.reported();
            } else expect(e instanceof IOError && !model.unreported(), `${tag} rejected with ${String(e)}`);
          },
        );
      }
      case 'pop': {
        const call = spool.pop();
        let want: Rec | undefined;
        model.turn(() => {
          want = model.head();
        });
        return watch(
          call,
          (got) => {
            expect((got ? new TextDecoder().decode(got.data) : undefined) === want?.payload, `${tag} got ${got && new TextDecoder().decode(got.data)}, model head ${want?.payload}`);
            if (got && want) pops.push({ spool: got, rec: want });
          },
          (e) => expect(false, `${tag} threw ${String(e)}`),
        );
      }
      case 'popBatch': {
        const call = spool.popBatch(c.n);
        let want: Rec[] = [];
        model.turn(() => {
          want = model.recs.filter((r) => r.state === 'live').slice(0, c.n);
        });
        return watch(
          call,
          (got) => {
            const g = got.map((p) => new TextDecoder().decode(p.data));
            expect(JSON.stringify(g) === JSON.stringify(want.map((r) => r.payload)), `${tag} got ${g.join(',')}, model ${want.map((r) => r.payload).join(',')}`);
            if (g.length === want.length) got.forEach((p, j) => pops.push({ spool: p, rec: want[j]! }));
          },
          (e) => expect(false, `${tag} threw ${String(e)}`),
        );
      }
      case 'popRun': {
        // After the newest run when asked and there is one (it may have been committed or cut since: then from the head).
        const after = c.after ? runs.at(-1) : undefined;
        const call = spool.popRun(c.n, Infinity, after?.spool);
        let want: Rec[] = [];
        model.turn(() => {
          const live = model.recs.filter((r) => r.state === 'live');
          const from = after ? live.indexOf(after.recs.at(-1)!) : -1;
          want = (from >= 0 ? live.slice(from + 1) : live).slice(0, c.n);
        });
        return watch(
          call,
          (got) => {
            const g = got ? Array.from({ length: got.count }, (_, j) => new TextDecoder().decode(got.record(j))) : [];
            expect(JSON.stringify(g) === JSON.stringify(want.map((r) => r.payload)), `${tag} got ${g.join(',')}, model ${want.map((r) => r.payload).join(',')}`);
            if (got && g.length === want.length) runs.push({ spool: got, recs: want });
          },
          (e) => expect(false, `${tag} threw ${String(e)}`),
        );
      }
      case 'commitRun': {
        const run = runs[runs.length - 1 - (c.k % Math.max(1, runs.length))];
        if (!run) return undefined;
        const call = spool.commitRuns([run.spool]);
        // As the run's records committed one by one, in order.
        model.turn(() => run.recs.forEach((rec) => model.commit({ spool: undefined as unknown as Popped, rec })));
        return watch(call, () => {}, (e) => expect(false, `${tag} threw ${String(e)}`));
      }
      case 'commit': {
        const pop = pick(c.k);
        if (!pop) return undefined;
        const call = pop.spool.commit();
        model.turn(() => model.commit(pop));
        return watch(call, () => {}, (e) => expect(false, `${tag} threw ${String(e)}`));
      }
      case 'requeue': {
        const pop = pick(c.k);
        if (!pop) return undefined;
        const call = spool.requeue(pop.spool);
        let moves = false;
        let copy: Rec | undefined;
        model.turn(() => {
          // Only the current head moves (a record a rollback cut is gone,
          // never the head), and not when it is all there is.
          const atHead = model.head() === pop.rec;
          moves = atHead && model.recs.filter((r) => r.state === 'live').length > 1;
          if (!moves) return;
          const cp = model.add(false, pop.rec.payload);
          cp.then = () => model.commit(pop);
          cp.settled = () => {
            cp.settled = undefined;
            model.release();
          };
          copy = cp;
          model.held = [];
        });
        return watch(
          call,
          (rotated) => {
            expect(rotated === moves, `${tag} rotated=${rotated}, model says ${moves}`);
            if (copy) expect(copy.durable && copy.state !== 'gone', `${tag} resolved but its copy is not durable`);
          },
          (e) => expect(!!copy && e instanceof IOError && copy.state === 'gone', `${tag} rejected (${String(e)})`),
        );
      }
      case 'fail':
        model.failNext = true;
        return undefined;
      case 'close': {
        model.closed = true;
        const epoch = model.epoch;
        closing = watch(
          spool.close(),
          () => expect(!model.unreported(), `${tag} resolved while a lost group is unreported`),
          (e) => {
            if (e instanceof GroupLostError) {
              expect(model.unreported() || model.lostEpochs.some((e) => e > epoch), `${tag} reported a group lost that was not`);
              model.reported();
            } else expect(e instanceof IOError && model.epoch > epoch, `${tag} rejected with ${String(e)}`);
          },
        );
        return closing;
      }
    }
  };

  const calls: Promise<unknown>[] = [];
  p.cmds.forEach((c, i) => {
    calls.push(s.schedule(Promise.resolve(), `issue #${i} ${c.op}`).then(() => issue(c, i)));
  });
  while (s.count() > 0) {
    await s.waitNext(1);
    await tick();
    expect(spool.bytes === model.bytes(), `bytes ${spool.bytes}, model ${model.bytes()}`);
    expect(spool.stats().unsyncedBytes === model.unsynced(), `unsyncedBytes ${spool.stats().unsyncedBytes}, model ${model.unsynced()}`);
    if (failures.length) break;
  }
  // On a failure the calls still waiting are abandoned, not awaited.
  assert.deepEqual(failures, [], s.report().map((r) => `${r.status} ${r.label}`).join('\n'));
  await Promise.all(calls);
  sched.s = undefined;

  // Close, reopen, and read what is there: exactly the live records, in order.
  if (!model.closed) {
    let closeErr: unknown;
    await spool.close().catch((e) => (closeErr = e));
    assert.equal(closeErr instanceof GroupLostError, model.unreported(), `close: ${String(closeErr)}`);
  }
  const again = await Spool.open('/m', { fs });
  const got: string[] = [];
  for (let r = await again.pop(); r; r = await again.pop()) {
    got.push(new TextDecoder().decode(r.data));
    await r.commit();
  }
  await again.close();
  assert.deepEqual(got, model.recs.filter((r) => r.state === 'live').map((r) => r.payload));
}
