import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT, scratch } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());

before(() => {
  // The demo runs the built CLI (dist/), as `npm start` does after its build.
  // Under FERRY_TEST_DIST=1 (.ci/run, right after `npm run build`) the other
  // CLI tests run from that dist/ at the same time: building again would
  // rewrite files under them (one read a half-written drain-spool.js).
  if (process.env.FERRY_TEST_DIST === '1' && existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) return;
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const res = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(res.status, 0, `build failed:\n${res.stdout}${res.stderr}`);
  assert.ok(existsSync(join(ROOT, 'dist', 'cli', 'main.js')));
});

/** Runs the demo with its temporary files under `work`, so the cleanup can be checked. */
function demo(args: string[], work: string) {
  return spawnSync(process.execPath, [join(ROOT, 'scripts', 'demo.mjs'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, TMPDIR: work },
  });
}

test('the demo pushes and drains given files byte for byte and reports rates', async () => {
  const a = join(tmp.dir, 'a.log');
  const b = join(tmp.dir, 'b.log');
  const lines = Array.from({ length: 12_000 }, (_, i) => (i % 5 === 0 ? '' : `event ${i} ${'.'.repeat(i % 40)}`));
  await writeFile(a, `${lines.join('\n')}\n`);
  await writeFile(b, 'no newline at the end'); // the demo newline-terminates it
  const work = join(tmp.dir, 'work');
  await mkdir(work);
  const res = demo([a, b], work);
  assert.equal(res.status, 0, res.stdout + res.stderr);
  assert.match(res.stdout, /2 files from arguments, 12001 lines/);
  assert.match(res.stdout, /push : 12001 records in [\d.]+ s, \d+ records\/s/);
  assert.match(res.stdout, /drain: 12001 records in [\d.]+ s, \d+ records\/s \(--exec-batch 5000\)/);
  assert.match(res.stdout, /verify after push: ok/);
  assert.match(res.stdout, /stats after push : backlog 12001/);
  assert.match(res.stdout, /stats after drain: backlog 0/);
  assert.match(res.stdout, /output is byte-identical to the input/);
  assert.deepEqual(await readdir(work), [], 'the temporary directory was removed');
});

test('the demo fails when it has no input lines', () => {
  const res = demo([join(tmp.dir, 'does-not-exist')], tmp.dir);
  assert.equal(res.status, 1);
  assert.match(res.stderr, /ferry demo FAILED: no input lines found/);
});
