/**
 * `ferry forward --http`'s delivery (`httpTarget`) against a local server:
 * what each POST carries (path and query, content type, body, Basic
 * authorization from the URL), when a delivery counts as accepted (a 2xx
 * answer read whole), what fails it and how it says so (status, no answer
 * within the deadline, a connection refused or cut), concurrent deliveries
 * sharing keep-alive connections, and `close()` with a delivery still waiting.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, it } from 'node:test';
import { batchOf, hideUrlPasswords, httpTarget, maskPassword } from '../../src/cli/deliver.js';

interface Seen {
  method: string;
  url: string;
  type: string | undefined;
  authorization: string | undefined;
  body: string;
  socket: Socket;
}

/** A server answering each request with `answer`, after reading its body; every socket it accepted is destroyed on stop. */
async function serve(answer: (req: IncomingMessage, res: ServerResponse, seen: Seen) => void): Promise<{ url: string; seen: Seen[]; sockets: Set<Socket>; stop(): Promise<void> }> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = {
        method: req.method!,
        url: req.url!,
        type: req.headers['content-type'],
        authorization: req.headers.authorization,
        body: Buffer.concat(chunks).toString(),
        socket: req.socket,
      };
      seen.push(s);
      answer(req, res, s);
    });
  });
  server.on('connection', (s) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    sockets,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const lines = (...xs: string[]) => batchOf(xs.map((x) => Buffer.from(x)));

describe('httpTarget', { timeout: 60_000 }, () => {
  it('POSTs the records one per line to the path and query given, and resolves on a 2xx answer', async () => {
    const srv = await serve((_req, res) => res.writeHead(202).end());
    const deliver = httpTarget(`${srv.url}/in/take?x=1&y=two`, { batch: 100, timeoutMs: 30_000 });
    try {
      await deliver(lines('a', 'bb', ''));
      assert.equal(srv.seen.length, 1);
      const s = srv.seen[0]!;
      assert.equal(s.method, 'POST');
      assert.equal(s.url, '/in/take?x=1&y=two');
      assert.equal(s.type, 'text/plain');
      assert.equal(s.body, 'a\nbb\n\n');
      assert.equal(s.authorization, undefined);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('sends a batch of 1 as the record itself, and json as NDJSON', async () => {
    const srv = await serve((_req, res) => res.writeHead(204).end());
    const one = httpTarget(`${srv.url}/`, { batch: 1, timeoutMs: 30_000 });
    const json = httpTarget(`${srv.url}/`, { batch: 10, timeoutMs: 30_000, format: 'json' });
    try {
      await one(lines('raw\nbytes'));
      await json(lines('a"b', 'c'));
      assert.deepEqual(
        srv.seen.map((s) => [s.type, s.body]),
        [
          ['application/octet-stream', 'raw\nbytes'],
          ['application/x-ndjson', '"a\\"b"\n"c"\n'],
        ],
      );
    } finally {
      one.close();
      json.close();
      await srv.stop();
    }
  });

  it('sends the user and password of the URL, percent-decoded, as Basic authorization', async () => {
    const srv = await serve((_req, res) => res.writeHead(200).end());
    const deliver = httpTarget(srv.url.replace('http://', 'http://al%40ice:p%3Ass%20w@') + '/', { batch: 2, timeoutMs: 30_000 });
    try {
      await deliver(lines('x'));
      assert.equal(srv.seen[0]!.authorization, `Basic ${Buffer.from('al@ice:p:ss w').toString('base64')}`);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('sends escapes that are not UTF-8 as their bytes and keeps a malformed escape as it is', async () => {
    const srv = await serve((_req, res) => res.writeHead(200).end());
    const deliver = httpTarget(srv.url.replace('http://', 'http://us%E9r:pa%ZZ%2Fss@') + '/', { batch: 2, timeoutMs: 30_000 });
    try {
      await deliver(lines('x'));
      const sent = Buffer.from(srv.seen[0]!.authorization!.replace(/^Basic /, ''), 'base64');
      assert.deepEqual([...sent], [...Buffer.from('us'), 0xe9, ...Buffer.from('r:pa%ZZ/ss')]);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('rejects a non-2xx answer with its status, and a redirect is not followed', async () => {
    let n = 0;
    const srv = await serve((_req, res) => (n++ === 0 ? res.writeHead(503).end('busy') : res.writeHead(302, { location: '/elsewhere' }).end()));
    const deliver = httpTarget(`${srv.url}/in`, { batch: 2, timeoutMs: 30_000 });
    try {
      await assert.rejects(deliver(lines('x')), { message: `POST ${srv.url}/in: HTTP 503` });
      await assert.rejects(deliver(lines('y')), { message: `POST ${srv.url}/in: HTTP 302` });
      assert.deepEqual(
        srv.seen.map((s) => s.url),
        ['/in', '/in'],
      );
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('reads a large answer to its end before resolving, and the next delivery reuses the connection', async () => {
    const big = 'z'.repeat(1 << 20);
    const srv = await serve((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(big));
    const deliver = httpTarget(`${srv.url}/`, { batch: 2, timeoutMs: 30_000 });
    try {
      await deliver(lines('a'));
      await deliver(lines('b'));
      assert.equal(srv.seen.length, 2);
      assert.equal(srv.seen[0]!.socket, srv.seen[1]!.socket);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('concurrent deliveries each get their own answer, over `connections` connections, reused afterwards', async () => {
    // The server holds every request until all 8 of a round arrived, so the
    // 8 deliveries are outstanding at once.
    let held: Array<() => void> = [];
    const srv = await serve((_req, res, s) => {
      held.push(() => res.writeHead(s.body.startsWith('bad') ? 500 : 200).end());
      if (held.length === 8) {
        const go = held;
        held = [];
        for (const f of go) f();
      }
    });
    const deliver = httpTarget(`${srv.url}/`, { batch: 10, timeoutMs: 30_000, connections: 8 });
    try {
      const round = () => Promise.allSettled(Array.from({ length: 8 }, (_, i) => deliver(lines(i % 3 === 0 ? `bad${i}` : `ok${i}`))));
      for (let r = 0; r < 2; r++) {
        const results = await round();
        assert.deepEqual(
          results.map((x) => x.status),
          Array.from({ length: 8 }, (_, i) => (i % 3 === 0 ? 'rejected' : 'fulfilled')),
        );
      }
      assert.equal(srv.seen.length, 16);
      assert.equal(srv.sockets.size, 8);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('deliveries beyond `connections` wait for a connection rather than open one', async () => {
    const srv = await serve((_req, res) => res.writeHead(204).end());
    const deliver = httpTarget(`${srv.url}/`, { batch: 10, timeoutMs: 30_000, connections: 2 });
    try {
      await Promise.all(Array.from({ length: 6 }, (_, i) => deliver(lines(`r${i}`))));
      assert.deepEqual(srv.seen.map((s) => s.body).sort(), ['r0\n', 'r1\n', 'r2\n', 'r3\n', 'r4\n', 'r5\n']);
      assert.equal(srv.sockets.size, 2);
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('a server that never answers fails the delivery by its deadline, whether or not the request got there, and every connection it opened is closed', async () => {
    const srv = await serve(() => {}); // never answers
    const deliver = httpTarget(`${srv.url}/slow`, { batch: 2, timeoutMs: 50 });
    try {
      // On a busy machine the deadline may pass before the request reaches
      // the server; the failure is the deadline's either way.
      await assert.rejects(deliver(lines('x')), (e: Error) => e.message.startsWith(`POST ${srv.url}/slow: no answer within `));
      for (const socket of srv.sockets) if (!socket.destroyed) await new Promise((resolve) => socket.once('close', resolve));
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('rejects when the connection is refused or cut before the answer', async () => {
    const srv = await serve((req) => req.socket.destroy());
    const cut = httpTarget(`${srv.url}/`, { batch: 2, timeoutMs: 30_000 });
    const refused = httpTarget('http://127.0.0.1:1/', { batch: 2, timeoutMs: 30_000 });
    try {
      await assert.rejects(cut(lines('x')), (e: Error) => e.message.startsWith(`POST ${srv.url}/: `) && !e.message.includes('no answer'));
      await assert.rejects(refused(lines('x')), (e: Error) => e.message.startsWith('POST http://127.0.0.1:1/: ') && e.message.includes('ECONNREFUSED'));
    } finally {
      cut.close();
      refused.close();
      await srv.stop();
    }
  });

  it('a TLS failure is one line: https to a plain HTTP port', async () => {
    const srv = await serve((_req, res) => res.writeHead(200).end());
    const deliver = httpTarget(srv.url.replace('http://', 'https://') + '/', { batch: 2, timeoutMs: 30_000 });
    try {
      await assert.rejects(deliver(lines('x')), (e: Error) => e.message.startsWith(`POST ${srv.url.replace('http://', 'https://')}/: `) && !/\s$/.test(e.message));
    } finally {
      deliver.close();
      await srv.stop();
    }
  });

  it('close() with a delivery waiting for its answer rejects that delivery', async () => {
    const srv = await serve(() => {}); // never answers
    const deliver = httpTarget(`${srv.url}/`, { batch: 2, timeoutMs: 60_000 });
    try {
      const waiting = deliver(lines('x'));
      while (srv.seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      deliver.close();
      await assert.rejects(waiting, (e: Error) => e.message.startsWith(`POST ${srv.url}/: `));
    } finally {
      deliver.close();
      await srv.stop();
    }
  });
});

describe('maskPassword', () => {
  it('masks everything from the first colon of the user information to the last @, on the text as given', () => {
    const cases: Array<[string, string]> = [
      ['http://user:secret@127.0.0.1:1/path', 'http://user:***@127.0.0.1:1/path'],
      // an @ in the user name (an email address) or in the password
      ['http://me@example.com:s3cret@127.0.0.1:18211/in', 'http://me@example.com:***@127.0.0.1:18211/in'],
      ['http://user:p@ss@w@127.0.0.1:1/in', 'http://user:***@127.0.0.1:1/in'],
      ['http://:pw@h/', 'http://:***@h/'],
      // a raw /, #, ? or \ in the password, with or without digits the URL parser takes for a port
      ['http://user:1234/s3cret@127.0.0.1:18500/', 'http://user:***@127.0.0.1:18500/'],
      ['http://user:#s3cret@127.0.0.1:1/', 'http://user:***@127.0.0.1:1/'],
      ['http://user:0?s3cret@127.0.0.1:1/', 'http://user:***@127.0.0.1:1/'],
      ['http://user:1\\s3cret@127.0.0.1:1/', 'http://user:***@127.0.0.1:1/'],
      ['http://user:12@34/s3cret@127.0.0.1:18500/', 'http://user:***@127.0.0.1:18500/'],
      ['http://user:sec/ret@127.0.0.1:1/', 'http://user:***@127.0.0.1:1/'],
      // no :// at all: from the scheme's colon on
      ['http:\\\\user:secret@127.0.0.1\\x', 'http:***@127.0.0.1\\x'],
      // blanks, tabs and line breaks the URL parser would drop
      [' http://user:s3cret@127.0.0.1:1/', ' http://user:***@127.0.0.1:1/'],
      ['ht\ttp://user:s3cret@h/', 'ht\ttp://user:***@h/'],
      ['http:\t//user:s3cret@h/', 'http:***@h/'],
      // no scheme, and a :// only after the @
      ['user:secret@127.0.0.1:1/', 'user:***@127.0.0.1:1/'],
      ['user:s3cret@host/?r=http://x', 'user:***@host/?r=http://x'],
      ['http://alice:s3cr3t@/path', 'http://alice:***@/path'],
      // an @ after the host masks more than the password
      ['http://host:8080/a@b', 'http://host:***@b'],
      // nothing to mask
      ['http://u@host/', 'http://u@host/'],
      ['https://[::1]:8/x', 'https://[::1]:8/x'],
      ['http://exa mple/', 'http://exa mple/'],
    ];
    assert.deepEqual(
      cases.map(([url]) => maskPassword(url)),
      cases.map(([, masked]) => masked),
    );
  });

  it('hideUrlPasswords masks every URL in a message and leaves text without one alone', () => {
    assert.equal(
      hideUrlPasswords("unknown option '--htp=http://u:pw@h/' (or https://a:b@c:1/x?)"),
      "unknown option '--htp=http://u:***@h/' (or https://a:***@c:1/x?)",
    );
    assert.equal(hideUrlPasswords('cannot read me@host:file: no such file'), 'cannot read me@host:file: no such file');
    // a password with a space; a URL without credentials before it is left whole
    assert.equal(
      hideUrlPasswords('--http has no host (write http://HOST[:PORT]/PATH): got "http://u:p w@h/"'),
      '--http has no host (write http://HOST[:PORT]/PATH): got "http://u:***@h/"',
    );
  });
});
