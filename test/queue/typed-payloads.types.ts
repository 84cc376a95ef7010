/**
 * Type tests, compiled by `npm run typecheck` and never run: each
 * `@ts-expect-error` line must fail to compile, so a typing that let it
 * through breaks the typecheck.
 */
import { MemoryStore, codecs, createQueue, createStoreQueue } from '../../src/queue/index.js';
import type { Codec, CompletedEvent, Delivery, Queue, SubscribeOptions } from '../../src/queue/index.js';
import pino from 'pino';

type Job = { n: number };

export async function typedQueue(): Promise<void> {
  const q: Queue<Job> = createStoreQueue<Job>(new MemoryStore(), { codec: codecs.json });
  await q.publish({ topic: 't', payload: { n: 1 } });
  // @ts-expect-error a string is not a Job
  await q.publish({ topic: 't', payload: 'one' });
  // @ts-expect-error n must be a number
  await q.publish({ topic: 't', payload: { n: '1' } });
  // @ts-expect-error raw bytes are not a Job either
  await q.publish({ topic: 't', payload: new Uint8Array() });

  await q.subscribe('t', 'g', async (d) => {
    const n: number = d.payload.n;
    void n;
    // @ts-expect-error the payload is a Job, not bytes
    d.payload.byteLength;
  });
  // @ts-expect-error a handler of bytes does not fit a queue of Jobs
  await q.subscribe('t', 'g', async (d: Delivery<Uint8Array>) => void d);

  // Shared options without a codec fit any queue.
  const fast: SubscribeOptions = { pollIntervalMs: 20 };
  await q.subscribe('t', 'g', async (d) => void d.payload.n, { ...fast, concurrency: 2 });

  // A subscription codec types its handler.
  await q.subscribe('s', 'g', async (d) => void d.payload.toUpperCase(), { codec: codecs.utf8 });
  // @ts-expect-error the utf8 codec delivers strings, not Jobs
  await q.subscribe('s', 'g', async (d: Delivery<Job>) => void d, { codec: codecs.utf8 });

  // publish's last argument may be { codec }, which types the messages before it.
  await q.publish({ topic: 's', payload: 'text' }, { codec: codecs.utf8 });
  // @ts-expect-error a number is not a string
  await q.publish({ topic: 's', payload: 5 }, { codec: codecs.utf8 });
}

export async function defaultIsBytes(): Promise<void> {
  const q = createStoreQueue(new MemoryStore());
  await q.publish({ topic: 't', payload: new Uint8Array([1]) });
  // @ts-expect-error without a codec payloads are bytes
  await q.publish({ topic: 't', payload: { n: 1 } });
  await q.subscribe('t', 'g', async (d) => void d.payload.byteLength);
}

export async function ownCodecAndConfig(): Promise<void> {
  const dates: Codec<Date> = { encode: (d) => new TextEncoder().encode(d.toISOString()), decode: (b) => new Date(new TextDecoder().decode(b)) };
  const q = (await createQueue<Date>({ enabled: true, type: 'memory' }, { codec: dates, logger: pino({ level: 'silent' }) }))!;
  await q.publish({ topic: 't', payload: new Date() });
  // @ts-expect-error a string is not a Date
  await q.publish({ topic: 't', payload: '2020-01-01' });
  await q.subscribe('t', 'g', async (d) => void d.payload.getTime());
}

export function typedEvents(q: Queue<Job>): void {
  q.on('completed', (e: CompletedEvent) => void e.durationMs);
  q.on('retrying', (e) => void (e.delayMs + e.attempt));
  q.on('deadLettered', (e) => void e.reason);
  q.on('error', (err, op) => void [err, op.length]);
  // @ts-expect-error completed events have no delayMs
  q.on('completed', (e) => void e.delayMs);
  // @ts-expect-error no such event
  q.on('finished', () => undefined);
}
