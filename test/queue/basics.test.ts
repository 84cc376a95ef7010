/** Unit tests of the queue's pure pieces: names, delivery IDs, backoff, permanent, options, error text. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError, InvalidNameError } from '../../src/errors.js';
import { equalJitterBackoffMs } from '../../src/backoff.js';
import { errorText, MAX_ERROR_BYTES, truncateUtf8 } from '../../src/queue/dead-letter.js';
import { createHash } from 'node:crypto';
import { DELIVERY_ID_NAMESPACE, deliveryId, uuidV5 } from '../../src/queue/delivery-id.js';
import * as api from '../../src/queue/index.js';
import { MAX_ID_LENGTH, MAX_NAME_LENGTH, validateId, validateName } from '../../src/queue/names.js';
import { resolveEngineConfig, resolveSubscribeOptions } from '../../src/queue/options.js';
import { isPermanent, permanent, PermanentError } from '../../src/queue/permanent.js';

describe('validateName', () => {
  it('accepts 1 to 200 characters from [A-Za-z0-9._-]', () => {
    for (const ok of ['a', 'orders.v2', 'A-Z_0-9', 'x'.repeat(MAX_NAME_LENGTH)]) validateName('topic', ok);
    assert.equal(MAX_NAME_LENGTH, 200);
    assert.equal(MAX_ID_LENGTH, 255);
  });
  it('refuses empty, too long and foreign characters with InvalidNameError', () => {
    for (const bad of ['', 'x'.repeat(201), 'a b', 'a/b', 'a:b', 'ü', 'a\n']) {
      assert.throws(() => validateName('group', bad), (e: unknown) => e instanceof InvalidNameError && e.code === 'ERR_INVALID_NAME' && /group/.test(e.message));
    }
  });
  it('says a name that is not a string is not a string (not that it is empty)', () => {
    for (const [bad, what] of [[5, 'number'], [{}, 'object'], [null, 'null'], [undefined, 'undefined']] as const) {
      assert.throws(() => validateName('group', bad as unknown as string), (e: unknown) => e instanceof InvalidNameError && e.message === `group name must be a string, not ${what}`);
    }
  });
});

describe('validateId', () => {
  it('accepts any well-formed string of 1 to 255 code units, emoji and other scripts included', () => {
    // The limit counts UTF-16 code units: 127 emoji (two units each) and one letter are 255.
    const emojiAtLimit = '😀'.repeat(127) + 'k';
    assert.equal(emojiAtLimit.length, MAX_ID_LENGTH);
    for (const ok of ['a', 'ü', '😀', 'k'.repeat(MAX_ID_LENGTH), emojiAtLimit, 'a b\tc']) {
      assert.doesNotThrow(() => validateId('id', ok), `accepts ${JSON.stringify(ok)}`);
    }
  });
  it('refuses empty, too long, a lone surrogate (two such IDs would be stored as one) and NUL with InvalidArgumentError', () => {
    for (const bad of ['', 'k'.repeat(256), 'x\uD800', 'x\uDBFF', '\uDC00y', 'a\u0000b']) {
      assert.throws(() => validateId('key', bad), (e: unknown) => e instanceof InvalidArgumentError && e.code === 'ERR_INVALID_ARGUMENT' && /key/.test(e.message));
    }
  });
  it('says a value that is not a string is not one, rather than calling it empty', () => {
    for (const [bad, what] of [[5, 'number'], [null, 'null'], [{}, 'object']] as const) {
      assert.throws(() => validateId('id', bad as unknown as string), (e: unknown) => e instanceof InvalidArgumentError && e.message === `message id must be a string, not ${what}`);
    }
  });
});

describe('deliveryId', () => {
  it('implements RFC 9562 version-5 UUIDs (the RFC example)', () => {
    // Namespace DNS, name "www.example.com".
    assert.equal(uuidV5('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'www.example.com'), '2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });
  it('is deterministic, version 5, and distinct per group and per message', () => {
    const a = deliveryId('msg-1', 'billing');
    assert.equal(a, deliveryId('msg-1', 'billing'));
    assert.equal(a, uuidV5(DELIVERY_ID_NAMESPACE, 'billing:msg-1'));
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(a, deliveryId('msg-1', 'shipping'));
    assert.notEqual(a, deliveryId('msg-2', 'billing'));
    // A group cannot contain ':', so these two pairs cannot collide.
    assert.notEqual(deliveryId('b:c', 'a'), deliveryId('c', 'a.b'));
  });
  it('hashes the name as UTF-8 whatever its length, short after long (a reused buffer)', () => {
    const reference = (name: string) => {
      const d = createHash('sha1').update(Buffer.from(DELIVERY_ID_NAMESPACE.replace(/-/g, ''), 'hex')).update(name, 'utf8').digest();
      d[6] = (d[6]! & 0x0f) | 0x50;
      d[8] = (d[8]! & 0x3f) | 0x80;
      const h = d.toString('hex', 0, 16);
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    };
    for (const name of ['g:é€😀', 'g:' + 'ü€😀'.repeat(500), 'g:x', 'g:' + 'a'.repeat(5000), 'g:']) {
      assert.equal(uuidV5(DELIVERY_ID_NAMESPACE, name), reference(name), `name of ${name.length} UTF-16 units`);
    }
  });
});

describe('equalJitterBackoffMs', () => {
  it('doubles from the base, caps at the max, and lies in [d/2, d]', () => {
    const low = () => 0;
    const high = () => 0.999999;
    assert.deepEqual([1, 2, 3, 4].map((n) => equalJitterBackoffMs(n, 1000, 300_000, low)), [500, 1000, 2000, 4000]);
    assert.ok(Math.abs(equalJitterBackoffMs(3, 1000, 300_000, high) - 4000) < 0.01);
    assert.equal(equalJitterBackoffMs(20, 1000, 300_000, low), 150_000);
    assert.equal(equalJitterBackoffMs(5000, 1000, 300_000, low), 150_000, 'huge attempts do not overflow');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 1_000_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (n, base, extra, r) => {
        const max = base + extra;
        const d = Math.min(base * 2 ** (n - 1), max);
        const got = equalJitterBackoffMs(n, base, max, () => r);
        return got >= d / 2 && got <= d;
      }),
    );
  });
});

describe('permanent', () => {
  it('marks an error so isPermanent sees it, also through a cause chain', () => {
    const cause = new Error('bad input');
    const p = permanent(cause);
    assert.ok(p instanceof PermanentError);
    assert.equal(p.cause, cause);
    assert.equal(p.message, 'bad input');
    assert.equal(isPermanent(p), true);
    assert.equal(isPermanent(new Error('wrapped', { cause: p })), true);
    assert.equal(isPermanent(cause), false);
    assert.equal(isPermanent('text'), false);
    assert.equal(permanent(p), p);
    assert.equal(permanent(undefined), undefined);
    assert.equal(permanent(null), undefined);
    assert.equal(isPermanent(permanent('just a string')), true);
    const loop: { cause?: unknown } = {};
    loop.cause = loop;
    assert.equal(isPermanent(loop), false, 'a cyclic cause chain ends');
  });
});

describe('options', () => {
  it('subscription defaults are the seed\'s', () => {
    assert.deepEqual(resolveSubscribeOptions(), {
      concurrency: 4, batchSize: 32, pollIntervalMs: 1000, leaseDurationMs: 30_000, maxAttempts: 5,
      backoffBaseMs: 1000, backoffMaxMs: 300_000, maxInFlight: 0, startFrom: 'latest', prefetch: 0, deadLetterTopic: undefined,
    });
  });
  it('engine defaults are the seed\'s', () => {
    const c = resolveEngineConfig();
    assert.deepEqual([c.retentionHours, c.ackedRetentionHours, c.janitorIntervalMs, c.maxPayloadBytes], [168, 24, 600_000, 1 << 20]);
  });
  it('refuses out-of-range values with InvalidArgumentError', () => {
    for (const bad of [{ concurrency: 0 }, { batchSize: 1.5 }, { leaseDurationMs: -1 }, { maxAttempts: 0 }, { backoffBaseMs: 10, backoffMaxMs: 5 }, { maxInFlight: -1 }, { startFrom: 'middle' as never }, { pollIntervalMs: Number.NaN }, { prefetch: -1 }, { prefetch: 0.5 }]) {
      assert.throws(() => resolveSubscribeOptions(bad), InvalidArgumentError, JSON.stringify(bad));
    }
    for (const bad of [{ retentionHours: 0 }, { maxPayloadBytes: 1.5 }, { janitorIntervalMs: -5 }]) {
      assert.throws(() => resolveEngineConfig(bad), InvalidArgumentError, JSON.stringify(bad));
    }
  });
});

describe('error text', () => {
  it('truncateUtf8 never splits a character', () => {
    assert.equal(truncateUtf8('hello', 10), 'hello');
    assert.equal(truncateUtf8('hello', 3), 'hel');
    assert.equal(truncateUtf8('aé', 2), 'a', 'é is two bytes');
    assert.equal(truncateUtf8('a€', 3), 'a', '€ is three bytes');
    assert.equal(truncateUtf8('a🚀b', 4), 'a', '🚀 is four bytes');
    assert.equal(truncateUtf8('a🚀b', 5), 'a🚀');
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), fc.integer({ min: 0, max: 400 }), (s, n) => {
        const t = truncateUtf8(s, n);
        const bytes = Buffer.byteLength(t);
        if (Buffer.byteLength(s) <= n) return t === s;
        // A prefix, within the cap, losing at most the 3 bytes of a partial character.
        return s.startsWith(t) && bytes <= n && bytes > n - 4 && !t.includes('\uFFFD');
      }),
    );
  });
  it('errorText takes an Error\'s message or the value\'s text, capped', () => {
    assert.equal(errorText(new Error('boom')), 'boom');
    assert.equal(errorText('plain'), 'plain');
    assert.equal(errorText(undefined), 'undefined');
    assert.equal(errorText(Object.create(null)), '[object Object]');
    assert.equal(Buffer.byteLength(errorText('x'.repeat(5000))), MAX_ERROR_BYTES);
  });
});

describe('public surface', () => {
  it('exports the names the design fixes', () => {
    for (const name of [
      'createQueue', 'createStoreQueue', 'registerQueueType', 'registeredQueueTypes', 'deliveryId', 'validateName', 'permanent', 'isPermanent',
      'MAX_NAME_LENGTH', 'MAX_ID_LENGTH', 'HEADER_DLQ_SOURCE_TOPIC', 'HEADER_DLQ_GROUP', 'HEADER_DLQ_DELIVERY_ID', 'HEADER_DLQ_MESSAGE_ID',
      'HEADER_DLQ_ATTEMPTS', 'HEADER_DLQ_ERROR', 'MemoryStore', 'SqliteStore',
    ]) {
      assert.ok(name in api, name);
    }
    assert.deepEqual(
      [api.HEADER_DLQ_SOURCE_TOPIC, api.HEADER_DLQ_GROUP, api.HEADER_DLQ_DELIVERY_ID, api.HEADER_DLQ_MESSAGE_ID, api.HEADER_DLQ_ATTEMPTS, api.HEADER_DLQ_ERROR],
      ['x-queue-dlq-source-topic', 'x-queue-dlq-group', 'x-queue-dlq-delivery-id', 'x-queue-dlq-message-id', 'x-queue-dlq-attempts', 'x-queue-dlq-error'],
    );
  });
});
