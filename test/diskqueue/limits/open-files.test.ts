/**
 * `maxOpenFiles` holds from the open on: 400 segments with
 * `maxOpenFiles: 32` open, drain and reclaim in a process whose descriptor
 * limit is 256, so a path that keeps one descriptor per segment (the open's
 * survey of the headers, its flush of what a previous process left unsynced,
 * the drain, the reclaim) fails with EMFILE.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DiskQueue } from '../../../src/diskqueue/index.js';
import { tempDir } from '../../helpers/tmp.js';

const CHILD = fileURLToPath(new URL('./child-open-files.ts', import.meta.url));
const SEGMENTS = 400;
/** One record of this size fills a 4096-byte segment: the next one rolls. */
const RECORD = 3000;

describe('maxOpenFiles under ulimit -n 256', () => {
  it('400 segments open, drain and reclaim with maxOpenFiles 32', async () => {
    const dir = tempDir();
    const q = await DiskQueue.open(dir, { segmentSize: 4096, maxSegments: 0, maxOpenFiles: 32 });
    await q.addBatch(Array.from({ length: SEGMENTS }, (_, i) => new Uint8Array(RECORD).fill(i & 0xff)));
    assert.equal(q.stats().segments, SEGMENTS);
    await q.close();

    const cmd = `ulimit -n 256 && exec "${process.execPath}" --import tsx "${CHILD}" "${dir}"`;
    const run = spawnSync('bash', ['-c', cmd], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(run.status, 0, `child failed: ${run.stderr}`);
    const out = JSON.parse(run.stdout);
    assert.equal(out.opened.segments, SEGMENTS);
    assert.equal(out.opened.backlog, SEGMENTS);
    assert.equal(out.opened.corruptions, 0);
    assert.equal(out.delivered, SEGMENTS);
    assert.equal(out.bytes, SEGMENTS * RECORD);
    assert.equal(out.drained.backlog, 0);
    assert.equal(out.drained.committed, SEGMENTS);
    assert.equal(out.drained.segments, 1, 'every drained segment but the tail was reclaimed');
    assert.equal(out.drained.unreclaimed, 0);
    assert.equal(out.reopened.backlog, 3);
    assert.equal(out.reopened.corruptions, 0);
    assert.equal(out.files, out.reopened.segments);
  });

  it('the limit is real: the same child without maxOpenFiles cannot open the queue', async () => {
    const dir = tempDir();
    const q = await DiskQueue.open(dir, { segmentSize: 4096, maxSegments: 0 });
    await q.addBatch(Array.from({ length: SEGMENTS }, () => new Uint8Array(RECORD)));
    await q.close();
    const script = `const { DiskQueue } = await import(${JSON.stringify(new URL('../../../src/diskqueue/index.ts', import.meta.url).href)});
      const q = await DiskQueue.open(${JSON.stringify(dir)}, { segmentSize: 4096, maxSegments: 0 });
      const r = q.reader(); while (await r.tryTake()); await q.close();`;
    const cmd = `ulimit -n 256 && exec "${process.execPath}" --import tsx --input-type=module -e '${script.replace(/'/g, `'\\''`)}'`;
    const run = spawnSync('bash', ['-c', cmd], { encoding: 'utf8', timeout: 120_000 });
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /EMFILE/);
  });
});
