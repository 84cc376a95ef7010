/**
 * A `ferry forward` run on the in-memory file system that is expected to
 * fail (a fault or a full disk injected through the seam): its error, and
 * what the target received.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { forward } from '../../src/cli/forward.js';
import { CliError } from '../../src/cli/common.js';
import type { FaultyFileSystem } from '../../src/storage/faulty.js';

/**
 * Forwards `lines` from a file in `dir` to `cat >> out` through a spool on
 * `fs` (in batches of 50, a sync per `syncBatch` lines); asserts that it
 * ends with a `CliError` of exit status 1 and returns it with the lines
 * delivered, in the order they arrived.
 */
export async function forwardFailing(dir: string, lines: string[], fs: FaultyFileSystem, syncBatch: number): Promise<{ err: CliError; delivered: string[] }> {
  const input = join(dir, 'in.txt');
  writeFileSync(input, `${lines.join('\n')}\n`);
  const out = join(dir, 'out.txt');
  let err: unknown;
  try {
    await forward(input, { dir: '/spool', exec: `cat >> ${out}`, batch: 50, syncBatch, quiet: true, fs });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof CliError, `a CliError, got ${err}`);
  assert.equal(err.exitCode, 1);
  return { err, delivered: readFileSync(out, 'utf8').split('\n').filter(Boolean) };
}
