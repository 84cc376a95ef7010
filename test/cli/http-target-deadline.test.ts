/**
 * `--timeout-ms` alone decides when an HTTP delivery gives up, however long
 * it is: undici's own header timeout (300 s by default) must not end a
 * delivery given 600 s. The clock is node:test's mocked `setTimeout`, which
 * also drives undici's timers (they tick on `setTimeout`); it is enabled
 * before undici arms its first timer, which is why this case has a file (so
 * a process) of its own. The network is real. Without the fix (undici's
 * defaults) the delivery fails at 300 s with "Headers Timeout Error".
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, it, mock } from 'node:test';
import { batchOf, httpTarget } from '../../src/cli/deliver.js';

/** Lets real I/O callbacks and the promise reactions after them run (setImmediate is not mocked). */
async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('httpTarget deadline', { timeout: 60_000 }, () => {
  it('a 600 s --timeout-ms outlasts undici\'s 300 s header timeout, and then fails the delivery', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    // undici re-arms its tick with the timer's refresh(), which a mocked
    // timer does not re-arm; without refresh() it sets a new timer each tick
    // (its timers say so, for mocked clocks).
    const mocked = globalThis.setTimeout;
    globalThis.setTimeout = ((fn: () => void, ms?: number) => Object.assign(mocked(fn, ms), { refresh: undefined })) as unknown as typeof setTimeout;
    const sockets = new Set<Socket>();
    let arrived!: () => void;
    const request = new Promise<void>((resolve) => (arrived = resolve));
    const server = createServer((req: IncomingMessage) => {
      req.resume();
      req.on('end', arrived); // read, never answered
    });
    server.on('connection', (s) => sockets.add(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow`;
    const deliver = httpTarget(url, { batch: 2, timeoutMs: 600_000 });
    try {
      let outcome: string | undefined;
      const delivery = deliver(batchOf([Buffer.from('x')])).then(
        () => (outcome = 'accepted'),
        (err: Error) => (outcome = err.message),
      );
      await request;
      // 310 s in steps of 250 ms, letting I/O and undici's reactions run
      // between them (a mocked tick does not fire a timer set during it, so
      // the steps are shorter than undici's own 499 ms tick).
      const advance = async (ms: number) => {
        for (let t = 0; t < ms; t += 250) {
          mock.timers.tick(250);
          await settle(2);
        }
      };
      await advance(310_000);
      await settle();
      assert.equal(outcome, undefined, 'the delivery ended before its own deadline');
      await advance(290_000);
      await delivery;
      // Ended by its own deadline, not undici's header timeout.
      const ended = outcome as string | undefined; // set by the delivery's settling, after the check above
      assert.ok(ended?.startsWith(`POST ${url}: no answer within `), ended);
    } finally {
      deliver.close();
      globalThis.setTimeout = mocked;
      mock.timers.reset();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
