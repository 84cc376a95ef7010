/**
 * The ClickHouse store's one escaping function (escape.ts): hostile strings
 * and bytes round-trip through the real server, both as SQL literals in a
 * SELECT and through the VALUES parser of an INSERT (the two parsers the
 * store feeds).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError } from '../../src/errors.js';
import { bytesLiteral, decodeWtf8, fromHex, literal, stringLiteral, tuple } from '../../src/queue/stores/clickhouse/escape.js';
import { render } from '../../src/queue/stores/clickhouse/sql.js';
import { CLICKHOUSE_SKIP, adminQuery, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';

/** Strings made to break a literal: quotes, backslashes, NUL and other controls, newlines, lone surrogates, SQL look-alikes. */
const hostile: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("'", "\\'", '\\', '\\\\', "''", '\0', '\n', '\r\n', '\t', '\x7f', '\\x00', "\\'); DROP TABLE t; --", '{topic}', '__DB__', '\uD800', '\uDFFF', '\uDBFF\uDC00', '\uDC00\uD800', '\uFEFF', '€', '🚀', ''),
  // Every UTF-16 code unit, so lone and reversed surrogate halves appear.
  fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 40 }).map((units) => String.fromCharCode(...units)),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.array(fc.constantFrom("'", '\\', '\0', '\n', 'x', '\uD83D', '\uDE80', 'é'), { maxLength: 60 }).map((a) => a.join('')),
);

describe('clickhouse escaping', { skip: CLICKHOUSE_SKIP }, () => {
  const db = testDatabase('esc');
  before(async () => {
    await adminQuery(`CREATE DATABASE \`${db}\``);
    await adminQuery(`CREATE TABLE \`${db}\`.rt (run UInt32, n UInt32, s String) ENGINE = MergeTree ORDER BY (run, n)`);
  });
  after(() => dropDatabase(db));

  /** `values` read back through `SELECT hex(literal)`. */
  async function viaSelect(lits: string[]): Promise<string[]> {
    const out = await adminQuery(`SELECT ${lits.map((l) => `hex(${l})`).join(', ')} FORMAT TSV`);
    return out.replace(/\n$/, '').split('\t');
  }

  let run = 0;
  /** `values` written with INSERT … VALUES and read back as hex. */
  async function viaInsert(lits: string[]): Promise<string[]> {
    const r = ++run;
    await adminQuery(`INSERT INTO \`${db}\`.rt (run, n, s) VALUES ${lits.map((l, i) => `(${r}, ${i}, ${l})`).join(', ')}`);
    const out = await adminQuery(`SELECT hex(s) FROM \`${db}\`.rt WHERE run = ${r} ORDER BY n FORMAT TSV`);
    return out.replace(/\n$/, '').split('\n');
  }

  it('every string round-trips exactly, lone surrogates included, through SELECT and INSERT', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 8 }), async (ss) => {
        const lits = ss.map(stringLiteral);
        for (const hexes of [await viaSelect(lits), await viaInsert(lits)]) {
          assert.deepEqual(hexes.map((h) => decodeWtf8(fromHex(h))), ss);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('every byte string round-trips exactly through SELECT and INSERT', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 1, maxLength: 6 }), async (bs) => {
        const lits = bs.map(bytesLiteral);
        const want = bs.map((b) => Buffer.from(b).toString('hex').toUpperCase());
        assert.deepEqual(await viaSelect(lits), want);
        assert.deepEqual(await viaInsert(lits), want);
      }),
      { numRuns: 100 },
    );
  });

  it('huge values round-trip: 3 MB of hostile text and 2 MB of random bytes', async () => {
    const text = "'\\\0\n\uD800🚀é".repeat(300_000);
    const bytes = new Uint8Array(2 * 1024 * 1024).map((_, i) => (i * 2654435761) >>> 24);
    const [h1, h2] = await viaInsert([stringLiteral(text), bytesLiteral(bytes)]);
    assert.equal(decodeWtf8(fromHex(h1!)), text);
    assert.equal(h2, Buffer.from(bytes).toString('hex').toUpperCase());
  });

  it('a literal never contains a raw control character, and only escaped quotes', () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const lit = stringLiteral(s);
        assert.ok(lit.startsWith("'") && lit.endsWith("'"));
        const inner = lit.slice(1, -1);
        assert.ok(!/[\0-\x1f\x7f]/.test(inner), 'raw control character');
        // Outside escapes, no quote and no backslash: strip every escape and look.
        assert.ok(!/['\\]/.test(inner.replace(/\\(x[0-9A-F]{2}|'|\\)/g, '')), 'unescaped quote or backslash');
        assert.ok(!/[\uD800-\uDFFF]/.test(inner.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, '')), 'raw lone surrogate');
      }),
    );
  });

  it('numbers must be non-negative safe integers; lists render as IN tuples; a missing value is refused', () => {
    assert.equal(literal(0), '0');
    assert.equal(literal(2 ** 53 - 1), '9007199254740991');
    for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53]) assert.throws(() => literal(bad), InvalidArgumentError);
    assert.throws(() => literal(true as never), InvalidArgumentError);
    assert.equal(literal(null), 'NULL');
    assert.equal(tuple(['a', 1, null]), "('a', 1, NULL)");
    assert.equal(render('x IN {ids} AND y = {y}', { ids: ['a', "b'"], y: 3 }), "x IN ('a', 'b\\'') AND y = 3");
    assert.throws(() => render('x = {x}', {}), InvalidArgumentError);
    assert.throws(() => render('x IN {ids}', { ids: [] }), InvalidArgumentError);
  });
});
