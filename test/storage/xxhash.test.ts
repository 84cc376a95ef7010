/** xxh64 gives the package's own `h64Raw` answer at every length, also after the module's memory grows. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import xxhash from 'xxhash-wasm';
import { xxh64 } from '../../src/storage/xxhash.js';

test('xxh64 agrees with h64Raw', async () => {
  const api = await xxhash();
  // Lengths around the 4-, 8- and 32-byte lanes, one past the first 64 KiB page, and back to short.
  for (const n of [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 100, 256, 1000, 65_537, 300_000, 5, 0]) {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = (i * 131 + n) & 255;
    const want = api.h64Raw(b, 0n);
    assert.equal(xxh64(b), want, `length ${n}`);
  }
  // A known value: xxhash64 of the empty input with seed 0.
  assert.equal(xxh64(new Uint8Array(0)), 0xef46db3751d8e999n);
});
