/**
 * What `ferry forward` tells its user when something other than a delivery
 * goes wrong: damaged spool data it stepped past (reported and counted, exit
 * 1), a cursor it cannot write (exit 2 at open, before any delivery; exit 1
 * when a write fails during the run), the lines accepted before a line
 * the spool can never hold, a stop while it waits for a pipe or for a hung
 * delivery (exit 130), durations no timer can wait, and a URL's password in
 * its failure lines.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CliError } from '../../src/cli/common.js';
import { batchOf, httpTarget } from '../../src/cli/deliver.js';
import { forward } from '../../src/cli/forward.js';
import { FRAME_OVERHEAD, Spool } from '../../src/spool/index.js';
import { SEGMENT_HEADER_SIZE } from '../../src/spool/format.js';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { alive, spawnChild } from '../helpers/children.js';
import { orHang, waitFor } from '../stores/helpers.js';
import { CLI, ROOT, ferry, hasStackTrace, scratch } from './helpers.js';

/** A closed spool in `dir` holding `records`. */
async function spoolOf(dir: string, records: string[]): Promise<void> {
  const spool = await Spool.open(dir);
  try {
    for (const r of records) await spool.appendNoSync(Buffer.from(r));
    await spool.sync();
  } finally {
    await spool.close();
  }
}

describe('forward reports', { timeout: 120_000 }, () => {
  it('damaged spool data is reported once per span, the rest is delivered, and the exit status is 1', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const spoolDir = join(dir, 'spool');
      const records = Array.from({ length: 30 }, (_, i) => `rec-${String(i).padStart(3, '0')}`);
      await spoolOf(spoolDir, records);
      // One payload byte of the first record flipped: its checksum no longer matches.
      const seg = join(spoolDir, '00000000000000000001.seg');
      const bytes = readFileSync(seg);
      bytes[SEGMENT_HEADER_SIZE + FRAME_OVERHEAD] ^= 0xff;
      writeFileSync(seg, bytes);
      const out = join(dir, 'out.txt');
      const r = await ferry(['forward', '--dir', spoolDir, '--exec', `cat >> ${out}`, '--batch', '7', '/dev/null']);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stderr.match(/ferry: skipped damaged data: .*checksum/g)?.length, 1, r.stderr);
      assert.match(r.stderr, /1 damaged span\(s\) of the spool were skipped; their records are lost/);
      assert.equal(hasStackTrace(r.stderr), false);
      assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), records.slice(1));
    } finally {
      await cleanup();
    }
  });

  it('a cursor it cannot write at open: refused with exit 2 before anything is delivered (before: delivered, then exit 1, and again at every run); the records stay', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const spoolDir = join(dir, 'spool');
      await spoolOf(spoolDir, ['a', 'b', 'c']);
      rmSync(join(spoolDir, 'cursor'), { force: true });
      mkdirSync(join(spoolDir, 'cursor')); // where the cursor file goes: a directory
      const out = join(dir, 'out.txt');
      writeFileSync(out, '');
      let err: unknown;
      try {
        await forward('/dev/null', { dir: spoolDir, exec: `cat >> ${out}`, quiet: true });
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof CliError, `a CliError, got ${String(err)}`);
      assert.equal(err.exitCode, 2);
      assert.match(err.message, /cannot write .*cursor .*nothing was delivered.*the records stay queued/);
      assert.equal(readFileSync(out, 'utf8'), '');
      // Mended, the next run delivers them all, once.
      rmSync(join(spoolDir, 'cursor'), { recursive: true });
      await forward('/dev/null', { dir: spoolDir, exec: `cat >> ${out}`, quiet: true });
      assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), ['a', 'b', 'c']);
    } finally {
      await cleanup();
    }
  });

  it('a cursor write that fails during the run (through the file-system seam) ends it with exit 1 and says the records will come again', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const fs = new FaultyFileSystem();
      // The open's own writes go through; every cursor write after them fails.
      fs.inject({ step: 'write:cursor', error: 'EIO', times: Infinity });
      const input = join(dir, 'in.txt');
      writeFileSync(input, 'a\nb\nc\n');
      const out = join(dir, 'out.txt');
      let err: unknown;
      try {
        await forward(input, { dir: '/spool', exec: `cat >> ${out}`, quiet: true, fs });
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof CliError, `a CliError, got ${String(err)}`);
      assert.equal(err.exitCode, 1);
      assert.match(err.message, /cannot write .*cursor .*EIO.*delivered again/);
      assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), ['a', 'b', 'c']);
    } finally {
      await cleanup();
    }
  });

  it('a line the spool can never hold stops the intake as it passes that length; the lines before it count as accepted', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const input = join(dir, 'in.txt');
      writeFileSync(input, `one\ntwo\nthree\nfour\nfive\n${'x'.repeat(40_000)}\nafter\n`);
      const out = join(dir, 'out.txt');
      let err: unknown;
      try {
        await forward(input, { dir: join(dir, 'spool'), exec: `cat >> ${out}`, maxBytes: 30_000, quiet: true });
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof CliError, `a CliError, got ${String(err)}`);
      assert.equal(err.exitCode, 1);
      assert.match(err.message, /longer than 29988 bytes/);
      assert.match(err.message, /\b5 lines were accepted/);
      assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), ['one', 'two', 'three', 'four', 'five']);
    } finally {
      await cleanup();
    }
  });

  it('SIGTERM while reading a pipe stops it with 130 and delivers what it accepted', async () => {
    const { dir, cleanup } = await scratch();
    const out = join(dir, 'out.txt');
    const child = spawnChild(process.execPath, [...CLI, 'forward', '--dir', join(dir, 'spool'), '--exec', `cat >> ${out}`], { cwd: ROOT, stdio: ['pipe', 'ignore', 'pipe'] });
    try {
      let stderr = '';
      child.stderr!.on('data', (b: Buffer) => (stderr += b));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      child.stdin!.write('a\nb\nc\n'); // and the pipe stays open
      await waitFor(() => readFileSync(out, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean).length === 3, 60_000, 'the three lines');
      child.kill('SIGTERM');
      assert.equal(await orHang(exited, 'the exit'), 130, stderr);
      assert.doesNotMatch(stderr, /Premature close|stopped/);
    } finally {
      child.kill('SIGKILL');
      await cleanup();
    }
  });

  it('SIGTERM while reading a named pipe whose writer stays open stops it with 130', async () => {
    const { dir, cleanup } = await scratch();
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const out = join(dir, 'out.txt');
    const writeEnd = openSync(fifo, 'r+'); // r+: a FIFO opened both ways does not wait for a reader
    const writer = spawnChild('sh', ['-c', `printf 'a\\nb\\n'; exec sleep 1000`], { stdio: ['ignore', writeEnd, 'ignore'] });
    closeSync(writeEnd);
    const child = spawnChild(process.execPath, [...CLI, 'forward', '--dir', join(dir, 'spool'), '--exec', `cat >> ${out}`, fifo], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      let stderr = '';
      child.stderr!.on('data', (b: Buffer) => (stderr += b));
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      await waitFor(() => readFileSync(out, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean).length === 2, 60_000, 'the two lines');
      child.kill('SIGTERM');
      assert.equal(await orHang(exited, 'the exit, the writer still open'), 130, stderr);
    } finally {
      child.kill('SIGKILL');
      writer.kill('SIGKILL');
      await cleanup();
    }
  });

  it('a second signal exits at once while a delivery hangs, ending the command; the record stays for the next run', async () => {
    const { dir, cleanup } = await scratch();
    const pidFile = join(dir, 'pid');
    // stderr ignored: the hung command inherits it and would hold a pipe open past the exit.
    const child = spawnChild(process.execPath, [...CLI, 'forward', '--dir', join(dir, 'spool'), '--exec', `trap "" TERM; sleep 1000 & echo $! > ${pidFile}; wait`], { cwd: ROOT, stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    let sleeper = 0;
    try {
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      child.stdin!.end('only\n');
      await waitFor(() => { try { sleeper = Number(readFileSync(pidFile, 'utf8')); return sleeper > 0; } catch { return false; } }, 60_000, 'the delivery to start');
      // Two different signals: two of the same one sent together may arrive as one.
      child.kill('SIGTERM');
      child.kill('SIGINT');
      assert.equal(await orHang(exited, 'the exit'), 130);
      await waitFor(() => !alive(sleeper), 60_000, 'the command the delivery started to end');
      // Not committed: the next run (with a command that works) delivers it.
      const out = join(dir, 'out.txt');
      const again = await ferry(['forward', '--dir', join(dir, 'spool'), '--exec', `cat >> ${out}`, '/dev/null']);
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(readFileSync(out, 'utf8').split('\n').filter(Boolean), ['only']);
    } finally {
      for (const pid of [-child.pid!, sleeper]) {
        try {
          if (pid !== 0) process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await cleanup();
    }
  });

  it('segments of an unknown format version dropped at open are told and count as damage; a torn tail cut at open is told; drain tells the same', async () => {
    const { dir, cleanup } = await scratch();
    /** A spool whose segment 2 a future version wrote and whose newest segment is cut inside its last frame. */
    const damaged = async (spoolDir: string) => {
      const spool = await Spool.open(spoolDir, { segmentBytes: 60 });
      for (let i = 0; i < 9; i++) await spool.appendNoSync(Buffer.from(`rec-${i}`));
      await spool.sync();
      await spool.close();
      const seg = (n: number) => join(spoolDir, `${String(n).padStart(20, '0')}.seg`);
      const two = readFileSync(seg(2));
      two.writeUInt16BE(9, 6);
      writeFileSync(seg(2), two);
      const names = readdirSync(spoolDir).filter((f) => f.endsWith('.seg')).sort();
      const newest = join(spoolDir, names.at(-1)!);
      writeFileSync(newest, readFileSync(newest).subarray(0, statSync(newest).size - 2));
    };
    try {
      for (const command of ['forward', 'drain'] as const) {
        const spoolDir = join(dir, command);
        await damaged(spoolDir);
        const out = join(dir, `${command}.txt`);
        const r = command === 'forward' ? await ferry(['forward', '--dir', spoolDir, '--exec', `cat >> ${out}`, '/dev/null']) : await ferry(['drain', spoolDir]);
        assert.equal(r.code, 1, `${command}: ${r.stderr}`);
        assert.match(r.stderr, /opening .* dropped 1 segment\(s\) of an unknown format version/, command);
        assert.match(r.stderr, /opening .* cut 15 bytes of a torn tail/, `${command}: the last 17-byte frame, 2 bytes short`);
        assert.match(r.stderr, /1 damaged span\(s\)/, command);
      }
    } finally {
      await cleanup();
    }
  });

  it('a URL refused at the start names it with its password masked', async () => {
    const r = await ferry(['forward', '--dir', '/nonexistent-ferry-dir', '--http', 'http://alice:s3cr3t@/path', '/dev/null']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /alice:\*\*\*@/);
    assert.doesNotMatch(r.stderr, /s3cr3t/);
  });

  it('a URL quoted back from a mistyped option, or given where the file goes, shows its password masked', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const option = await ferry(['forward', '--dir', join(dir, 's1'), '--htp=http://u:s3cretPW@h/']);
      assert.equal(option.code, 2);
      assert.match(option.stderr, /unknown option '--htp=http:\/\/u:\*\*\*@h\/'/);
      const file = await ferry(['forward', '--dir', join(dir, 's2'), '--exec', 'cat', 'http://u:s3cretPW@h/']);
      assert.equal(file.code, 2);
      assert.match(file.stderr, /cannot read http:\/\/u:\*\*\*@h\/: /);
      for (const r of [option, file]) assert.doesNotMatch(r.stderr, /s3cretPW/);
    } finally {
      await cleanup();
    }
  });

  it('an HTTP failure names the URL with its password masked', async () => {
    const deliver = httpTarget('http://user:secret@127.0.0.1:1/path', { batch: 1, timeoutMs: 5_000 });
    try {
      await assert.rejects(deliver(batchOf([Buffer.from('x')])), (e: Error) => e.message.includes('http://user:***@127.0.0.1:1/path') && !e.message.includes('secret'));
    } finally {
      deliver.close();
    }
  });
});
