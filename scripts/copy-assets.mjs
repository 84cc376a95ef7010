#!/usr/bin/env node
// tsc copies only what it compiles. The SQL stores (Postgres, SQLite,
// ClickHouse) read their .sql files (statements and numbered migrations) from
// beside their compiled modules, and the dashboard serves its page files
// (src/dashboard/page/) from beside its own: mirror both into dist/. The
// build clears dist/ first (package.json), so nothing a checkout no longer
// has outlives it there: a migration left by a newer build would otherwise
// be applied by an older one.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const PAGE = join('src', 'dashboard', 'page');

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.sql') || dir.startsWith(PAGE)) out.push(p);
  }
  return out;
}

const files = walk('src', []);
for (const f of files) {
  const to = join('dist', relative('src', f));
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(f, to);
}
console.log(`copy-assets: ${files.length} files into dist/`);
