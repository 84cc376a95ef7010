/**
 * Misspelt keys fail loudly: subscribe options, engine config, close options
 * and a queue config's top level are checked against the interfaces' key lists.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, InvalidNameError } from '../../src/errors.js';
import { codecs, createQueue, createStoreQueue, MAX_RETENTION_HOURS, MemoryStore, type SubscribeOptions } from '../../src/queue/index.js';
import { counts } from '../stores/helpers.js';
import { CLOSE_OPTION_KEYS, ENGINE_CONFIG_KEYS, SUBSCRIBE_OPTION_KEYS } from '../../src/queue/options.js';

const invalid = (pattern: RegExp) => (e: unknown) =>
  e instanceof InvalidArgumentError && e.code === 'ERR_INVALID_ARGUMENT' && pattern.test(e.message);

const noop = async () => undefined;

describe('option values in errors', () => {
  it('print as values: a string is quoted, not shown as the number it spells', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      await assert.rejects(q.subscribe('t', 'g', noop, { concurrency: '3' } as never), invalid(/concurrency must be an integer from 1 to \d+, got "3"$/));
      await assert.rejects(q.subscribe('t', 'g', noop, { startFrom: 'first' } as never), invalid(/got "first"$/));
    } finally {
      await q.close();
    }
    assert.throws(() => createStoreQueue(new MemoryStore(), { retentionHours: '24' } as never), invalid(/retentionHours must be .*, got "24"$/));
  });
});

describe('unknown option keys', () => {
  it('subscribe refuses a misspelt option, naming it, and starts nothing', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      await assert.rejects(q.subscribe('t', 'g', noop, { concurency: 3 } as SubscribeOptions), invalid(/unknown subscribe option "concurency"/));
      await assert.rejects(q.subscribe('t', 'g', noop, { concurrency: 3, dead_letter_topic: 'x' } as SubscribeOptions), invalid(/"dead_letter_topic"/));
      await assert.rejects(q.subscribe('t', 'g', noop, null as unknown as SubscribeOptions), invalid(/must be an object/));
      await assert.rejects(q.subscribe('t', 'g', noop, 3 as unknown as SubscribeOptions), invalid(/must be an object/));
      // Nothing was registered: a later subscription of the group starts at `latest` as if new.
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    } finally {
      await q.close();
    }
  });

  it('subscribe accepts every listed key, and the list is exactly the documented options', async () => {
    assert.deepEqual([...SUBSCRIBE_OPTION_KEYS].sort(), [
      'backoffBaseMs', 'backoffMaxMs', 'batchSize', 'codec', 'concurrency', 'deadLetterTopic', 'leaseDurationMs',
      'maxAttempts', 'maxInFlight', 'pollIntervalMs', 'prefetch', 'rateLimit', 'startFrom',
    ]);
    const q = createStoreQueue(new MemoryStore());
    try {
      const sub = await q.subscribe('t', 'g', noop, {
        concurrency: 2, batchSize: 4, pollIntervalMs: 50, leaseDurationMs: 3000, maxAttempts: 2, backoffBaseMs: 1,
        backoffMaxMs: 2, deadLetterTopic: 'dead', maxInFlight: 3, startFrom: 'earliest', prefetch: 1, codec: codecs.bytes,
      });
      await sub.close();
    } finally {
      await q.close();
    }
  });

  it('createStoreQueue refuses an unknown engine config key', () => {
    assert.deepEqual([...ENGINE_CONFIG_KEYS].sort(), ['ackedRetentionHours', 'codec', 'fireSchedules', 'janitorIntervalMs', 'logger', 'maxPayloadBytes', 'onError', 'retentionHours', 'tracing']);
    assert.throws(() => createStoreQueue(new MemoryStore(), { retentionHour: 3 } as never), invalid(/unknown engine config key "retentionHour"/));
    assert.throws(() => createStoreQueue(new MemoryStore(), { onError: 'log' } as never), invalid(/onError/));
  });

  it('durations past the longest Node timer are refused (they would fire after 1 ms)', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      for (const opts of [{ pollIntervalMs: 3e9 }, { leaseDurationMs: 1e12 }, { backoffBaseMs: 3e9, backoffMaxMs: 3e9 }, { backoffMaxMs: 2 ** 31 }]) {
        await assert.rejects(q.subscribe('t', 'g', noop, opts), invalid(/at most|to 2147483647/), JSON.stringify(opts));
      }
      const sub = await q.subscribe('t', 'g', noop, { pollIntervalMs: 2 ** 31 - 1 });
      await sub.close();
    } finally {
      await q.close();
    }
    assert.throws(() => createStoreQueue(new MemoryStore(), { janitorIntervalMs: 1e12 }), invalid(/janitorIntervalMs/));
    // One message for every bad value, naming the timer's range (before: -5 was told "at most 9007199254740991"), and whole ms only (before: 1.5 passed).
    for (const bad of [-5, 0, 1.5, 2 ** 31, Number.NaN]) {
      assert.throws(() => createStoreQueue(new MemoryStore(), { janitorIntervalMs: bad }), invalid(/janitorIntervalMs must be an integer above 0 and at most 2147483647/), String(bad));
    }
  });

  it('createQueue refuses a deps key a letter or two away from one ferry reads, and lets other names through', async () => {
    for (const deps of [{ fireSchedule: false }, { onerror: () => {} }, { OnError: () => {} }, { loger: console }, { Codec: codecs.json }, { lockers: {} }, { fireSchedle: false }, { onErorr: () => {} }, { pol: {} }]) {
      const key = Object.keys(deps)[0]!;
      await assert.rejects(createQueue({ type: 'memory' }, deps as never), invalid(new RegExp(`deps key "${key}" is not one ferry reads: did you mean`)), key);
    }
    await assert.rejects(createQueue({ type: 'memory' }, null as never), invalid(/deps must be an object/));
    // A name of a type's own passes through, beside the ones ferry reads.
    const q = (await createQueue({ type: 'memory' }, { fireSchedules: false, myConnection: {}, region: 'eu', lock: {}, logs: [] }))!;
    try {
      assert.deepEqual(await q.publish({ topic: 't', payload: new Uint8Array([1]) }).then((ids) => ids.length), 1);
    } finally {
      await q.close();
    }
  });

  it('retention longer than MAX_RETENTION_HOURS is refused, so no store gets a purge cutoff it cannot represent; 0 says "above 0"', () => {
    assert.equal(MAX_RETENTION_HOURS, 876_000);
    for (const key of ['retentionHours', 'ackedRetentionHours'] as const) {
      assert.throws(() => createStoreQueue(new MemoryStore(), { [key]: 1e9 }), invalid(new RegExp(`${key} must be a number above 0 and at most 876000, got 1000000000`)));
      assert.throws(() => createStoreQueue(new MemoryStore(), { [key]: MAX_RETENTION_HOURS + 1 }), invalid(new RegExp(key)));
      assert.throws(() => createStoreQueue(new MemoryStore(), { [key]: 0 }), invalid(new RegExp(`${key} must be a number above 0 and at most`)));
      assert.throws(() => createStoreQueue(new MemoryStore(), { [key]: -1 }), invalid(new RegExp(`${key} must be a number above 0`)));
    }
    assert.throws(() => createStoreQueue(new MemoryStore(), { maxPayloadBytes: 0 }), invalid(/maxPayloadBytes must be an integer above 0/));
  });

  it('an empty deadLetterTopic is refused like any invalid name, not read as "none"', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: '' }), (e) => e instanceof InvalidNameError && e.code === 'ERR_INVALID_NAME' && /dead-letter topic name is empty/.test(e.message));
      await assert.rejects(q.subscribe('t', 'g', noop, { deadLetterTopic: null as never }), InvalidNameError);
      const sub = await q.subscribe('t', 'g', noop, { deadLetterTopic: undefined });
      await sub.close();
    } finally {
      await q.close();
    }
  });

  it('a JSON queue config refuses an unknown setting in its block', async () => {
    await assert.rejects(createQueue({ type: 'memory', config: { retentionHour: 3 } }), invalid(/unknown setting "retentionHour"/));
  });

  it('close refuses an unknown key or a bad timeout, closing nothing; a good close at the same time still closes', async () => {
    assert.deepEqual([...CLOSE_OPTION_KEYS].sort(), ['signal', 'timeoutMs']);
    const q = createStoreQueue(new MemoryStore());
    const sub = await q.subscribe('t', 'g', noop, { pollIntervalMs: 10 });
    await assert.rejects(sub.close({ timeout: 5 } as never), invalid(/unknown close option "timeout"/));
    await assert.rejects(sub.close({ timeoutMs: -1 }), invalid(/timeoutMs/));
    await assert.rejects(sub.close({ signal: {} as AbortSignal }), invalid(/signal/));
    await assert.rejects(q.close({ timeoutMS: 5 } as never), invalid(/"timeoutMS"/));
    // Still open: publishing and delivering work.
    let seen = 0;
    await q.subscribe('u', 'g', async () => void seen++, { pollIntervalMs: 10 });
    await q.publish({ topic: 'u', payload: new Uint8Array(1) });
    for (let i = 0; i < 200 && seen === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(seen, 1);
    // A bad close and a good one at once: the bad one rejects, the good one closes both.
    const [bad, good] = await Promise.allSettled([q.close({ timout: 1 } as never), q.close({ timeoutMs: 1000 })]);
    assert.equal(bad.status, 'rejected');
    assert.ok(invalid(/"timout"/)((bad as PromiseRejectedResult).reason));
    assert.equal(good.status, 'fulfilled');
    await assert.rejects(q.publish({ topic: 'u', payload: new Uint8Array(1) }), { code: 'ERR_CLOSED' });
    await sub.close(); // idempotent after the queue closed it
  });

  it('subscribes with good and misspelt options at once: only the misspelt ones fail', async () => {
    const q = createStoreQueue(new MemoryStore());
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, (_, i) => q.subscribe('t', `g${i}`, noop, (i % 2 ? { concurency: 1 } : { concurrency: 1 }) as SubscribeOptions)),
      );
      results.forEach((r, i) => {
        if (i % 2) assert.ok(r.status === 'rejected' && invalid(/concurency/)(r.reason), `g${i}`);
        else assert.equal(r.status, 'fulfilled', `g${i}`);
      });
    } finally {
      await q.close();
    }
  });
});
