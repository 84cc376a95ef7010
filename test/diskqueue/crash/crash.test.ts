/**
 * Crash tests with real processes and real files. A child process
 * (child-writer.ts) adds records, and in some rounds reserves and commits,
 * printing what resolved; the parent SIGKILLs it at a random moment, reopens
 * the directory and checks the at-least-once contract:
 *
 * - every add the child printed as resolved is present, unless a commit took
 *   it; records come in the order they were added;
 * - nothing that was never added appears (the only add the child may have
 *   started without printing is the one after the last it printed);
 * - committed records do not come back: everything present lies after the
 *   persisted commit cursor, which is at or after the last printed commit.
 *
 * In CI 21 kills: 5 for the add-only test, then 8 each over per-op
 * and `syncEvery: 10` rounds with consuming; FERRY_LONG=1 (`npm run
 * test:long`) runs the full 50 (5, 23, 22). Rounds continue one directory,
 * so each reopen also recovers what earlier kills left. The timeouts only
 * catch a hang: a round is a process start, a kill and a reopen.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnChild } from '../../helpers/children.js';
import { fileURLToPath } from 'node:url';
import { DiskQueue, codecs } from '../../../src/diskqueue/index.js';
import { tempDir } from '../../helpers/tmp.js';
import { runs } from '../../helpers/long.js';

const CHILD = fileURLToPath(new URL('./child-writer.ts', import.meta.url));

interface Round {
  added: number[];
  reserved: number[];
  committed: number[];
}

/** Starts the writer, kills it `killAfterMs` after it is ready, and returns what it printed. */
function killedRound(dir: string, policy: string, start: number, commitEvery: number, killAfterMs: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const child = spawnChild(process.execPath, ['--import', 'tsx', CHILD, dir, policy, String(start), String(commitEvery)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const round: Round = { added: [], reserved: [], committed: [] };
    let buffered = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!; // a partial line was not fully printed: it does not count
      for (const line of lines) {
        const [kind, n] = line.split(' ');
        if (kind === 'ready') timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
        else if (kind === 'A') round.added.push(Number(n));
        else if (kind === 'R') round.reserved.push(Number(n));
        else if (kind === 'C') round.committed.push(Number(n));
      }
    });
    child.on('error', reject);
    // 'close', not 'exit': the child's last lines may still sit in the pipe
    // when it exits, and a round judged without them would count the adds
    // they report as never made.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal !== 'SIGKILL') reject(new Error(`writer exited with ${code ?? signal} before it was killed`));
      else resolve(round);
    });
  });
}

/** Every record in the queue, in order, read without committing anything. */
async function contents(dir: string): Promise<number[]> {
  const q = await DiskQueue.open<string>(dir, { codec: codecs.utf8, segmentSize: 64 * 1024, maxSegments: 0 });
  const r = q.reader();
  const out: number[] = [];
  for (;;) {
    const got = await r.tryReserve();
    if (!got) break;
    assert.match(got.value, /^x\d+$/, 'no corrupt output');
    out.push(Number(got.value.slice(1)));
  }
  const st = q.stats();
  assert.equal(st.corruptions, 0, 'a killed process leaves no damage');
  await q.close(); // nothing committed: the next round starts from the same cursor
  return out;
}

/** Deterministic "random" delays, so a failure can be rerun as it was. */
function delays(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return 5 + (s % 120);
  };
}

/**
 * Runs `kills` rounds in one directory and checks the contract after each.
 * The model: `present` is what must be in the queue (added, not known to be
 * committed), `maybe` what may be (an add in flight at the kill).
 */
async function rounds(policy: string, commitEvery: number, kills: number, seed: number): Promise<{ added: number; committed: number }> {
  const dir = tempDir('ferry-crash-');
  const next = delays(seed);
  let start = 0;
  const attempted = new Set<number>();
  const resolvedAdds: number[] = [];
  let lastCommit = -1;
  let totalAdded = 0;
  for (let k = 0; k < kills; k++) {
    const round = await killedRound(dir, policy, start, commitEvery, next());
    for (const i of round.added) attempted.add(i);
    const inFlight = (round.added.length ? round.added[round.added.length - 1]! : start - 1) + 1;
    attempted.add(inFlight);
    resolvedAdds.push(...round.added);
    totalAdded += round.added.length;
    if (round.committed.length) lastCommit = round.committed[round.committed.length - 1]!;
    const maxReserved = Math.max(lastCommit, ...round.reserved);

    const got = await contents(dir);
    for (let j = 1; j < got.length; j++) assert.ok(got[j]! > got[j - 1]!, `order: ${got[j - 1]} then ${got[j]}`);
    for (const i of got) assert.ok(attempted.has(i), `x${i} was never added`);
    const first = got.length ? got[0]! : Infinity;
    assert.ok(first > lastCommit, `x${first} came back after the commit through x${lastCommit} resolved`);
    const present = new Set(got);
    for (const i of resolvedAdds) {
      if (i <= lastCommit || present.has(i)) continue;
      // Only an unprinted commit, of records the child had reserved, may have taken it.
      assert.ok(i < first && i <= maxReserved + 1, `resolved add x${i} is missing (round ${k}, ${policy})`);
    }
    // The commit cursor that persisted is where delivery now starts. An empty
    // queue means a commit (printed or not) took everything attempted so far:
    // without this, a later round would count those records as missing.
    lastCommit = Math.max(lastCommit, got.length ? first - 1 : inFlight);
    start = inFlight + 1;
  }
  return { added: totalAdded, committed: lastCommit };
}

describe('SIGKILL a writer at random points', () => {
  it('add only, default policy: every printed add survives, in order, and nothing else appears', { timeout: 600_000 }, async () => {
    const r = await rounds('perop', 0, 5, 7);
    assert.ok(r.added > 0, 'the writer added records before it was killed');
  });

  it('per-op, reserving and committing as it adds', { timeout: 900_000 }, async () => {
    const r = await rounds('perop', 7, runs(8, 23), 11);
    assert.ok(r.added > 0 && r.committed >= 0);
  });

  it('syncEvery: 10, reserving and committing as it adds', { timeout: 900_000 }, async () => {
    const r = await rounds('every10', 7, runs(8, 22), 13);
    assert.ok(r.added > 0 && r.committed >= 0);
  });
});
