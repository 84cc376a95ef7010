#!/usr/bin/env node
// Runs every *.test.ts under test/ with node:test through tsx. Node 20 does not
// expand globs itself, so the files are listed here. Extra arguments (file
// paths or a folder) narrow the run.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function collect(path, out) {
  const st = statSync(path);
  if (st.isFile()) {
    if (path.endsWith('.test.ts')) out.push(path);
    return out;
  }
  for (const name of readdirSync(path).sort()) collect(join(path, name), out);
  return out;
}

const roots = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = (roots.length ? roots : ['test']).flatMap((r) => collect(r, []));
// Fuzz files run in CI too, with the short run count their default gives.
const res = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', ...flags, ...files],
  { stdio: 'inherit' },
);
process.exit(res.status ?? 1);
