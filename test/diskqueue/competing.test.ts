/**
 * Competing readers at scale, on a real directory: 4 producers and 8
 * consumers move 100,000 records through 16 KiB segments, the consumers
 * reserving and acknowledging with random delays, so acks land out of order
 * and the commit cursor only ever crosses contiguous acknowledged runs.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { DiskQueue, codecs } from '../../src/diskqueue/index.js';
import { tempDir } from '../helpers/tmp.js';

const RECORDS = 100_000;
const PRODUCERS = 4;
const CONSUMERS = 8;

/** A small deterministic generator, so a failure replays with the same delays. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function pause(rand: () => number): Promise<void> {
  const x = rand();
  if (x < 0.02) return new Promise((r) => setTimeout(r, 1));
  if (x < 0.3) return new Promise((r) => setImmediate(r));
  return Promise.resolve();
}

it(`${PRODUCERS} producers and ${CONSUMERS} consumers move ${RECORDS} records, each delivered exactly once`, { timeout: 300_000 }, async () => {
  const dir = tempDir();
  const q = await DiskQueue.open<string>(dir, { codec: codecs.utf8, segmentSize: 16 << 10, syncEvery: 512 });
  const seen = new Uint8Array(RECORDS);
  let delivered = 0;
  const done = new AbortController();

  const producers = Array.from({ length: PRODUCERS }, async (_, p) => {
    const rand = rng(p + 1);
    for (let i = p; i < RECORDS; ) {
      if (rand() < 0.1) {
        // A batch of up to 8 of this producer's ids.
        const ids: string[] = [];
        for (let k = 0; k < 8 && i < RECORDS; k++, i += PRODUCERS) ids.push(String(i));
        await q.addBatch(ids);
      } else {
        await q.add(String(i));
        i += PRODUCERS;
      }
      await pause(rand);
    }
  });

  const consumers = Array.from({ length: CONSUMERS }, async (_, c) => {
    const r = q.reader();
    const rand = rng(100 + c);
    for (;;) {
      let got;
      try {
        got = await r.reserve({ signal: done.signal });
      } catch (err) {
        if (done.signal.aborted) return;
        throw err;
      }
      const id = Number(got.value);
      assert.equal(seen[id], 0, `record ${id} delivered twice`);
      seen[id] = 1;
      await pause(rand);
      await r.ack(got.offset);
      if (++delivered === RECORDS) done.abort();
    }
  });

  await Promise.all([...producers, ...consumers]);
  assert.equal(delivered, RECORDS);
  assert.equal(seen.indexOf(0), -1, 'every record delivered');
  const st = q.stats();
  assert.equal(st.committed, RECORDS);
  assert.equal(st.backlog, 0);
  assert.equal(st.inFlightBytes, 0);
  assert.ok(st.segments <= 2, `${st.segments} segments left`);
  assert.equal(st.corruptions + st.lostRecords + st.lostSegments, 0);
  await q.close();

  const again = await DiskQueue.open<string>(dir, { codec: codecs.utf8, segmentSize: 16 << 10 });
  const st2 = again.stats();
  assert.equal(st2.backlog, 0, 'empty after reopen');
  assert.equal(st2.corruptions + st2.lostRecords + st2.lostSegments + st2.foreignSegments, 0, 'undamaged after reopen');
  assert.equal(await again.reader().tryTake(), undefined);
  await again.close();
});
