/**
 * `arrayLiteral` and `seqsAndTokens` (the Postgres store's own encoding of
 * array parameters: the poll query's, sent once per tick, append's and the
 * acks') read back as the same values, whatever they hold; and `duePairs` gives the same answers for a frozen
 * array it has seen (its encoded parameters reused) as for a fresh one.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { arrayLiteral, seqsAndTokens } from '../../src/queue/stores/postgres/sql.js';
import { msg } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres store: text[] parameters', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('textarr');
  const closers: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    await dropSchema(schema);
  });

  it('an array literal from arrayLiteral reads back element for element', async () => {
    const client = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await client.connect();
    closers.push(() => client.end());
    const values = ['a', 'b"c', 'd\\e', '', 'NULL', 'null', 'x y,z{}', ' lead', 'é☃', '\\"', 'a\\', '"', '{}', 'a.b-c_d'];
    const { rows } = await client.query<{ v: string[] }>('SELECT $1::text[] AS v', [arrayLiteral(values)]);
    assert.deepEqual(rows[0]!.v, values);
    const empty = await client.query<{ v: string[] }>('SELECT $1::text[] AS v', [arrayLiteral([])]);
    assert.deepEqual(empty.rows[0]!.v, []);
  });

  it('seqsAndTokens reads back as the seqs and the uuids of the claim tokens, pairwise in seq order, and NULL for a token the store did not hand out', async () => {
    const client = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await client.connect();
    closers.push(() => client.end());
    const uuid = '0b6f8f8e-3c57-4e0e-9a35-5d2b8c1f7a10';
    const other = '1c9d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e';
    const tokens = [`9223372036854775807/${uuid}`, `7/${other}`, 'b"c', 'd\\e', '', 'NULL', `x/${uuid}`, `0/${uuid}`, `7/${uuid.toUpperCase()}`, `7/${uuid} `, 'é☃'];
    const cs = tokens.map((v, i) => ({ deliveryId: `${i}`, claimToken: v, group: 'g', attempt: 1, message: msg('t') }));
    const [seqs, uuids] = seqsAndTokens(cs);
    const { rows } = await client.query<{ s: (string | null)[]; u: (string | null)[] }>('SELECT $1::bigint[] AS s, $2::uuid[] AS u', [seqs, uuids]);
    const nulls = Array<null>(tokens.length - 2).fill(null);
    assert.deepEqual(rows[0], { s: [...nulls, '7', '9223372036854775807'], u: [...nulls, other, uuid] });
    assert.deepEqual(seqsAndTokens([]), ['{}', '{}']);
  });

  it('arrayLiteral reads back as text, int, bigint and timestamptz arrays, NULLs included', async () => {
    const client = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await client.connect();
    closers.push(() => client.end());
    const texts = ['a', 'b"c', 'd\\e', '', 'NULL', '{"json": "x\\"y"}', 'é☃', null, undefined];
    const times = [new Date(0), new Date('2026-12-06T09:45:00.123Z'), new Date(Date.UTC(1999, 11, 31, 23, 59, 59, 999)), null];
    const { rows } = await client.query<{ t: (string | null)[]; i: number[]; b: string[]; d: (Date | null)[] }>(
      'SELECT $1::text[] AS t, $2::int[] AS i, $3::bigint[] AS b, $4::timestamptz[] AS d',
      [arrayLiteral(texts), arrayLiteral([0, -1, 2147483647]), arrayLiteral(['9007199254740993', 1]), arrayLiteral(times)],
    );
    assert.deepEqual(rows[0]!.t, texts.map((v) => v ?? null));
    assert.deepEqual(rows[0]!.i, [0, -1, 2147483647]);
    assert.deepEqual(rows[0]!.b, ['9007199254740993', '1']);
    assert.deepEqual(rows[0]!.d.map((d) => d?.getTime() ?? null), times.map((d) => d?.getTime() ?? null));
    assert.equal(arrayLiteral([]), '{}');
  });

  it('duePairs answers the same for a frozen array asked again, and for a new array after its pairs change', async () => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    closers.push(() => store.close());
    for (const t of ['a', 'b', 'c']) await store.ensureGroup(t, 'g', 'earliest');
    await store.append([msg('a'), msg('c')]);
    const names = async (pairs: readonly { topic: string; group: string }[]) => (await store.duePairs(pairs)).map((p) => p.topic).sort();
    const frozen = Object.freeze(['a', 'b'].map((topic) => Object.freeze({ topic, group: 'g' })));
    assert.deepEqual(await names(frozen), ['a']);
    assert.deepEqual(await names(frozen), ['a']);
    // Another array: encoded afresh, not the cached parameters.
    assert.deepEqual(await names(Object.freeze(['b', 'c'].map((topic) => ({ topic, group: 'g' })))), ['c']);
    await store.append([msg('b')]);
    assert.deepEqual(await names(frozen), ['a', 'b']);
    // An array that is not frozen may change between calls: it is never taken from the cache.
    const open = [{ topic: 'a', group: 'g' }];
    assert.deepEqual(await names(open), ['a']);
    open[0] = { topic: 'c', group: 'g' };
    assert.deepEqual(await names(open), ['c']);
    // Calls at once with two frozen arrays (the cache turning from one to the other while calls are in flight): each answers for its own.
    const other = Object.freeze(['c'].map((topic) => Object.freeze({ topic, group: 'g' })));
    const answers = await Promise.all([frozen, other, frozen, other, frozen, open].map((pairs) => names(pairs)));
    assert.deepEqual(answers, [['a', 'b'], ['c'], ['a', 'b'], ['c'], ['a', 'b'], ['c']]);
  });
});
