/**
 * A child spawned through spawnChild does not outlive its test process, even
 * when that process is SIGKILLed (as the runner kills a file that outran its
 * timeout) and none of its own clean-up can run.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { it } from 'node:test';
import { waitFor } from '../stores/helpers.js';
import { alive } from './children.js';

it('a SIGKILLed test process takes the children it spawned with it', async () => {
  const parent = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'spawning-parent.ts')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let grandchild: number | undefined;
  try {
    let out = '';
    parent.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    await waitFor(() => /^\d+\n/.test(out), 120_000, 'the grandchild pid');
    grandchild = Number(out.trim());
    assert.ok(alive(grandchild), 'the grandchild runs');
    parent.kill('SIGKILL');
    await waitFor(() => !alive(grandchild!), 120_000, 'the grandchild to be reaped');
  } finally {
    parent.kill('SIGKILL');
    if (grandchild !== undefined && alive(grandchild)) process.kill(grandchild, 'SIGKILL');
  }
});
