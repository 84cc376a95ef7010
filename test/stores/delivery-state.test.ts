/**
 * The delivery-state codes the SQL stores' .sql files write are those of
 * delivery-state.ts. Every comparison or assignment of a `state` column to a
 * number is followed by a block comment naming the state, and each such name
 * is the state whose code stands before it; so a reader can trust the names,
 * and a code changed in one place fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { STATE_CODES } from '../../src/queue/stores/delivery-state.js';

const stores = join(import.meta.dirname, '../../src/queue/stores');

/** The .sql files under `dir`, recursively. */
function sqlFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql')).map((f) => join(dir, f));
}

/** The text of a .sql file without its line comments (prose may say "state = 1" freely). */
const code = (file: string) => readFileSync(file, 'utf8').replace(/--[^\n]*/g, '');

describe('delivery states in the SQL stores', () => {
  for (const store of ['postgres', 'sqlite']) {
    it(`${store}: every state code in its .sql files is named, by the name delivery-state.ts gives it`, () => {
      const files = sqlFiles(join(stores, store));
      assert.ok(files.length > 10, `found ${files.length} .sql files`);
      let named = 0;
      for (const file of files) {
        const text = code(file);
        const bare = [...text.matchAll(/\bstate\s*(?:=|<>|!=|<=|>=|<|>)\s*\d+(?!\s*\/\*)/g)].map((m) => m[0]);
        assert.deepEqual(bare, [], `${file}: a state code without its name`);
        for (const m of text.matchAll(/\b(\d+)\s*\/\*\s*(\w+)\s*\*\//g)) {
          const [, digits, name] = m;
          assert.ok(Object.hasOwn(STATE_CODES, name!), `${file}: /* ${name} */ names no delivery state`);
          assert.equal(Number(digits), STATE_CODES[name as keyof typeof STATE_CODES], `${file}: ${m[0]}`);
          named++;
        }
      }
      assert.ok(named > 20, `${named} state codes named`);
    });
  }
});
