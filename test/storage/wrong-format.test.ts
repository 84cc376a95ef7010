/**
 * A directory of the other format is refused, never written: `Spool.open` on
 * a DiskQueue's directory and `DiskQueue.open` on a spool's throw
 * `WrongFormatError` naming the files found, before creating anything; files
 * of neither format (a README, a dotfile) are ignored by both.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue, codecs } from '../../src/diskqueue/index.js';
import { Spool } from '../../src/spool/index.js';
import { WrongFormatError } from '../../src/errors.js';
import { tempDir } from '../helpers/tmp.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const vals = ['a', 'b', 'c', 'd', 'e'];
const list = (dir: string) => readdirSync(dir).sort();

async function diskQueueWith(dir: string): Promise<void> {
  const q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  try {
    for (const v of vals) await q.add(v);
  } finally {
    await q.close();
  }
}

async function spoolWith(dir: string): Promise<void> {
  const s = await Spool.open(dir);
  try {
    for (const v of vals) await s.append(enc(v));
  } finally {
    await s.close();
  }
}

async function drainQueue(dir: string): Promise<string[]> {
  const q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  try {
    const r = q.reader();
    const out: string[] = [];
    for (let got = await r.tryTake(); got; got = await r.tryTake()) out.push(got.value);
    return out;
  } finally {
    await q.close();
  }
}

async function drainSpool(dir: string): Promise<string[]> {
  const s = await Spool.open(dir);
  try {
    const out: string[] = [];
    for (let p = await s.pop(); p; p = await s.pop()) {
      out.push(dec(p.data));
      await p.commit();
    }
    return out;
  } finally {
    await s.close();
  }
}

describe('a directory of the other format', () => {
  it('Spool.open on a DiskQueue directory throws WrongFormatError and writes nothing; the queue keeps its records', async () => {
    const dir = tempDir();
    await diskQueueWith(dir);
    const before = list(dir);
    await assert.rejects(Spool.open(dir), (e) => {
      assert.ok(e instanceof WrongFormatError, String(e));
      assert.equal(e.code, 'ERR_WRONG_FORMAT');
      assert.equal(e.found, 'diskqueue');
      assert.ok(e.files.includes('data.00000001'), e.files.join());
      assert.match(e.message, /data\.00000001/);
      assert.match(e.message, /DiskQueue\.open/);
      return true;
    });
    assert.deepEqual(list(dir), before, 'no .seg, no cursor');
    assert.deepEqual(await drainQueue(dir), vals);
  });

  it('DiskQueue.open on a spool directory throws WrongFormatError and writes nothing; the spool keeps its records', async () => {
    const dir = tempDir();
    await spoolWith(dir);
    const before = list(dir);
    await assert.rejects(DiskQueue.open(dir), (e) => {
      assert.ok(e instanceof WrongFormatError, String(e));
      assert.equal(e.found, 'spool');
      assert.ok(e.files.includes('cursor') && e.files.includes('00000000000000000001.seg'), e.files.join());
      assert.match(e.message, /Spool\.open/);
      return true;
    });
    assert.deepEqual(list(dir), before, 'no data.* segment');
    assert.deepEqual(await drainSpool(dir), vals);
  });

  it('either file alone is enough: a lone cursor refuses a DiskQueue, a non-canonical data.* name refuses a spool', async () => {
    const a = tempDir();
    writeFileSync(join(a, 'cursor'), '');
    await assert.rejects(DiskQueue.open(a), WrongFormatError);
    assert.deepEqual(list(a), ['cursor']);
    const b = tempDir();
    writeFileSync(join(b, 'data.000000001'), '');
    await assert.rejects(Spool.open(b), WrongFormatError);
    assert.deepEqual(list(b), ['data.000000001']);
  });

  it('files of neither format are ignored by both opens', async () => {
    for (const open of [(d: string) => DiskQueue.open(d), (d: string) => Spool.open(d)]) {
      const dir = tempDir();
      writeFileSync(join(dir, 'README'), 'spool for the agent\n');
      writeFileSync(join(dir, '.gitkeep'), '');
      writeFileSync(join(dir, 'data.bak'), '');
      const q = await open(dir);
      await q.close();
      assert.ok(list(dir).includes('README'));
    }
  });
});
