/**
 * The SQLite store's two ways to its newest schema agree: a new database gets
 * schema.sql in one step, one made by an earlier version runs the migrations
 * past its version; both must end with the same tables, columns, keys and
 * indexes, at the version the migrations end with.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SCHEMA_VERSION } from '../../src/queue/stores/sqlite/migrate.js';
import { bindByPosition, files, POSITIONAL } from '../../src/queue/stores/sqlite/sql.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';

const fixtures = join(import.meta.dirname, 'fixtures');

/** What a schema is made of, read through SQLite's pragmas (so neither text nor comments count). */
function shape(path: string): unknown {
  const db = new Database(path, { readonly: true });
  try {
    const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).pluck().all() as string[];
    return tables.map((t) => ({
      table: t,
      withoutRowid: (db.pragma(`table_list(${JSON.stringify(t)})`) as Array<{ wr: number }>)[0]!.wr,
      columns: db.pragma(`table_xinfo(${JSON.stringify(t)})`),
      indexes: (db.pragma(`index_list(${JSON.stringify(t)})`) as Array<{ name: string; unique: number; origin: string; partial: number }>)
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((i) => ({
          name: i.name, unique: i.unique, origin: i.origin,
          columns: db.pragma(`index_xinfo(${JSON.stringify(i.name)})`),
          where: i.partial ? predicate(db.prepare(`SELECT sql FROM sqlite_master WHERE name = ?`).pluck().get(i.name) as string) : undefined,
        })),
    }));
  } finally {
    db.close();
  }
}

/** A partial index's WHERE clause, without comments or spacing. */
const predicate = (sql: string) => sql.slice(sql.indexOf(' WHERE ') + 7).replace(/\/\*.*?\*\//g, '').replace(/\s+/g, ' ').trim();

describe('sqlite store: schema.sql and the migrations', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-schema-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the migrations run from version 2 (version 1 needs none) to the version the store creates and reads, one each', () => {
    const versions = files.migrations().map((m) => m.version);
    assert.deepEqual(versions, Array.from({ length: SCHEMA_VERSION - 1 }, (_, i) => i + 2));
  });

  it('a database migrated from each earlier version has the shape of a new one', async () => {
    const fresh = join(dir, 'new.db');
    await (await SqliteStore.open({ path: fresh })).close();
    const want = shape(fresh);
    for (const v of [1, 2, 3, 4, 5, 6, 7]) {
      const p = join(dir, `v${v}.db`);
      copyFileSync(join(fixtures, `sqlite-v${v}.db`), p);
      await (await SqliteStore.open({ path: p })).close();
      assert.deepEqual(shape(p), want, `migrated from version ${v}`);
    }
  });
});

describe('sqlite store: statements bound by position', () => {
  it("each @name outside a comment becomes ?, in the file's order; a file naming others, or these in another order, is refused", () => {
    const sql = '-- stores @a, then @b\nINSERT INTO x (a, b) VALUES (@a, @b) -- @c is not bound\n';
    assert.equal(bindByPosition('t', sql, ['a', 'b']), '-- stores @a, then @b\nINSERT INTO x (a, b) VALUES (?, ?) -- @c is not bound\n');
    assert.throws(() => bindByPosition('t', sql, ['b', 'a']), /t: its file binds a, b, not b, a/);
    assert.throws(() => bindByPosition('t', sql, ['a', 'b', 'c']), /not a, b, c/);
    // The store's own file: what SqliteStore.open prepares.
    const append = files.read('append.sql');
    assert.equal(bindByPosition('append', append, POSITIONAL.append).match(/\?/g)?.length, POSITIONAL.append.length);
  });
});
