/**
 * `ferry drain` on a DiskQueue and on a spool alike: `--follow` lets go of
 * the directory while idle, so a producer can push meanwhile (the spool
 * drain held it for good); a second signal ends a drain whose delivery hangs
 * (the spool drain waited for the command); an empty `--exec` is refused.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { alive, spawnChild } from '../helpers/children.js';
import { orHang, waitFor } from '../stores/helpers.js';
import { CLI, ferry, scratch, ROOT } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());

type Format = 'diskqueue' | 'spool';
const FORMATS: Format[] = ['diskqueue', 'spool'];

/** A directory of `format` holding `input`'s lines. */
async function filled(name: string, format: Format, input: string): Promise<string> {
  const q = join(tmp.dir, `${name}-${format}`);
  if (format === 'spool') {
    // An empty cursor file makes a directory a spool's (CLI.md).
    mkdirSync(q);
    writeFileSync(join(q, 'cursor'), '');
  }
  const pushed = await ferry(['push', q, '-q'], { input });
  assert.equal(pushed.code, 0, pushed.stderr);
  return q;
}

for (const format of FORMATS) {
  test(`${format}: drain --follow delivers records pushed later by another process, and SIGTERM ends it with exit 0`, async (t) => {
    const q = await filled('follow', format, 'first\n');
    const child = spawnChild(process.execPath, [...CLI, 'drain', q, '--follow', '--poll-ms', '50'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b));
    child.stderr.on('data', (b: Buffer) => (err += b));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const seen = (text: string) => waitFor(() => out.includes(text), 30_000, `${JSON.stringify(text)} on the follower's stdout (stderr: ${err})`);

    await seen('first\n');
    // The follower lets go of the lock while idle; the producer waits for it if they collide.
    const pushed = await ferry(['push', q, '--lock-timeout', '20000', '-q'], { input: 'second\nthird\n' });
    assert.equal(pushed.code, 0, pushed.stderr);
    await seen('third\n');
    child.kill('SIGTERM');
    assert.equal(await exited, 0, err);
    assert.equal(out, 'first\nsecond\nthird\n');
    assert.match(err, /drained 3 records/);
    assert.equal((await ferry(['drain', q, '-q'])).stdout.length, 0, 'all three were committed');
  });

  /**
   * A drain of one record whose `--exec` command hangs (its `sleep` ignores
   * SIGTERM): `stop` signals the drain once the delivery has started; the
   * drain must exit with `status`, the command must end with it, and the
   * record must come back to the next drain.
   */
  const hungDrain = async (name: string, stop: (child: ChildProcess) => void, status: number) => {
    const q = await filled(name, format, 'only\n');
    const pidFile = join(tmp.dir, `${name}-pid-${format}`);
    // stderr ignored: the hung command inherits it and would hold a pipe open past the exit.
    const child = spawnChild(process.execPath, [...CLI, 'drain', q, '--exec', `trap "" TERM; sleep 1000 & echo $! > ${pidFile}; wait`], { cwd: ROOT, stdio: ['ignore', 'ignore', 'ignore'], detached: true });
    let sleeper = 0;
    try {
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      await waitFor(() => {
        try {
          sleeper = Number(readFileSync(pidFile, 'utf8'));
          return sleeper > 0;
        } catch {
          return false;
        }
      }, 60_000, 'the delivery to start');
      stop(child);
      assert.equal(await orHang(exited, 'the exit'), status);
      await waitFor(() => !alive(sleeper), 60_000, 'the command the delivery started to end with the drain');
      const again = await ferry(['drain', q, '-q']);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(again.stdout.toString(), 'only\n', 'not committed: delivered by the next drain');
    } finally {
      for (const pid of [-child.pid!, sleeper]) {
        try {
          if (pid !== 0) process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  };

  test(`${format}: a second signal ends a drain whose delivery hangs, with 130, and the command with it (though it ignores SIGTERM); the record stays for the next drain`, () =>
    // Two different signals: two of the same one sent together may arrive as one.
    hungDrain('signals', (child) => void (child.kill('SIGTERM'), child.kill('SIGINT')), 130));

  test(`${format}: a hangup (the terminal closed) ends the drain with 129 and its hung command with it; the record stays`, () =>
    hungDrain('hangup', (child) => void child.kill('SIGHUP'), 129));

  test(`${format}: an empty --exec is refused with exit 2 and nothing is committed`, async () => {
    const q = await filled('empty-exec', format, 'a\nb\n');
    for (const cmd of ['', '   ']) {
      const r = await ferry(['drain', q, '--exec', cmd]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--exec needs a command/);
    }
    assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), 'a\nb\n');
  });
}
