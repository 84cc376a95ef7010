/**
 * User-facing text names the upstream designs as the Go diskqueue, the Go
 * spool and the queue package of Bifrost, each with its repository at least
 * once per document that mentions it; never by an internal label.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const UPSTREAMS = [
  { name: /\bGo diskqueue\b/, repo: 'github.com/JohanLindvall/diskqueue' },
  { name: /\bGo spool\b/, repo: 'github.com/JohanLindvall/spool' },
  { name: /\bBifrost\b/, repo: 'github.com/maximhq/bifrost, framework/queue' },
];

it('docs name each upstream design with its repository, and never as a seed', () => {
  for (const doc of DOCS) {
    const text = readFileSync(join(root, doc), 'utf8').replace(/\s+/g, ' ');
    assert.doesNotMatch(text, /\bseed \d{3}\b|\bseeds?\//i, doc);
    for (const u of UPSTREAMS) {
      if (u.name.test(text)) assert.ok(text.includes(u.repo), `${doc} mentions ${u.name.source} without ${u.repo}`);
    }
  }
});
