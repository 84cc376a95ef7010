/**
 * Every reason `verifyQueue` emits over the damage table (and the rows only
 * verify sees) has a row in docs/CLI.md's `ferry verify` reason table.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { verifyQueue } from '../../../src/diskqueue/index.js';
import { encodeHeader, decodeHeader, HEADER_SIZE } from '../../../src/diskqueue/format.js';
import { segPath, DIR, type FaultyFileSystem } from './helpers.js';
import { rows, buildStore } from './damage-table.js';

/** The reasons named in the first column of the verify section's table. */
function documentedReasons(): Set<string> {
  const doc = readFileSync(new URL('../../../docs/CLI.md', import.meta.url), 'utf8');
  const start = doc.indexOf('### `ferry verify DIR`');
  const section = doc.slice(start, doc.indexOf('\n### ', start + 1));
  const out = new Set<string>();
  for (const line of section.split('\n')) {
    const cell = /^\| (`[^|]*`) \|/.exec(line)?.[1];
    for (const m of cell?.matchAll(/`([a-z-]+)`/g) ?? []) out.add(m[1]!);
  }
  return out;
}

function editHeader(fs: FaultyFileSystem, seq: number, edit: (h: Record<string, number>) => void): void {
  const file = fs.readFile(segPath(seq))!;
  const res = decodeHeader(file.subarray(0, HEADER_SIZE));
  assert.ok(res.ok);
  edit(res.header as unknown as Record<string, number>);
  file.set(encodeHeader(res.header), 0);
  fs.writeFile(segPath(seq), file);
}

it('every reason verify emits is in docs/CLI.md', async () => {
  const damages: Array<(fs: FaultyFileSystem) => void> = [
    ...rows.map((r) => r.damage),
    (fs) => editHeader(fs, 3, (h) => (h.writtenCount = h.writtenCount! + 1)), // count-mismatch
    (fs) => editHeader(fs, 3, (h) => (h.committedCount = 1)), // commit-cursor
    (fs) => editHeader(fs, 3, (h) => (h.segmentSize = 8192)), // segment-size-mismatch (and header-insane)
    (fs) => fs.writeFile(segPath(3), new Uint8Array(10).fill(9)), // segment-short
  ];
  const emitted = new Set<string>();
  for (const damage of damages) {
    const fs = await buildStore();
    damage(fs);
    for (const d of (await verifyQueue(DIR, { fs })).damage) emitted.add(d.reason);
  }
  const documented = documentedReasons();
  // The sweep must reach the reasons the user met undocumented.
  for (const r of ['header-magic', 'header-zero', 'header-insane', 'segment-missing', 'count-mismatch', 'commit-cursor', 'segment-short']) {
    assert.ok(emitted.has(r), `the sweep emits ${r}`);
  }
  assert.deepEqual([...emitted].filter((r) => !documented.has(r)).sort(), []);
});
