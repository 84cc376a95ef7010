/**
 * Crash tests with real processes and files: a child (child-writer.ts)
 * appends and commits, printing what resolved; the parent SIGKILLs it at a
 * random moment, reopens the directory and checks at-least-once:
 *
 * - every append the child printed is present unless a printed commit took it;
 * - records come in order, and nothing that was never appended appears;
 * - nothing at or before the last printed commit comes back (commitSync);
 * - a killed process leaves no loss: no corruption, nothing discarded beyond
 *   the one frame that may have been in flight.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnChild } from '../../helpers/children.js';
import { cpSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Spool } from '../../../src/spool/index.js';
import { tempDir } from '../../helpers/tmp.js';

const CHILD = fileURLToPath(new URL('./child-writer.ts', import.meta.url));

function killedRound(dir: string, mode: string, start: number, killAfterMs: number): Promise<{ added: number[]; committed: number[] }> {
  return new Promise((resolve, reject) => {
    const child = spawnChild(process.execPath, ['--import', 'tsx', CHILD, dir, mode, String(start)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const out = { added: [] as number[], committed: [] as number[] };
    let buf = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buf += chunk;
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const line of lines) {
        const [k, n] = line.split(' ');
        if (k === 'ready') timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
        else if (k === 'A') out.added.push(Number(n));
        else if (k === 'C') out.committed.push(Number(n));
      }
    });
    child.on('error', reject);
    child.on('close', (code, signal) => { // 'close': the last lines may still be in the pipe at exit
      clearTimeout(timer);
      if (signal !== 'SIGKILL') reject(new Error(`writer exited with ${code ?? signal}`));
      else resolve(out);
    });
  });
}

/** What a reopen delivers, read from a copy (pop does not advance without a commit, and commits here must not count). */
async function contents(dir: string): Promise<number[]> {
  const copy = tempDir('ferry-spool-copy-');
  cpSync(dir, copy, { recursive: true });
  const s = await Spool.open(copy, { segmentBytes: 4096 });
  const got: number[] = [];
  for (let p = await s.pop(); p; p = await s.pop()) {
    const v = new TextDecoder().decode(p.data);
    assert.match(v, /^x\d+$/);
    got.push(Number(v.slice(1)));
    await p.commit();
  }
  const st = s.stats();
  assert.equal(st.lostBytes, 0, 'a killed process leaves no damage');
  assert.ok(st.discardedBytes <= 12 + 12, `discarded ${st.discardedBytes}: at most the frame in flight`);
  await s.close();
  return got;
}

async function rounds(mode: string, kills: number, seed: number): Promise<number> {
  const dir = tempDir('ferry-spool-crash-');
  let rnd = seed;
  let start = 0;
  let lastCommit = -1;
  const resolved: number[] = [];
  let total = 0;
  for (let k = 0; k < kills; k++) {
    rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
    const r = await killedRound(dir, mode, start, 20 + (rnd % 150));
    resolved.push(...r.added);
    total += r.added.length;
    if (r.committed.length) lastCommit = Math.max(lastCommit, r.committed[r.committed.length - 1]!);
    const got = await contents(dir);
    for (let j = 1; j < got.length; j++) assert.ok(got[j]! > got[j - 1]!, `order: ${got[j - 1]} then ${got[j]}`);
    const maxAttempted = (r.added.length ? r.added[r.added.length - 1]! : start - 1) + (mode === 'group' ? 10 : 1);
    for (const i of got) assert.ok(i <= maxAttempted, `x${i} was never appended`);
    if (got.length) assert.ok(got[0]! > lastCommit, `x${got[0]} came back after the commit through x${lastCommit}`);
    const present = new Set(got);
    const first = got.length ? got[0]! : Infinity;
    for (const i of resolved) {
      if (i <= lastCommit || present.has(i)) continue;
      // Only a commit the child made but had not printed yet may have taken it.
      assert.ok(i < first, `acknowledged x${i} is missing (round ${k})`);
    }
    if (got.length) lastCommit = Math.max(lastCommit, got[0]! - 1);
    start = maxAttempted + 1;
  }
  return total;
}

describe('SIGKILL a spool writer at random points', () => {
  // The timeouts only catch a hang: a round is a process start, a kill and a reopen.
  it('append per record, committing as it goes', { timeout: 600_000 }, async () => {
    assert.ok((await rounds('single', 12, 3)) > 0);
  });
  it('appendNoSync groups of 10 with sync, committing as it goes', { timeout: 600_000 }, async () => {
    assert.ok((await rounds('group', 12, 5)) > 0);
  });
  it('append per record, committing batches of 7 with one commitBatch each', { timeout: 600_000 }, async () => {
    assert.ok((await rounds('batch', 12, 7)) > 0);
  });
});
