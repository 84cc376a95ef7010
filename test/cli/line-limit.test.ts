/**
 * `ferry push` refuses a line longer than the record limit on every input
 * path: a FILE argument, a `<` redirect, `cat |`, and a pipe whose producer
 * writes the long line in small pieces (so the line ends in a later read
 * than the one that passes the limit). The limit is lowered for the test
 * through FERRY_TEST_MAX_RECORD_BYTES (test/cli/framing.test.ts checks the
 * real one is 2^30).
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { killChild, spawnShell } from '../helpers/children.js';
import { writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, ferry, scratch } from './helpers.js';
import { TEST_LIMIT_ENV } from '../../src/cli/framing.js';

const LIMIT = 64;
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const tmp = await scratch();
after(() => tmp.cleanup());

const atLimit = 'y'.repeat(LIMIT);
const tooLong = 'z'.repeat(LIMIT + 6);
const input = `first\n${atLimit}\n${tooLong}\nafter\n`;
const file = join(tmp.dir, 'in.txt');
await writeFile(file, input);
// Writes the input 10 bytes at a time, a pause between pieces.
const trickle = join(tmp.dir, 'trickle.mjs');
await writeFile(
  trickle,
  `const s = ${JSON.stringify(input)}; let i = 0;
   const step = () => { if (i >= s.length) return; process.stdout.write(s.slice(i, i + 10), () => setTimeout(step, 5)); i += 10; };
   step();`,
);

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const push = (dir: string) => `${q(process.execPath)} --import tsx ${q(MAIN)} push ${q(dir)}`;

function sh(script: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawnShell(script, { cwd: ROOT, env: { ...process.env, [TEST_LIMIT_ENV]: String(LIMIT) }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    // The whole script: killing only the shell would leave the ferry it started running.
    const timer = setTimeout(() => killChild(child), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

const paths: [string, (dir: string) => string][] = [
  ['a FILE argument', (dir) => `${push(dir)} ${q(file)}`],
  ['a < redirect', (dir) => `${push(dir)} < ${q(file)}`],
  ['cat |', (dir) => `cat ${q(file)} | ${push(dir)}`],
  ['a pipe fed in 10-byte pieces', (dir) => `${q(process.execPath)} ${q(trickle)} | ${push(dir)}`],
];

let n = 0;
for (const [name, command] of paths) {
  test(`push refuses a line longer than the limit from ${name}, keeping the lines before it`, { timeout: 120_000 }, async () => {
    const dir = join(tmp.dir, `q${++n}`);
    const res = await sh(command(dir));
    assert.equal(res.code, 1, res.stderr);
    assert.match(res.stderr, new RegExp(`a line longer than ${LIMIT} bytes`));
    assert.match(res.stderr, /2 records before it were stored/);
    const drained = await ferry(['drain', dir, '-q']);
    assert.equal(drained.code, 0, drained.stderr);
    assert.equal(drained.stdout.toString(), `first\n${atLimit}\n`, 'the line at the limit is kept, the long one and what follows are not');
  });
}

test('forward stops its intake at a line longer than the limit, after accepting and delivering the lines before it', { timeout: 120_000 }, async () => {
  const dir = join(tmp.dir, 'fwd');
  const out = join(tmp.dir, 'fwd-out.txt');
  const res = await sh(`${q(process.execPath)} --import tsx ${q(MAIN)} forward --dir ${q(dir)} --exec ${q(`cat >> ${out}`)} ${q(file)}`);
  assert.equal(res.code, 1, res.stderr);
  assert.match(res.stderr, new RegExp(`a line longer than ${LIMIT} bytes`));
  assert.match(res.stderr, /2 lines were accepted before it/);
  assert.equal(readFileSync(out, 'utf8'), `first\n${atLimit}\n`);
});
