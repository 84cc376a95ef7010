/**
 * The NATS JetStream server the tests use: FERRY_TEST_NATS_URL, by default
 * 127.0.0.1:4222 (.ci/run starts one there). When it does not answer (or
 * answers without JetStream) the nats suites are skipped with one line saying
 * why; under CI=true that is a failure instead. Each harness gets a stream
 * prefix of its own; `cleanup` deletes its streams.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { openNatsQueue, type NatsQueue } from '../../src/queue/brokers/nats/queue.js';
import { resolveNatsConfig } from '../../src/queue/brokers/nats/config.js';
import type { EngineConfig } from '../../src/queue/options.js';
import type { Queue } from '../../src/queue/types.js';
import type { StoreFactory, StoreHarness } from './factories.js';

export const NATS_URL = process.env.FERRY_TEST_NATS_URL || '127.0.0.1:4222';

async function reachable(): Promise<string | undefined> {
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 3000, reconnect: false });
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
    } finally {
      await nc.close();
    }
    return undefined;
  } catch (err) {
    return `NATS JetStream at ${NATS_URL} is unreachable (${(err as Error).message}); set FERRY_TEST_NATS_URL`;
  }
}

const unreachable = await reachable();
if (unreachable && process.env.CI === 'true') throw new Error(`CI=true: ${unreachable}`);
/** Why the nats tests cannot run here, or undefined when they can. */
export const NATS_SKIP = unreachable ? `skipped: ${unreachable}` : undefined;

let counter = 0;
/** A stream prefix no other test file or run uses at the same time. */
export function testPrefix(): string {
  return `T${process.pid}x${++counter}x${Math.random().toString(36).slice(2, 7)}`;
}

/** Deletes every stream of `prefix`: its topics' (`prefix_…`) and its dead ledger (`prefix-DEAD`). */
export async function deleteStreams(prefix: string, servers: string | string[] = NATS_URL): Promise<void> {
  const nc = await connect({ servers, timeout: 3000, reconnect: false });
  try {
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const si of jsm.streams.list()) if (si.config.name.startsWith(`${prefix}_`) || si.config.name === `${prefix}-DEAD` || si.config.name === `${prefix}-ATT`) names.push(si.config.name);
    for (const n of names) await jsm.streams.delete(n).catch(() => undefined);
  } finally {
    await nc.close();
  }
}

/** Opens a nats queue on `prefix` with the engine settings of `cfg` that apply to it. */
export async function openTestNatsQueue(prefix: string, cfg: EngineConfig<unknown> = {}, servers: string | string[] = NATS_URL): Promise<NatsQueue<unknown>> {
  const block: Record<string, unknown> = { servers, streamPrefix: prefix };
  if (cfg.retentionHours !== undefined) block.retentionHours = cfg.retentionHours;
  if (cfg.maxPayloadBytes !== undefined) block.maxPayloadBytes = cfg.maxPayloadBytes;
  return openNatsQueue(resolveNatsConfig(block), {
    ...(cfg.codec !== undefined ? { codec: cfg.codec } : {}),
    ...(cfg.onError !== undefined ? { onError: cfg.onError } : {}),
    ...(cfg.logger !== undefined ? { logger: cfg.logger } : {}),
  });
}

/**
 * The nats queue as a conformance-suite entry: a broker, so it has no store
 * (`open` throws) and builds its queues itself (`openQueue`).
 */
export const natsFactory: StoreFactory = {
  name: 'nats',
  ...(NATS_SKIP ? { skip: NATS_SKIP } : {}),
  unsupported: {
    keys: 'a message key is refused (UnsupportedError): JetStream redelivers a failed message after later ones, so per-key order cannot hold',
    'delivery 5': 'injects failures into store calls; the nats queue has no store',
    'delivery 6': 'drives a store directly to lose leases; the nats queue has no store',
    'delivery: keyed messages run strictly in order per key, also while the head waits out a backoff': 'message keys are refused',
    'lifecycle 7c': 'gates store claims and releases; and JetStream counts a released (negatively acked) message as a delivery',
    'lifecycle 8': 'watches the store\'s claims; a pull consumer has no poll (its pull waits on the server)',
    'lifecycle 9a': 'injects store failures; publish errors are the client\'s',
    'lifecycle 9b': 'injects store failures',
    'lifecycle 9c': 'injects store failures',
    'lifecycle 12': 'counts store ack batches; each JetStream ack is one message to the server',
    'lifecycle 13': 'deliverAt is refused (UnsupportedError)',
    'lifecycle: the janitor purges on its timer': 'no janitor: a stream drops messages past its max age (retentionHours)',
    'lifecycle: the janitor runs on one instance at a time': 'no janitor',
    'lifecycle: a janitor pass works at the longest retentions the config accepts (a cutoff a century back)': 'no janitor',
    'admin: redrive skips and counts copies it cannot republish; limit and filter choose among the rest': 'publishes keyed copies and reads the store directly',
    'admin: redrive pages through more than 256 copies in publish order': 'counts store calls',
    'admin: a redrive at once with publishes to the dead-letter topic: each copy republished once, the late ones by the next run': 'reads the store directly',
    'admin: redrive: a filter that throws rejects with its error after republishing what it had accepted': 'reads the store directly',
    'attempts: renewals failing for a short blip: the message completes once, the handler never runs twice at once, nothing dies': 'injects renewal failures into the store',
    'attempts: renewals failing for good: each lapse aborts the handler, which then runs again once, never overlapping, until the attempts run out': 'injects renewal failures into the store',
    'attempts: two subscriptions of one queue on one group never run one delivery at once after a lapse': 'injects renewal failures into the store',
    'delivery: subscribe asks the store whether it can consume before registering anything': 'the nats queue has no store',
  },
  async create(): Promise<StoreHarness> {
    const prefix = testPrefix();
    const opened: Queue<unknown>[] = [];
    return {
      async open() {
        throw new Error('nats is a broker: it has no Store (use openQueue)');
      },
      async openQueue(cfg: EngineConfig<unknown> = {}) {
        const q = await openTestNatsQueue(prefix, cfg);
        opened.push(q);
        return q;
      },
      async cleanup() {
        for (const q of opened) await q.close({ timeoutMs: 100 }).catch(() => undefined);
        await deleteStreams(prefix).catch(() => undefined);
      },
    };
  },
};
