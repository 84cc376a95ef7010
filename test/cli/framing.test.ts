import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeRecords, recordSplitter, FramingError, type Framing } from '../../src/cli/framing.js';

/** Splits `input` cut at every position in `cuts`, returning the records as strings. */
function split(framing: Framing, input: Buffer, cuts: number[]): Buffer[] {
  const s = recordSplitter(framing);
  const out: Buffer[] = [];
  let at = 0;
  for (const c of [...cuts, input.length]) {
    out.push(...s.push(input.subarray(at, c)).map((b) => Buffer.from(b)));
    at = c;
  }
  out.push(...s.end());
  return out;
}

test('lines: every single cut point gives the same records', () => {
  const input = Buffer.from('ab\n\nc\r\ndef\nlast');
  const whole = split('lines', input, []).map(String);
  assert.deepEqual(whole, ['ab', '', 'c\r', 'def', 'last']);
  for (let i = 0; i <= input.length; i++) {
    for (let j = i; j <= input.length; j++) assert.deepEqual(split('lines', input, [i, j]).map(String), whole, `cuts ${i},${j}`);
  }
});

test('lines: a trailing newline ends the last record; no empty record after it', () => {
  assert.deepEqual(split('lines', Buffer.from('a\n'), []).map(String), ['a']);
  assert.deepEqual(split('lines', Buffer.from('\n'), []).map(String), ['']);
  assert.deepEqual(split('lines', Buffer.from(''), []), []);
});

test('raw: every single and double cut point gives the same records', () => {
  const records = [Buffer.from('hello'), Buffer.alloc(0), Buffer.from([0, 10, 255]), Buffer.alloc(0)];
  const input = encodeRecords(records, 'raw');
  assert.equal(input.length, 4 * 4 + 5 + 3);
  for (let i = 0; i <= input.length; i++) {
    for (let j = i; j <= input.length; j++) assert.deepEqual(split('raw', input, [i, j]), records, `cuts ${i},${j}`);
  }
});

test('raw: a stream cut at any point inside a record or prefix is a FramingError carrying the records before it', () => {
  const input = encodeRecords([Buffer.from('abc'), Buffer.from('defg')], 'raw');
  for (let cut = 1; cut < input.length; cut++) {
    if (cut === 7) continue; // a record boundary: not a fault
    const s = recordSplitter('raw');
    const got = s.push(input.subarray(0, cut));
    assert.throws(() => s.end(), FramingError, `cut at ${cut}`);
    assert.equal(got.length, cut >= 7 ? 1 : 0);
  }
});

test('encodeRecords lines: each record followed by a newline', () => {
  assert.equal(encodeRecords([Buffer.from('a'), Buffer.alloc(0), Buffer.from('bc')], 'lines').toString(), 'a\n\nbc\n');
});
