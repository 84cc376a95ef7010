/** The version-7 UUIDs `publish` gives messages without an ID. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { uuidV7 } from '../../src/queue/message-id.js';

const SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuidV7', () => {
  it('has the RFC 9562 version-7 layout with the milliseconds in its first 48 bits', () => {
    for (const ms of [0, 1, 255, 0xff_ffff, 0x100_0000, 0xab_cdef_1234_56, 1_796_153_855_132, 2 ** 48 - 1]) {
      const id = uuidV7(ms);
      assert.match(id, SHAPE);
      assert.equal(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16), ms);
    }
  });

  it('is unique across many pool refills, and its random digits are spread evenly', () => {
    const n = 20_000;
    const ids = Array.from({ length: n }, () => uuidV7(1_000));
    assert.equal(new Set(ids).size, n);
    for (const id of ids) assert.match(id, SHAPE);
    // The variant digit takes each of 8, 9, a, b about a quarter of the time;
    // the last digit each hex value about a sixteenth.
    const tally = (pick: (id: string) => string) => {
      const m = new Map<string, number>();
      for (const id of ids) m.set(pick(id), (m.get(pick(id)) ?? 0) + 1);
      return m;
    };
    const variant = tally((id) => id[19]!);
    assert.deepEqual([...variant.keys()].sort(), ['8', '9', 'a', 'b']);
    for (const c of variant.values()) assert.ok(Math.abs(c - n / 4) < n / 20, `variant count ${c}`);
    const last = tally((id) => id[35]!);
    assert.equal(last.size, 16);
    for (const c of last.values()) assert.ok(Math.abs(c - n / 16) < n / 40, `last digit count ${c}`);
  });

  it('sorts by time across milliseconds', () => {
    const a = uuidV7(5_000);
    const b = uuidV7(5_001);
    const c = uuidV7(70_000);
    assert.deepEqual([c, a, b].sort(), [a, b, c]);
    assert.equal(uuidV7(5_000).slice(0, 15), a.slice(0, 15)); // same millisecond, same time digits
  });
});
