#!/usr/bin/env node
// tsc copies no .sql files; the Postgres store reads its statements from
// beside its compiled module, so mirror every .sql under src/ into dist/.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.sql')) out.push(p);
  }
  return out;
}

const files = walk('src', []);
for (const f of files) {
  const to = join('dist', relative('src', f));
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(f, to);
}
console.log(`copy-sql: ${files.length} files into dist/`);
