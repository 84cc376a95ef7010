import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { encodeRecords, recordSplitter, recordLimit, FramingError, LineSplitter, MAX_RECORD_BYTES, TEST_LIMIT_ENV, type Framing } from '../../src/cli/framing.js';
import { ROOT } from './helpers.js';

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

test('lines: the record limit holds at every chunk cut, whether the line ends in the chunk that passes it or later', () => {
  const max = 16;
  const ok = 'a'.repeat(max);
  const long = 'b'.repeat(max + 6);
  const input = Buffer.from(`x\n${ok}\n${long}\nafter\n`);
  const longStart = 2 + max + 1;
  for (let i = 0; i <= input.length; i++) {
    for (let j = i; j <= input.length; j++) {
      const s = recordSplitter('lines', max);
      const got: string[] = [];
      let fault: FramingError | undefined;
      let at = 0;
      for (const c of [i, j, input.length]) {
        try {
          got.push(...s.push(input.subarray(at, c)).map(String));
        } catch (err) {
          assert.ok(err instanceof FramingError, `cuts ${i},${j}: ${err}`);
          fault = err;
          got.push(...err.records.map(String));
          break;
        }
        at = c;
      }
      assert.ok(fault, `cuts ${i},${j}: the ${max + 6}-byte line was refused`);
      assert.deepEqual(got, ['x', ok], `cuts ${i},${j}: the lines before it, the one at the limit included`);
      assert.equal(fault.inputOffset, longStart + max, `cuts ${i},${j}: the offset of the first byte past the limit`);
    }
  }
});

test('lines: a line that never ends is refused once it passes the limit, holding no more than the limit', () => {
  const s = recordSplitter('lines', 10);
  assert.deepEqual(s.push(Buffer.from('abcdefghij')), []);
  assert.throws(() => s.push(Buffer.from('k')), (err: unknown) => err instanceof FramingError && /longer than 10 bytes/.test(err.message) && err.inputOffset === 10);
});

test('the real limit is 1 GiB (2^30 bytes), as docs/CLI.md says; the test variable can only lower it', async () => {
  assert.equal(MAX_RECORD_BYTES, 2 ** 30);
  assert.equal(recordLimit({}), 2 ** 30);
  assert.equal(recordLimit({ [TEST_LIMIT_ENV]: '16' }), 16);
  assert.equal(recordLimit({ [TEST_LIMIT_ENV]: String(2 ** 40) }), 2 ** 30);
  const docs = await readFile(join(ROOT, 'docs', 'CLI.md'), 'utf8');
  assert.match(docs, /at most 1 GiB \(2\^30 bytes\)/);
});

test('lines: pushRuns cuts every input, at every chunking, into the records push gives, and refuses a long line at the same byte with the same records before it', () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom('a', 'bc', '\n', 'xyz', '\n\n', ''), { maxLength: 40 }),
      fc.array(fc.nat({ max: 12 }), { maxLength: 10 }),
      fc.integer({ min: 1, max: 9 }),
      (pieces, cuts, max) => {
        const input = Buffer.from(pieces.join(''));
        const chunks: Buffer[] = [];
        let at = 0;
        for (const c of cuts) {
          chunks.push(input.subarray(at, Math.min(input.length, at + c)));
          at = Math.min(input.length, at + c);
        }
        chunks.push(input.subarray(at));
        const run = (runs: boolean) => {
          const sp = new LineSplitter(max);
          const got: string[] = [];
          try {
            for (const chunk of chunks) {
              if (!runs) for (const r of sp.push(chunk)) got.push(r.toString());
              else for (const r of sp.pushRuns(chunk)) for (let k = 0; k < r.starts.length; k++) got.push(Buffer.from(r.bytes.subarray(r.starts[k]!, r.starts[k]! + r.lengths[k]!)).toString());
            }
            for (const r of sp.end()) got.push(r.toString());
            return { got };
          } catch (err) {
            assert.ok(err instanceof FramingError);
            return { got, at: err.inputOffset, before: err.records.map((r) => r.toString()) };
          }
        };
        assert.deepEqual(run(true), run(false));
      },
    ),
    { numRuns: 2000 },
  );
});
