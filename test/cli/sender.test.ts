/**
 * The sender of `ferry forward` (src/cli/sender.ts) against a spool on the
 * in-memory file system and a delivery the test answers by hand: never more
 * than `concurrency` deliveries outstanding, every record committed only
 * once it and every record before it were accepted, a failed delivery in
 * the middle retried while nothing after it is committed, and every record
 * delivered and committed in the end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { Spool } from '../../src/spool/index.js';
import { runSender, type SenderCounts } from '../../src/cli/sender.js';
import { recordAt } from '../../src/cli/deliver.js';

const RUNS = Number(process.env.FERRY_SENDER_RUNS ?? 60);
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const rec = (i: number) => `r${String(i).padStart(3, '0')}`;

interface Call {
  records: string[];
  settled: boolean;
  resolve(): void;
  reject(err: Error): void;
}

/** A spool holding `n` records, on a small segment size so a window spans segments. */
async function filledSpool(n: number): Promise<Spool> {
  const spool = await Spool.open('/s', { fs: new FaultyFileSystem(), segmentBytes: 4096 });
  for (let i = 0; i < n; i++) await spool.appendNoSync(enc(`${rec(i)}${'.'.repeat(200)}`.slice(0, 4 + (i % 5) * 40)));
  await spool.sync();
  return spool;
}

async function until(cond: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** A run of the sender whose deliveries wait for the test to answer them. */
function harness(spool: Spool, n: number, batch: number, concurrency: number) {
  const calls: Call[] = [];
  const accepted = new Set<string>();
  const violations: string[] = [];
  const outstanding = () => calls.filter((c) => !c.settled);
  /** Records accepted from the first one on, without a gap. */
  const acceptedPrefix = () => {
    let i = 0;
    while (i < n && accepted.has(rec(i))) i++;
    return i;
  };
  const check = (where: string) => {
    const committed = spool.stats().committed;
    if (committed > acceptedPrefix()) violations.push(`${where}: ${committed} committed, but only the first ${acceptedPrefix()} were accepted`);
    if (outstanding().length > concurrency) violations.push(`${where}: ${outstanding().length} deliveries outstanding, more than ${concurrency}`);
  };
  const counts: SenderCounts = { out: 0, retries: 0, lastError: '', damaged: 0 };
  const stop = new AbortController();
  let done = false;
  const run = runSender(
    spool,
    (data) =>
      new Promise<void>((resolve, reject) => {
        const records = data.starts.map((_, k) => dec(recordAt(data, k)).slice(0, 4));
        const call: Call = {
          records,
          settled: false,
          resolve: () => {
            call.settled = true;
            for (const r of records) accepted.add(r);
            resolve();
          },
          reject: (err) => {
            call.settled = true;
            reject(err);
          },
        };
        calls.push(call);
        check(`delivery ${calls.length}`);
      }),
    { batch, concurrency, retryBaseMs: 1, retryMaxMs: 2 },
    counts,
    stop.signal,
    { done: () => true, ended: Promise.resolve() },
  ).finally(() => (done = true));
  return { calls, outstanding, check, violations, counts, run, stop, isDone: () => done, acceptedPrefix };
}

test('at most N deliveries outstanding; one failing in the middle is retried and nothing after it is committed before it', { timeout: 60_000 }, async () => {
  const spool = await filledSpool(10);
  const h = harness(spool, 10, 1, 3);
  try {
    await until(() => h.outstanding().length === 3, 'three deliveries at once');
    // Let the sender run on: it must not start a fourth while three are outstanding.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.calls.map((c) => c.records), [['r000'], ['r001'], ['r002']]);

    h.calls[1]!.reject(new Error('refused')); // the middle one fails
    h.calls[2]!.resolve(); // the one after it is accepted first
    h.calls[0]!.resolve();
    await until(() => h.calls.some((c, i) => i > 2 && c.records[0] === 'r001'), 'the retry of r001');
    h.check('after the retry started');
    assert.equal(spool.stats().committed, 1, 'r000 is committed; r002 waits for r001');
    assert.ok(!h.calls.some((c) => c.records[0] === 'r003') || h.outstanding().length <= 3);

    // Now answer everything as it comes.
    while (!h.isDone()) {
      for (const c of h.outstanding()) c.resolve();
      await new Promise((r) => setTimeout(r, 1));
    }
    await h.run;
    assert.deepEqual(h.violations, []);
    assert.equal(spool.stats().committed, 10);
    assert.equal(h.counts.out, 10);
    assert.equal(h.counts.retries, 1);
    assert.equal(await spool.pop(), undefined, 'the spool is empty');
  } finally {
    h.stop.abort();
    for (const c of h.outstanding()) c.resolve();
    await h.run.catch(() => {});
    await spool.close();
  }
});

test(`sender: ${RUNS} random answer orders keep the window and the commit order`, { timeout: 300_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 14 }),
      fc.array(fc.record({ pick: fc.nat(7), ok: fc.boolean() }), { maxLength: 40 }),
      async (concurrency, batch, n, answers) => {
        const spool = await filledSpool(n);
        const h = harness(spool, n, batch, concurrency);
        try {
          for (const a of answers) {
            await until(() => h.outstanding().length > 0 || h.isDone(), 'a delivery');
            if (h.isDone()) break;
            const open = h.outstanding();
            const call = open[a.pick % open.length]!;
            if (a.ok) call.resolve();
            else call.reject(new Error('refused'));
            h.check('after an answer');
            await new Promise((r) => setImmediate(r));
            h.check('a turn later');
          }
          while (!h.isDone()) {
            for (const c of h.outstanding()) c.resolve();
            h.check('finishing');
            await new Promise((r) => setTimeout(r, 1));
          }
          await h.run;
          assert.deepEqual(h.violations, []);
          // Fresh deliveries cover the records in spool order; a retry repeats its records.
          const firsts: string[] = [];
          const seen = new Set<string>();
          for (const c of h.calls) {
            const fresh = c.records.filter((r) => !seen.has(r));
            assert.ok(fresh.length === 0 || fresh.length === c.records.length, `a delivery mixes new and retried records: ${c.records}`);
            for (const r of fresh) (seen.add(r), firsts.push(r));
            assert.ok(c.records.length <= batch);
          }
          assert.deepEqual(firsts, Array.from({ length: n }, (_, i) => rec(i)));
          assert.equal(spool.stats().committed, n);
          assert.equal(h.acceptedPrefix(), n);
          assert.equal(await spool.pop(), undefined);
        } finally {
          h.stop.abort();
          for (const c of h.outstanding()) c.resolve();
          await h.run.catch(() => {});
          await spool.close();
        }
      },
    ),
    { numRuns: RUNS },
  );
});

test('stopped mid-way, it commits only the accepted prefix and leaves the rest in the spool', { timeout: 60_000 }, async () => {
  const spool = await filledSpool(6);
  const h = harness(spool, 6, 1, 3);
  try {
    await until(() => h.outstanding().length === 3, 'three deliveries');
    h.calls[0]!.resolve();
    h.calls[2]!.resolve();
    await until(() => spool.stats().committed === 1, 'r000 committed');
    h.stop.abort();
    h.calls[1]!.reject(new Error('refused'));
    for (const c of h.outstanding()) c.reject(new Error('refused'));
    await h.run;
    assert.deepEqual(h.violations, []);
    assert.equal(spool.stats().committed, 1);
    const next = await spool.pop();
    assert.equal(dec(next!.data).slice(0, 4), 'r001', 'r001 (refused) and r002 (accepted after it) stay for the next run');
  } finally {
    for (const c of h.outstanding()) c.resolve();
    await h.run.catch(() => {});
    await spool.close();
  }
});

test('a stop while every delivery of a full window waits out a long retry ends the sender, committing nothing', { timeout: 30_000 }, async () => {
  const spool = await filledSpool(8);
  const counts: SenderCounts = { out: 0, retries: 0, lastError: '', damaged: 0 };
  const stop = new AbortController();
  let calls = 0;
  const run = runSender(
    spool,
    async () => {
      calls++;
      throw new Error('refused');
    },
    // A retry wait of minutes: only the stop can end it.
    { batch: 2, concurrency: 2, retryBaseMs: 600_000, retryMaxMs: 600_000 },
    counts,
    stop.signal,
    { done: () => true, ended: Promise.resolve() },
  );
  try {
    await until(() => counts.retries === 2, 'both deliveries of the window refused');
    assert.equal(calls, 2, 'a full window starts nothing more');
    stop.abort();
    await run;
    assert.equal(spool.stats().committed, 0);
    assert.equal(counts.out, 0);
    assert.equal(dec((await spool.pop())!.data).slice(0, 4), 'r000', 'every record stays for the next run');
  } finally {
    stop.abort();
    await run.catch(() => {});
    await spool.close();
  }
});

/** Resolves 'ended' when `run` does, or 'hung' after `ms` (a deadline that only catches a hang). */
function endsOrHangs(run: Promise<void>, ms = 60_000): Promise<'ended' | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), ms)));
  return Promise.race([run.then(() => 'ended' as const), hung]).finally(() => clearTimeout(timer));
}

// The idle look is set to an hour in both: only the input's end can end these runs.
const NO_IDLE_LOOK = { batch: 10, concurrency: 2, retryBaseMs: 1, retryMaxMs: 2, idlePollMs: 3_600_000 };

test('an idle sender on an empty spool is woken by the end of the input, not by its next look', { timeout: 120_000 }, async () => {
  const spool = await Spool.open('/s', { fs: new FaultyFileSystem() });
  const stop = new AbortController();
  let done = false;
  let end!: () => void;
  const ended = new Promise<void>((r) => (end = r));
  let delivered = 0;
  const run = runSender(spool, async (d) => void (delivered += d.starts.length), NO_IDLE_LOOK, { out: 0, retries: 0, lastError: '', damaged: 0 }, stop.signal, { done: () => done, ended });
  try {
    // Let it find the spool empty and wait.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    await spool.append(enc('last'));
    done = true;
    end();
    assert.equal(await endsOrHangs(run), 'ended');
    assert.equal(delivered, 1, 'the record appended before the end was delivered');
    assert.equal(spool.stats().committed, 1);
  } finally {
    stop.abort();
    await run.catch(() => {});
    await spool.close();
  }
});

test('input that ends while the sender pops (its wake-up lost: nothing waited yet) is looked at again, not waited for', { timeout: 120_000 }, async () => {
  const spool = await Spool.open('/s', { fs: new FaultyFileSystem() });
  const stop = new AbortController();
  // The first look says "not done"; the end has already been announced, so
  // its wake-up runs while the sender's first pop is under way.
  let looks = 0;
  const run = runSender(spool, async () => {}, NO_IDLE_LOOK, { out: 0, retries: 0, lastError: '', damaged: 0 }, stop.signal, { done: () => looks++ > 0, ended: Promise.resolve() });
  try {
    assert.equal(await endsOrHangs(run), 'ended');
    assert.ok(looks >= 2, `the sender looked at the input ${looks} times`);
  } finally {
    stop.abort();
    await run.catch(() => {});
    await spool.close();
  }
});
