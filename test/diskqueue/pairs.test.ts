/**
 * Every pair of public async methods run at once with `Promise.all`, on two
 * readers and on one: the results and the state left behind must be those of
 * one of the two sequential orders. The state is read back whole: the gauges
 * and counters before close, and every record a reopen then delivers.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FaultyFileSystem, openQ } from './faults/helpers.js';
import type { DiskQueue } from '../../src/diskqueue/index.js';
import type { Reader } from '../../src/diskqueue/reader.js';

interface World {
  q: DiskQueue<string>;
  readers: [Reader<string>, Reader<string>];
  /** The offset of v0, reserved by the setup and not yet acknowledged. */
  held: bigint;
}

type Method = (w: World, r: Reader<string>) => Promise<unknown>;

async function first<T>(it: AsyncGenerator<T>): Promise<T | undefined> {
  for await (const v of it) return v;
  return undefined;
}

const METHODS: Record<string, Method> = {
  add: (w) => w.q.add('a'),
  addBatch: (w) => w.q.addBatch(['b1', 'b2']),
  addWait: (w) => w.q.addWait('w'),
  reserve: (_w, r) => r.reserve(),
  tryReserve: (_w, r) => r.tryReserve(),
  take: (_w, r) => r.take(),
  tryTake: (_w, r) => r.tryTake(),
  takeBatch: (_w, r) => r.takeBatch(2),
  reserveBatch: (_w, r) => r.reserveBatch(2),
  ack: (w, r) => r.ack(w.held),
  ackBatch: (w, r) => r.ackBatch([w.held]),
  commit: (w, r) => r.commit(w.held),
  skip: (_w, r) => r.skip(),
  requeue: (_w, r) => r.requeue(),
  tryPeek: (_w, r) => r.tryPeek(),
  rewind: (w) => w.q.rewind(),
  sync: (w) => w.q.sync(),
  drain: (_w, r) => first(r.drain()),
  follow: (_w, r) => first(r.follow()),
  close: (w) => w.q.close(),
};

async function setup(): Promise<{ fs: FaultyFileSystem; w: World }> {
  const fs = new FaultyFileSystem();
  const q = await openQ(fs);
  await q.addBatch(['v0', 'v1', 'v2', 'v3', 'v4']);
  const readers: [Reader<string>, Reader<string>] = [q.reader(), q.reader()];
  const got = await readers[0].tryReserve();
  return { fs, w: { q, readers, held: got!.offset } };
}

/** A call's result with errors reduced to their codes, so outcomes compare as data. */
function settled(r: PromiseSettledResult<unknown>): unknown {
  return r.status === 'fulfilled' ? { ok: r.value } : { err: (r.reason as { code?: string }).code ?? String(r.reason) };
}

/** Everything observable after the calls: results, stats (while open), and what a reopen delivers. */
async function outcome(fs: FaultyFileSystem, w: World, results: unknown[]): Promise<unknown> {
  let stats: unknown = 'closed';
  try {
    const s = w.q.stats();
    stats = { backlog: s.backlog, backlogBytes: s.backlogBytes, inFlightBytes: s.inFlightBytes, added: s.added, delivered: s.delivered, committed: s.committed };
  } catch {
    // closed by one of the calls
  }
  await w.q.close();
  const q = await openQ(fs);
  const r = q.reader();
  const rest: string[] = [];
  for (let got = await r.tryTake(); got; got = await r.tryTake()) rest.push(got.value);
  const s = q.stats();
  assert.equal(s.corruptions + s.lostRecords, 0, 'nothing damaged');
  await q.close();
  return { results, stats, rest };
}

async function concurrent(a: string, b: string, sameReader: boolean): Promise<unknown> {
  const { fs, w } = await setup();
  const [ra, rb] = sameReader ? [w.readers[0], w.readers[0]] : w.readers;
  const res = await Promise.allSettled([METHODS[a]!(w, ra), METHODS[b]!(w, rb)]);
  return outcome(fs, w, res.map(settled));
}

async function sequential(a: string, b: string, sameReader: boolean, aFirst: boolean): Promise<unknown> {
  const { fs, w } = await setup();
  const [ra, rb] = sameReader ? [w.readers[0], w.readers[0]] : w.readers;
  const run = async (m: string, r: Reader<string>) => settled((await Promise.allSettled([METHODS[m]!(w, r)]))[0]!);
  let ra_: unknown;
  let rb_: unknown;
  if (aFirst) {
    ra_ = await run(a, ra);
    rb_ = await run(b, rb);
  } else {
    rb_ = await run(b, rb);
    ra_ = await run(a, ra);
  }
  return outcome(fs, w, [ra_, rb_]);
}

const names = Object.keys(METHODS);
const pairs: Array<[string, string]> = [];
for (let i = 0; i < names.length; i++) for (let j = i; j < names.length; j++) pairs.push([names[i]!, names[j]!]);

for (const sameReader of [false, true]) {
  describe(`DiskQueue: each pair of methods at once, ${sameReader ? 'on one reader' : 'on two readers'}`, () => {
    for (const [a, b] of pairs) {
      it(`${a} ‖ ${b}`, async () => {
        const orders = [await sequential(a, b, sameReader, true), await sequential(a, b, sameReader, false)];
        for (const [x, y, flipped] of [[a, b, false], [b, a, true]] as const) {
          const got = await concurrent(x, y, sameReader);
          const asAB = flipped ? flip(got) : got;
          assert.ok(
            orders.some((o) => isDeepEqual(o, asAB)),
            `Promise.all([${x}, ${y}]) matches no sequential order:\n got ${show(asAB)}\n ${a};${b} ${show(orders[0])}\n ${b};${a} ${show(orders[1])}`,
          );
        }
      });
    }
  });
}

/** Swaps the two results, so an outcome of [b, a] reads as one of [a, b]. */
function flip(o: unknown): unknown {
  const x = o as { results: unknown[] };
  return { ...x, results: [x.results[1], x.results[0]] };
}

function isDeepEqual(x: unknown, y: unknown): boolean {
  try {
    assert.deepStrictEqual(x, y);
    return true;
  } catch {
    return false;
  }
}

function show(x: unknown): string {
  return JSON.stringify(x, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));
}
