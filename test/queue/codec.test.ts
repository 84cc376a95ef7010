/**
 * Typed payloads: a codec encodes on publish and decodes for handlers; raw
 * bytes stay the default and are stored unchanged; encode failures throw
 * before anything is stored; decode failures dead-letter without crashing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CodecError, InvalidArgumentError } from '../../src/errors.js';
import {
  HEADER_DLQ_ERROR,
  HEADER_DLQ_SOURCE_TOPIC,
  MemoryBacking,
  MemoryStore,
  codecs,
  createQueue,
  createStoreQueue,
} from '../../src/queue/index.js';
import type { Codec, DeadLetteredEvent, Delivery, Store } from '../../src/queue/index.js';
import { FAST, dec, enc } from '../stores/engine-harness.js';
import { claimReq, counts, deferred, waitFor } from '../stores/helpers.js';


/** A queue over a fresh backing, and a second raw store handle on it to read what was stored. */
async function setUp<T = Uint8Array>(codec?: Codec<T>) {
  const backing = new MemoryBacking();
  const q = createStoreQueue<T>(new MemoryStore({ backing }), codec ? { codec } : {});
  const raw: Store = new MemoryStore({ backing });
  let n = 0;
  /** The stored messages of `topic`, in publish order, as a new `earliest` group sees them. */
  const messages = async (topic: string) => {
    const g = `raw${n++}`;
    await raw.ensureGroup(topic, g, 'earliest');
    return (await raw.claim(claimReq(topic, g, { max: 100 }))).map((c) => c.message);
  };
  /** The stored payloads of `topic`. */
  const stored = async (topic: string) => (await messages(topic)).map((m) => m.payload);
  return { q, raw, stored, messages };
}

describe('codecs', () => {
  it('Queue<{n:number}> with codecs.json: handlers get values, the store keeps JSON bytes', async () => {
    const { q, stored } = await setUp<{ n: number }>(codecs.json);
    const got: Array<Delivery<{ n: number }>> = [];
    const done = deferred();
    await q.subscribe('t', 'g', async (d) => {
      got.push(d);
      if (got.length === 3) done.resolve();
    }, { ...FAST, concurrency: 1 });
    await q.publish({ topic: 't', payload: { n: 1 } }, { topic: 't', payload: { n: 2 } });
    await q.publish({ topic: 't', payload: { n: 3 }, key: 'k', headers: { h: 'v' } });
    await done.promise;
    assert.deepEqual(got.map((d) => d.payload), [{ n: 1 }, { n: 2 }, { n: 3 }]);
    assert.deepEqual(got[2]!.headers, { h: 'v' });
    assert.deepEqual((await stored('t')).map(dec), ['{"n":1}', '{"n":2}', '{"n":3}']);
    await q.close();
  });

  it('without a codec payloads are the given bytes, stored unchanged', async () => {
    const { q, stored } = await setUp();
    const bytes = new Uint8Array([0, 255, 1, 128]);
    const seen = deferred<Uint8Array>();
    await q.subscribe('t', 'g', async (d) => seen.resolve(d.payload), FAST);
    await q.publish({ topic: 't', payload: bytes });
    const p = await seen.promise;
    assert.ok(p instanceof Uint8Array);
    assert.deepEqual([...p], [0, 255, 1, 128]);
    assert.deepEqual([...(await stored('t'))[0]!], [0, 255, 1, 128]);
    await q.close();
  });

  it('a subscription codec overrides the queue\'s; publish takes { codec } as its last argument', async () => {
    const { q, stored } = await setUp<{ n: number }>(codecs.json);
    const text = deferred<string>();
    await q.subscribe('s', 'g', async (d) => text.resolve(d.payload), { ...FAST, codec: codecs.utf8 });
    const ids = await q.publish({ topic: 's', payload: 'héllo' }, { topic: 's', payload: 'two' }, { codec: codecs.utf8 });
    assert.equal(ids.length, 2, 'the options object is not a message');
    assert.equal(await text.promise, 'héllo');
    assert.deepEqual((await stored('s')).map(dec), ['héllo', 'two']);
    // The queue's own codec still applies to calls without the option.
    await q.publish({ topic: 'j', payload: { n: 7 } });
    assert.deepEqual((await stored('j')).map(dec), ['{"n":7}']);
    await q.close();
  });

  it("publish's options refuse a key other than codec (before: ignored), storing nothing", async () => {
    const { q, stored } = await setUp<{ n: number }>(codecs.json);
    for (const opts of [{ codec: codecs.utf8, sync: true }, { codec: codecs.utf8, coddec: codecs.bytes }]) {
      await assert.rejects(q.publish({ topic: 't', payload: 'x' }, opts as never), (err: unknown) => err instanceof InvalidArgumentError && /unknown publish option/.test(err.message), JSON.stringify(Object.keys(opts)));
    }
    assert.deepEqual(await stored('t'), []);
    await q.close();
  });

  it('publishes with different codecs under Promise.all each store their own encoding; two groups decode one topic two ways', async () => {
    const { q, stored } = await setUp<{ n: number }>(codecs.json);
    const asText: string[] = [];
    const asBytes: number[] = [];
    await Promise.all([
      q.subscribe('t', 'text', async (d) => void asText.push(d.payload), { ...FAST, codec: codecs.utf8 }),
      q.subscribe('t', 'bytes', async (d) => void asBytes.push(d.payload.byteLength), { ...FAST, codec: codecs.bytes }),
    ]);
    await Promise.all([
      q.publish({ topic: 't', id: 'j', payload: { n: 1 } }),
      q.publish({ topic: 't', id: 'u', payload: 'ü' }, { codec: codecs.utf8 }),
      q.publish({ topic: 't', id: 'b', payload: new Uint8Array([1, 2, 3]) }, { codec: codecs.bytes }),
    ]);
    await waitFor(() => asText.length === 3 && asBytes.length === 3, 5000);
    assert.deepEqual(asText.sort(), ['\u0001\u0002\u0003', '{"n":1}', 'ü'].sort());
    assert.deepEqual(asBytes.sort(), [2, 3, 7]);
    assert.deepEqual((await stored('t')).map((b) => b.byteLength).sort(), [2, 3, 7]);
    await q.close();
  });

  it('an encode failure is a CodecError thrown before anything of the call is stored', async () => {
    const { q, raw, stored } = await setUp<string>(codecs.utf8);
    await raw.ensureGroup('t', 'g', 'latest');
    await assert.rejects(q.publish({ topic: 't', payload: 'fine' }, { topic: 't', payload: 5 as never }), CodecError);
    const refusing: Codec<number> = { encode: () => { throw new RangeError('too big'); }, decode: () => 0 };
    const err = await q.publish({ topic: 't', payload: 1 }, { codec: refusing }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof CodecError, String(err));
    assert.equal(err.code, 'ERR_CODEC');
    assert.match(err.message, /too big/);
    assert.ok(err.cause instanceof RangeError);
    const notBytes = { encode: () => 'str', decode: () => 0 } as unknown as Codec<number>;
    await assert.rejects(q.publish({ topic: 't', payload: 1 }, { codec: notBytes }), /must return a Uint8Array/);
    assert.deepEqual(counts(await raw.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    assert.deepEqual(await stored('t'), []);
    await q.close();
  });

  it('a payload that fails to decode is dead-lettered at once, with the codec error in x-queue-dlq-error; the loop goes on', async () => {
    const { q, messages } = await setUp<{ n: number }>(codecs.json);
    const events: DeadLetteredEvent[] = [];
    q.on('deadLettered', (e) => events.push(e));
    const handled: Array<{ n: number }> = [];
    await q.subscribe('t', 'g', async (d) => void handled.push(d.payload), { ...FAST, concurrency: 1, deadLetterTopic: 'dlq', maxAttempts: 5 });
    await q.publish({ topic: 't', payload: enc('{not json') }, { codec: codecs.bytes });
    await q.publish({ topic: 't', payload: { n: 2 } });
    await waitFor(async () => handled.length === 1 && (await q.stats('t', 'g')).dead === 1, 5000, 'the bad payload dead and the good one handled');
    assert.deepEqual(handled, [{ n: 2 }], 'the handler never saw the undecodable payload');
    assert.equal(events.length, 1);
    assert.equal(events[0]!.reason, 'decode');
    assert.equal(events[0]!.attempt, 1, 'no retries: decoding again would fail again');
    assert.ok(events[0]!.error instanceof CodecError);
    assert.equal(events[0]!.durationMs, undefined, 'the handler did not run');
    assert.equal(events[0]!.deadLetterTopic, 'dlq');
    const copies = await messages('dlq');
    assert.equal(copies.length, 1);
    assert.equal(dec(copies[0]!.payload), '{not json', 'the copy keeps the stored bytes');
    assert.equal(copies[0]!.headers![HEADER_DLQ_SOURCE_TOPIC], 't');
    assert.match(copies[0]!.headers![HEADER_DLQ_ERROR]!, /could not be decoded: .*JSON/);
    await q.close();
  });

  it('refuses a codec without encode and decode functions with InvalidArgumentError', async () => {
    assert.throws(() => createStoreQueue(new MemoryStore(), { codec: 5 as never }), InvalidArgumentError);
    const q = createStoreQueue(new MemoryStore());
    await assert.rejects(q.subscribe('t', 'g', async () => undefined, { codec: { encode: () => new Uint8Array() } as never }), InvalidArgumentError);
    await assert.rejects(q.publish({ topic: 't', payload: new Uint8Array() }, { codec: {} as never }), InvalidArgumentError);
    await q.close();
  });

  it('createQueue takes the codec in deps and types the queue by it', async () => {
    const q = (await createQueue<string>({ enabled: true, type: 'memory' }, { codec: codecs.utf8 }))!;
    const got = deferred<string>();
    await q.subscribe('t', 'g', async (d) => got.resolve(d.payload), FAST);
    await q.publish({ topic: 't', payload: 'from config' });
    assert.equal(await got.promise, 'from config');
    await q.close();
  });
});
