/**
 * No `RedisLocker` call waits forever. Through a TCP proxy that stops
 * forwarding (a frozen network: no error, no answer), `acquire` and
 * `release` reject with a transient `IOError` once `commandTimeoutMs`
 * passes, an abort ends a frozen `acquire` at once, and `close()` settles,
 * where before every one of them waited for good (ioredis has no command
 * timeout unless told). A grant whose answer arrives after the timeout is
 * given back, so the key is free for the next holder without waiting out
 * its TTL.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, IOError } from '../../src/errors.js';
import { RedisLocker } from '../../src/queue/lockers/redis.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { isTransientIOError, leaseOutlivesFreeze, within } from './locker-freeze.js';
import { REDIS_SKIP, REDIS_URL } from '../stores/redis-env.js';

const skip = REDIS_SKIP;

describe('redis locker on a frozen connection', { skip }, () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  const target = new URL(REDIS_URL);
  const proxyUrl = (p: TcpProxy) => `redis://127.0.0.1:${p.port}${target.pathname}`;

  async function frozenPair(): Promise<{ proxy: TcpProxy; locker: RedisLocker; direct: RedisLocker; prefix: string }> {
    const proxy = await TcpProxy.start(Number(target.port || 6379), target.hostname === 'localhost' ? '127.0.0.1' : target.hostname);
    cleanups.push(() => proxy.close());
    const prefix = `ferry-test:${randomUUID()}:`;
    const locker = await RedisLocker.open({ url: proxyUrl(proxy), prefix, commandTimeoutMs: 500 });
    cleanups.push(async () => (proxy.thaw(), await locker.close()));
    const direct = await RedisLocker.open({ url: REDIS_URL, prefix });
    cleanups.push(() => direct.close());
    return { proxy, locker, direct, prefix };
  }

  it('acquire and release reject with a transient IOError; the held lock stands; release works after the thaw', { timeout: 600_000 }, async () => {
    const { proxy, locker, direct } = await frozenPair();
    await leaseOutlivesFreeze(proxy, locker, direct);
  });

  it('a grant answered after the timeout is given back: the key is free long before its TTL', { timeout: 600_000 }, async () => {
    const { proxy, locker, direct } = await frozenPair();
    proxy.freeze();
    // The command is held by the proxy; it reaches Redis at the thaw, after the call timed out.
    await within(assert.rejects(locker.acquire('late', 600_000), isTransientIOError), 'acquire');
    proxy.thaw();
    // Without the give-back the key would stay taken for 600 s: the hang catcher would fire first.
    const lock = await within(direct.acquire('late', 1000), 'the key after the late grant');
    await lock.release();
  });

  it('an abort ends a frozen acquire at once, and close settles', { timeout: 600_000 }, async () => {
    const proxy = await TcpProxy.start(Number(target.port || 6379), target.hostname === 'localhost' ? '127.0.0.1' : target.hostname);
    cleanups.push(() => proxy.close());
    // A timeout far past the hang catcher: only the abort can end the call.
    const locker = await RedisLocker.open({ url: proxyUrl(proxy), prefix: `ferry-test:${randomUUID()}:`, commandTimeoutMs: 600_000 });
    cleanups.push(async () => (proxy.thaw(), await locker.close()));
    proxy.freeze();
    const ctl = new AbortController();
    const acquiring = locker.acquire('k', 1000, { signal: ctl.signal });
    setTimeout(() => ctl.abort(), 200);
    await within(assert.rejects(acquiring, { code: 'ERR_LOCKED' }), 'aborted acquire');
  });

  it('close rejects the acquires under way with ClosedError at once, waits for the frozen try, and gives back the grant it brings (before: they went on waiting, and a late grant held its key until the TTL)', { timeout: 600_000 }, async () => {
    const proxy = await TcpProxy.start(Number(target.port || 6379), target.hostname === 'localhost' ? '127.0.0.1' : target.hostname);
    cleanups.push(() => proxy.close());
    const prefix = `ferry-test:${randomUUID()}:`;
    // A timeout far past the hang catcher: the frozen try ends only when the proxy thaws.
    const locker = await RedisLocker.open({ url: proxyUrl(proxy), prefix, commandTimeoutMs: 600_000 });
    cleanups.push(async () => (proxy.thaw(), await locker.close()));
    const direct = await RedisLocker.open({ url: REDIS_URL, prefix });
    cleanups.push(() => direct.close());
    const waiter = await RedisLocker.open({ url: REDIS_URL, prefix });
    cleanups.push(() => waiter.close());
    // One acquire polls a key another holder has; one sits in the frozen proxy.
    const busy = await direct.acquire('busy', 600_000);
    const polling = waiter.acquire('busy', 600_000);
    proxy.freeze();
    const frozen = locker.acquire('k', 600_000);
    await sleep(100);
    let closed = false;
    const closing = locker.close().then(() => (closed = true));
    await within(assert.rejects(frozen, { code: 'ERR_CLOSED' }), 'the frozen acquire');
    await within(Promise.all([waiter.close(), assert.rejects(polling, { code: 'ERR_CLOSED' })]), 'the polling acquire');
    assert.equal(closed, false, 'close ended while its try was still in the proxy');
    proxy.thaw();
    await within(closing, 'close after the thaw');
    // The grant the thawed try brought was given back: the key is free now, not after its 600 s TTL.
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 30_000);
    try {
      await (await direct.acquire('k', 1000, { signal: ctl.signal })).release();
    } finally {
      clearTimeout(timer);
    }
    await busy.release();
  });

  it('close gives back the locks it holds, on its own connection and on a borrowed client; a release after close resolves (before: the keys stayed taken until their TTL, and the release failed on the closed connection)', { timeout: 600_000 }, async () => {
    const prefix = `ferry-test:${randomUUID()}:`;
    const own = await RedisLocker.open({ url: REDIS_URL, prefix });
    cleanups.push(() => own.close());
    const { Redis } = await import('ioredis');
    const client = new Redis(REDIS_URL);
    cleanups.push(async () => client.disconnect());
    const borrowing = await RedisLocker.open({ client, prefix });
    cleanups.push(() => borrowing.close());
    const other = await RedisLocker.open({ url: REDIS_URL, prefix });
    cleanups.push(() => other.close());
    const held = [await own.acquire('own', 600_000), await own.acquire('own2', 600_000), await borrowing.acquire('borrowed', 600_000)];
    // A release at once with the close that gives the same lock back, and closes of both lockers at once.
    await Promise.all([own.close(), borrowing.close(), held[1]!.release()]);
    for (const h of held) await h.release();
    // Free at once for another locker, not after the 600 s TTL.
    for (const key of ['own', 'own2', 'borrowed']) {
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), 30_000);
      try {
        await (await other.acquire(key, 1000, { signal: ctl.signal })).release();
      } finally {
        clearTimeout(timer);
      }
    }
  });

  it('close settles on a frozen connection', { timeout: 600_000 }, async () => {
    const { proxy, locker } = await frozenPair();
    proxy.freeze();
    await within(locker.close(), 'close');
    await assert.rejects(locker.acquire('k', 1000), { code: 'ERR_CLOSED' });
  });

  it('refuses bad options', async () => {
    for (const bad of [{ commandTimeoutMs: -1 }, { commandTimeoutMs: 1.5 }, { commandTimeoutMs: '10' }, { prefix: 5 }]) {
      await assert.rejects(RedisLocker.open({ url: REDIS_URL, ...(bad as object) }), InvalidArgumentError, JSON.stringify(bad));
    }
    await assert.rejects(RedisLocker.open({ url: REDIS_URL, prefx: 'a' } as never), /unknown redis locker option "prefx"/);
  });

  it('open names why it could not connect, and refuses a database index the server refuses (before: it carried on in database 0)', async () => {
    const refused = await TcpProxy.start(Number(target.port || 6379));
    const port = refused.port;
    await refused.close();
    await assert.rejects(RedisLocker.open({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 5000 }), (err: unknown) => {
      assert.ok(err instanceof IOError && err.transient === true, String(err));
      assert.match(err.message, new RegExp(`connecting to 127\\.0\\.0\\.1:${port} failed: .*ECONNREFUSED`));
      return true;
    });
    const outOfRange = new URL(REDIS_URL);
    outOfRange.pathname = '/99999';
    await assert.rejects(RedisLocker.open({ url: outOfRange.toString() }), (err: unknown) => {
      assert.ok(err instanceof IOError && err.transient === false, String(err));
      assert.match(err.message, /selecting database 99999 failed: ERR DB index is out of range/);
      return true;
    });
  });
});
