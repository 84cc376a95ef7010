/**
 * The distributed-locker SPI, against each implementation: mutual exclusion
 * with growing fences, independence of keys, TTL lapse (and a stale release
 * that frees nothing), abort while waiting, argument checks. The Postgres and
 * Redis lockers are also run as two separate lockers (two "instances").
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { InvalidArgumentError, LockedError } from '../../src/errors.js';
import { PostgresLocker } from '../../src/queue/lockers/postgres.js';
import { ProcessLocker } from '../../src/queue/lockers/process.js';
import { RedisLocker } from '../../src/queue/lockers/redis.js';
import type { DistributedLocker } from '../../src/queue/lockers/types.js';
import { POSTGRES_SKIP, POSTGRES_URL } from '../stores/postgres-env.js';
import { sleep } from '../stores/helpers.js';
import { REDIS_SKIP, REDIS_URL } from '../stores/redis-env.js';

const unreachableRedis = REDIS_SKIP;

interface Kind {
  name: string;
  skip?: string;
  /** Two lockers that share the backend (one for a single-instance kind). */
  pair(prefix: string): Promise<[DistributedLocker, DistributedLocker, () => Promise<void>]>;
}

const kinds: Kind[] = [
  {
    name: 'process',
    async pair() {
      const l = new ProcessLocker();
      return [l, l, async () => undefined];
    },
  },
  {
    name: 'postgres',
    ...(POSTGRES_SKIP ? { skip: POSTGRES_SKIP } : {}),
    async pair(prefix) {
      const a = await PostgresLocker.open({ connectionString: POSTGRES_URL, prefix, poolSize: 12 });
      const b = await PostgresLocker.open({ connectionString: POSTGRES_URL, prefix, poolSize: 12 });
      return [a, b, async () => void (await Promise.all([a.close(), b.close()]))];
    },
  },
  {
    name: 'redis',
    ...(unreachableRedis ? { skip: `skipped: ${unreachableRedis}` } : {}),
    async pair(prefix) {
      const a = await RedisLocker.open({ url: REDIS_URL, prefix });
      const b = await RedisLocker.open({ url: REDIS_URL, prefix });
      return [a, b, async () => void (await Promise.all([a.close(), b.close()]))];
    },
  },
];

for (const kind of kinds) {
  describe(`locker: ${kind.name}`, { skip: kind.skip }, () => {
    const closers: Array<() => Promise<void>> = [];
    after(async () => {
      for (const c of closers) await c();
    });
    const pair = async () => {
      const [a, b, close] = await kind.pair(`ferry-test:${process.pid}:${Math.random().toString(36).slice(2)}:`);
      closers.push(close);
      return [a, b] as const;
    };

    it('grants one holder at a time across lockers, with fences growing in grant order', async () => {
      const [a, b] = await pair();
      let inside = 0;
      let peak = 0;
      const fences: number[] = [];
      await Promise.all(
        Array.from({ length: 12 }, async (_, i) => {
          const lock = await (i % 2 ? a : b).acquire('k', 10_000);
          inside++;
          peak = Math.max(peak, inside);
          fences.push(lock.fence);
          await sleep(3);
          inside--;
          await lock.release();
        }),
      );
      assert.equal(peak, 1);
      assert.equal(fences.length, 12);
      for (let i = 1; i < fences.length; i++) assert.ok(fences[i]! > fences[i - 1]!, `fence ${fences[i]} after ${fences[i - 1]}`);
    });

    it('different keys do not wait for each other; release is idempotent', async () => {
      const [a, b] = await pair();
      const x = await a.acquire('x', 10_000);
      const y = await b.acquire('y', 10_000);
      assert.notEqual(x.key, y.key);
      await x.release();
      await x.release();
      const x2 = await b.acquire('x', 10_000);
      await Promise.all([y.release(), x2.release()]);
    });

    it('an unreleased lock lapses at its TTL; the late release does not free the next holder', async () => {
      const [a, b] = await pair();
      const first = await a.acquire('ttl', 200);
      const t0 = Date.now();
      const second = await b.acquire('ttl', 10_000);
      assert.ok(Date.now() - t0 >= 150, `granted after ${Date.now() - t0} ms, before the TTL`);
      assert.ok(second.fence > first.fence);
      await first.release();
      const ctl = new AbortController();
      const third = a.acquire('ttl', 10_000, { signal: ctl.signal });
      await sleep(150);
      ctl.abort(new Error('gave up'));
      await assert.rejects(third, LockedError, 'the stale release freed the newer hold');
      await second.release();
      await (await a.acquire('ttl', 1000)).release();
    });

    it('a signal that aborts while waiting rejects with LockedError; one already aborted rejects at once', async () => {
      const [a, b] = await pair();
      const held = await a.acquire('busy', 10_000);
      const ctl = new AbortController();
      const waiting = b.acquire('busy', 10_000, { signal: ctl.signal });
      setTimeout(() => ctl.abort(new Error('stop')), 50);
      const err = await waiting.then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof LockedError, String(err));
      assert.match(String((err.cause as Error).message), /stop/);
      await assert.rejects(b.acquire('busy', 10_000, { signal: AbortSignal.abort() }), LockedError);
      await held.release();
      const next = await b.acquire('busy', 10_000);
      await next.release();
    });

    it('refuses an empty key and a TTL that is not an integer from 1 to the longest Node timer', async () => {
      const [a] = await pair();
      for (const [key, ttl] of [['', 10], ['k', 0], ['k', -5], ['k', 1.5], ['k', Number.NaN], ['k', 2 ** 31], ['k', 1e10], ['a\0b', 10]] as const) {
        await assert.rejects(a.acquire(key, ttl), InvalidArgumentError);
      }
    });
  });
}

/**
 * Two closes at once: a close made while another runs must not resolve
 * before it (it used to return at once, while the pool or the connection was
 * still ending).
 */
for (const kind of kinds.filter((k) => k.name !== 'process')) {
  describe(`locker: ${kind.name}, close ‖ close`, { skip: kind.skip }, () => {
    it('the second call resolves with the first, not before it', async () => {
      const [locker, , closeBoth] = await kind.pair(`ferry-test:${process.pid}:close2:`);
      const a = locker as DistributedLocker & { close(): Promise<void> };
      try {
        const order: string[] = [];
        await Promise.all([a.close().then(() => order.push('first')), a.close().then(() => order.push('second'))]);
        assert.deepEqual(order, ['first', 'second']);
      } finally {
        await closeBoth();
      }
    });
  });
}
