/**
 * Message fields `publish` checks before anything reaches the store:
 * `publishedAt` and `headers` of the wrong shape are an InvalidArgumentError
 * at once (not a driver error, retried as if transient), and nothing of the
 * publish is stored. A message too large for SQLite is a PayloadTooLargeError.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvalidArgumentError, PayloadTooLargeError } from '../../src/errors.js';
import { MAX_MESSAGE_TIME, MIN_MESSAGE_TIME, createQueue, createStoreQueue } from '../../src/queue/index.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';

const payload = new Uint8Array([1]);

describe('publish input', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-publish-input-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a publishedAt that is not a valid Date, and headers that are not an object, storing nothing', async () => {
    const errors: unknown[] = [];
    const store = new MemoryStore();
    // Refused at once means before the store is asked, so nothing can have been retried.
    let appends = 0;
    const append = store.append.bind(store);
    store.append = (...args) => (appends++, append(...args));
    const q = createStoreQueue(store, { onError: (e) => errors.push(e) });
    const bad: Array<[string, Record<string, unknown>]> = [
      ['publishedAt', { publishedAt: new Date('nope') }],
      ['publishedAt', { publishedAt: '2020-01-01' }],
      ['publishedAt', { publishedAt: 1_700_000_000_000 }],
      ['headers', { headers: null }],
      ['headers', { headers: 'x' }],
      ['headers', { headers: ['a'] }],
    ];
    for (const [field, extra] of bad) {
      await assert.rejects(
        q.publish({ topic: 't', payload, id: 'ok' }, { topic: 't', payload, ...extra } as never),
        (e: unknown) => e instanceof InvalidArgumentError && e.message.includes(field),
        `${field}: ${JSON.stringify(extra)}`,
      );
      assert.equal(appends, 0, `${field}: refused at once, never handed to the store (so never retried)`);
    }
    assert.deepEqual(errors, []);
    assert.deepEqual((await store.listMessages('t', { limit: 10 })).messages, []);
    // A valid publishedAt is kept as given.
    const at = new Date('2020-01-02T03:04:05.006Z');
    await q.publish({ topic: 't', payload, id: 'dated', publishedAt: at, headers: { a: 'b' } });
    const [m] = (await store.listMessages('t', { limit: 10 })).messages;
    assert.deepEqual([m!.publishedAt.toISOString(), m!.headers], [at.toISOString(), { a: 'b' }]);
    await q.close();
  });

  it('refuses a message field it does not know (a misspelt deliverAt, BullMQ\'s delay), storing nothing of the publish', async () => {
    const store = new MemoryStore();
    let appends = 0;
    const append = store.append.bind(store);
    store.append = (...args) => (appends++, append(...args));
    const q = createStoreQueue(store);
    try {
      for (const field of ['delay', 'delivreAt', 'topc', 'attempts']) {
        await assert.rejects(
          q.publish({ topic: 't', payload, id: 'ok' }, { topic: 't', payload, [field]: 1 } as never),
          (e: unknown) => e instanceof InvalidArgumentError && e.message.includes(JSON.stringify(field)) && e.message.includes('deliverAt'),
          field,
        );
      }
      assert.equal(appends, 0);
      assert.deepEqual((await store.listMessages('t', { limit: 10 })).messages, []);
      // Publishes made at once: only the one with the unknown field fails; the others share a commit.
      const together = await Promise.allSettled([
        q.publish({ topic: 't', payload, id: 'a' }),
        q.publish({ topic: 't', payload, id: 'bad', delay: 5 } as never),
        q.publish({ topic: 't', payload, id: 'b' }),
      ]);
      assert.deepEqual(together.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
      assert.deepEqual((await store.listMessages('t', { limit: 10 })).messages.map((m) => m.id), ['a', 'b']);
      // Every documented field is taken.
      const at = new Date(Date.now() + 60_000);
      await q.publish({ id: 'all', topic: 't', key: 'k', payload, headers: { a: 'b' }, publishedAt: new Date(0), deliverAt: at, priority: 0 });
      assert.deepEqual((await store.listMessages('t', { limit: 10 })).messages.map((m) => m.id), ['a', 'b', 'all']);
    } finally {
      await q.close();
    }
  });

  it('refuses publishedAt and deliverAt outside the years 1 to 9999 on memory and SQLite alike, and keeps the edges', async () => {
    // PostgreSQL reads times as four-digit-year ISO text, so every store takes the same range.
    const queues = [
      createStoreQueue(new MemoryStore()),
      (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(dir, 'years.db') } }))!,
    ];
    try {
      for (const q of queues) {
        const bad: Array<[string, Record<string, unknown>]> = [
          ['publishedAt', { publishedAt: new Date(MIN_MESSAGE_TIME - 1) }],
          ['publishedAt', { publishedAt: new Date(MAX_MESSAGE_TIME + 1) }],
          ['publishedAt', { publishedAt: new Date(-8.64e15) }],
          ['deliverAt', { deliverAt: new Date(MIN_MESSAGE_TIME - 1) }],
          ['deliverAt', { deliverAt: new Date(-8.64e15) }],
        ];
        for (const [field, extra] of bad) {
          await assert.rejects(
            q.publish({ topic: 't', payload, ...extra } as never),
            (e: unknown) => e instanceof InvalidArgumentError && e.message.includes(field) && e.message.includes('years 1 to 9999'),
            `${field}: ${JSON.stringify(extra)}`,
          );
        }
        await q.publish(
          { topic: 't', payload, id: 'first', publishedAt: new Date(MIN_MESSAGE_TIME), deliverAt: new Date(MIN_MESSAGE_TIME) },
          { topic: 't', payload, id: 'last', publishedAt: new Date(MAX_MESSAGE_TIME) },
        );
        const listed = (await q.listMessages('t', { limit: 10 })).messages.map((m) => [m.id, m.publishedAt.getTime(), m.deliverAt?.getTime()]);
        assert.deepEqual(listed, [
          ['first', MIN_MESSAGE_TIME, MIN_MESSAGE_TIME],
          ['last', MAX_MESSAGE_TIME, undefined],
        ]);
      }
    } finally {
      await Promise.all(queues.map((q) => q.close()));
    }
  });

  it('on sqlite, a message over the largest value the driver binds is a PayloadTooLargeError; the other messages of a shared commit are stored', async () => {
    const q = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(dir, 'big.db'), maxPayloadBytes: 2 ** 31 - 1 } }, { onError: () => {} }))!;
    const huge = Buffer.allocUnsafe(600_000_000);
    const results = await Promise.allSettled([
      q.publish({ topic: 't', payload, id: 'before' }),
      q.publish({ topic: 't', payload: huge, id: 'huge' }),
      q.publish({ topic: 't', payload, id: 'after' }),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    const err = (results[1] as PromiseRejectedResult).reason;
    assert.ok(err instanceof PayloadTooLargeError && err.code === 'ERR_PAYLOAD_TOO_LARGE', String(err));
    assert.deepEqual((await q.listMessages('t')).messages.map((m) => m.id), ['before', 'after']);
    await q.close();
  });
});
