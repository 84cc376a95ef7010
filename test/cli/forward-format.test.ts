/**
 * What `ferry forward --http` sends, read back the way a server would: with
 * `--format lines` (the default) a `text/plain` body whose lines are the
 * input lines byte for byte; with `--format json`, NDJSON in which every
 * line parses as a JSON string, whatever the input line held (invalid
 * UTF-8, a quote, a backslash, text that is itself JSON).
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ferry, scratch } from './helpers.js';

const LINES = [
  Buffer.from('plain text'),
  Buffer.from('a "quote" and a back\\slash'),
  Buffer.from([0x62, 0xff, 0xfe, 0x63, 0xc3]), // not UTF-8
  Buffer.from('{"n":1}'),
  Buffer.from('tab\there'),
  Buffer.from('\ufeffBOM-led'), // a byte-order mark is part of the record
];
const INPUT = Buffer.concat(LINES.flatMap((l) => [l, Buffer.from('\n')]));

interface Received {
  type: string | undefined;
  body: Buffer;
}

let server: Server;
let url = '';
let received: Received[] = [];
const tmp = await scratch();

before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ type: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  await tmp.cleanup();
});

let n = 0;
async function forward(args: string[]): Promise<Received[]> {
  received = [];
  const res = await ferry(['forward', '--dir', join(tmp.dir, `s${++n}`), '--http', url, '--concurrency', '1', '-q', ...args], { input: INPUT, timeoutMs: 60_000 });
  assert.equal(res.code, 0, res.stderr);
  return received;
}

/** A body's lines; every line must end in `\n`. */
function lines(body: Buffer): Buffer[] {
  assert.equal(body.at(-1), 0x0a, 'the body ends with a newline');
  const out: Buffer[] = [];
  let at = 0;
  for (let nl = body.indexOf(0x0a); nl >= 0; nl = body.indexOf(0x0a, at)) {
    out.push(body.subarray(at, nl));
    at = nl + 1;
  }
  return out;
}

test('--batch N (default --format lines): a text/plain body whose lines are the input lines, byte for byte', { timeout: 60_000 }, async () => {
  const got = await forward(['--batch', String(LINES.length)]);
  for (const r of got) assert.match(r.type ?? '', /^text\/plain/);
  assert.deepEqual(got.flatMap((r) => lines(r.body)), LINES);
});

test('--format json: every line of the body is a JSON string holding the input line', { timeout: 60_000 }, async () => {
  const got = await forward(['--batch', String(LINES.length), '--format', 'json']);
  for (const r of got) assert.equal(r.type, 'application/x-ndjson');
  const values = got.flatMap((r) => lines(r.body)).map((l) => JSON.parse(l.toString('utf8')) as unknown);
  assert.deepEqual(values, ['plain text', 'a "quote" and a back\\slash', 'b\ufffd\ufffdc\ufffd', '{"n":1}', 'tab\there', '\ufeffBOM-led']);
});

test('--format json with --batch 1: each body is one NDJSON line', { timeout: 60_000 }, async () => {
  const got = await forward(['--format', 'json']);
  assert.equal(got.length, LINES.length);
  for (const r of got) assert.equal(r.type, 'application/x-ndjson');
  assert.deepEqual(got.map((r) => JSON.parse(lines(r.body)[0]!.toString()) as unknown), ['plain text', 'a "quote" and a back\\slash', 'b\ufffd\ufffdc\ufffd', '{"n":1}', 'tab\there', '\ufeffBOM-led']);
});

test('--batch 1 (default --format lines): the body is the record itself', { timeout: 60_000 }, async () => {
  const got = await forward([]);
  assert.deepEqual(got.map((r) => r.body), LINES);
  for (const r of got) assert.equal(r.type, 'application/octet-stream');
});

test('--format with another value is a usage error', async () => {
  const res = await ferry(['forward', '--dir', join(tmp.dir, 'bad'), '--http', url, '--format', 'xml'], { input: 'a\n', timeoutMs: 20_000 });
  assert.equal(res.code, 2, res.stderr);
  assert.match(res.stderr, /--format must be one of lines, json: got "xml"/);
});

test('--max-bytes below one frame of a one-byte line is a usage error, before anything is read or made', async () => {
  for (const v of ['5', '12']) {
    const dir = join(tmp.dir, `tiny-cap-${v}`);
    const res = await ferry(['forward', '--dir', dir, '--http', url, '--max-bytes', v], { input: 'a\n', timeoutMs: 20_000 });
    assert.equal(res.code, 2, res.stderr);
    assert.match(res.stderr, new RegExp(`--max-bytes must be 0 \\(the default cap\\) or at least 13, .*: got ${v}`));
    assert.equal(existsSync(dir), false, 'no spool was made');
  }
});

