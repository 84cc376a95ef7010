/**
 * The public surface is what the docs describe. Every name an entry point
 * exports, types included (read from the barrels with the TypeScript
 * compiler), is written as code somewhere in README.md or docs/*.md; and the
 * names each barrel exports at run time are the list in
 * test/package/exports.ts, which the packed-package test checks again on the
 * installed package.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { ENTRY_POINTS } from '../package/exports.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The code of the docs: code spans and fenced blocks, where an API name is written as such. */
const docCode = DOCS.map((d) => readFileSync(join(root, d), 'utf8'))
  .flatMap((text) => [...text.matchAll(/```[\s\S]*?```|`[^`\n]+`/g)].map((m) => m[0]))
  .join('\n');

/** Every name `source` exports, values and types, as the compiler sees them. */
function exportedNames(program: ts.Program, source: string): string[] {
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(join(root, source));
  assert.ok(file, source);
  return checker.getExportsOfModule(checker.getSymbolAtLocation(file)!).map((s) => s.name);
}

describe('the public surface', () => {
  it('every name an entry point exports is written as code in README.md or docs/*.md', () => {
    const sources = Object.values(ENTRY_POINTS).map((e) => join(root, e.source));
    const program = ts.createProgram(sources, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true });
    const missing: string[] = [];
    for (const [entry, { source }] of Object.entries(ENTRY_POINTS)) {
      const names = exportedNames(program, source);
      assert.ok(names.length > 0, `${source} exports nothing the compiler can see`);
      for (const name of names) if (!new RegExp(`\\b${name}\\b`).test(docCode)) missing.push(`${entry}: ${name}`);
    }
    assert.deepEqual(missing, [], 'exported, and described in no doc: document them or stop exporting them');
  });

  it('each barrel exports at run time the names test/package/exports.ts lists', async () => {
    for (const [entry, { source, values }] of Object.entries(ENTRY_POINTS)) {
      const mod = (await import(new URL(`../../${source}`, import.meta.url).href)) as Record<string, unknown>;
      assert.deepEqual(Object.keys(mod).sort(), values, entry);
    }
  });
});
