/**
 * ferry's `nats` queue (NATS JetStream behind `Queue`) as a job queue,
 * through the public API (`createQueue({ type: 'nats' })`): on the local
 * single server (FERRY_BENCH_NATS_URL, default 127.0.0.1:4222) and on a
 * private 3-node cluster on loopback ports with 3 replicas per stream, which
 * the benchmark process starts on first use (nats-server must be installed)
 * and kills when it exits; consumer processes find it through
 * FERRY_BENCH_NATS_CLUSTER. One topic (one stream), one group (one durable
 * consumer), registered before anything is published. Per-key order is
 * refused by the nats queue, so the per-key workload does not run on it.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createQueue } from '../../src/queue/index.js';
import type { Queue } from '../../src/queue/index.js';
import { NatsCluster } from '../../test/helpers/nats-cluster.js';
import { BODY_BYTES } from './common.js';
import type { JobMessage } from './common.js';
import type { JobInstance, JobSystem } from './job-system.js';

const TOPIC = 'bench';
const GROUP = 'workers';
const SUBSCRIBE = { batchSize: 128, prefetch: 256, backoffBaseMs: 1000 };
const SINGLE = process.env.FERRY_BENCH_NATS_URL || '127.0.0.1:4222';

/** A stream prefix (1–32 of [A-Za-z0-9-]) for namespace `ns`, the same in every process. */
const prefixOf = (ns: string) => `B${createHash('sha1').update(ns).digest('hex').slice(0, 20)}`;

let cluster: Promise<NatsCluster> | undefined;
/** The 3-node cluster's servers: from the parent's environment in a consumer process, else started here once. */
async function clusterServers(): Promise<string[]> {
  const known = process.env.FERRY_BENCH_NATS_CLUSTER;
  if (known) return known.split(',');
  cluster ??= NatsCluster.start(3, (cmd, args) => {
    const child = spawn(cmd, args, { stdio: 'ignore' });
    process.once('exit', () => child.kill('SIGKILL'));
    return child;
  }).then((c) => {
    process.once('exit', () => c.stop());
    process.env.FERRY_BENCH_NATS_CLUSTER = c.servers.join(','); // inherited by the forked consumers
    return c;
  });
  return (await cluster).servers;
}

/**
 * Stops the cluster this process started, if any: its servers are child
 * processes, which would otherwise keep a finished run from exiting.
 */
export async function stopNatsCluster(): Promise<void> {
  const started = cluster;
  cluster = undefined;
  if (started) (await started).stop();
}

function instance(q: Queue): JobInstance {
  return {
    async publish(msgs: JobMessage[]) {
      await q.publish(...msgs.map((m) => ({ topic: TOPIC, payload: BODY_BYTES, headers: { s: String(m.sent) } })));
    },
    async fill() {
      throw new Error('the nats queue has no bulk fill');
    },
    async consume(spec) {
      const sub = await q.subscribe(TOPIC, GROUP, async (d) => {
        await spec.handler({ sent: Number(d.headers?.s ?? 0) });
      }, { ...SUBSCRIBE, concurrency: spec.concurrency, startFrom: 'earliest' });
      return { close: () => sub.close({ timeoutMs: 5000 }) };
    },
    close: () => q.close({ timeoutMs: 5000 }),
  };
}

function natsSystem(name: string, replicas: number, servers: () => Promise<string[]>): JobSystem {
  const open = async (ns: string) =>
    (await createQueue({ enabled: true, type: 'nats', config: { servers: await servers(), streamPrefix: prefixOf(ns), replicas } }, { onError: () => {} }))!;
  return {
    name,
    packages: ['@nats-io/jetstream', '@nats-io/transport-node'],
    settings: [
      { setting: 'subscribe `concurrency`', value: '16', default: '4' },
      { setting: 'subscribe `batchSize` (most messages per pull)', value: '128', default: '32' },
      { setting: 'subscribe `prefetch`', value: '256', default: '0' },
      { setting: 'stream replicas', value: String(replicas), default: '1' },
      { setting: 'publish', value: 'one `publish(...100 messages)` call: 100 JetStream publishes in flight at once', default: '' },
    ],
    differs: ['no per-key order', 'de-dup window 2 min'],
    keyOrder: 'refused (UnsupportedError)',
    caveats: 'Publish de-duplication by ID holds within the stream\'s duplicate window (2 minutes) only; keys, deliverAt, priorities, rate limits and pause are refused.',
    keyed: false,
    fills: false,
    async create(ns) {
      const q = await open(ns);
      const sub = await q.subscribe(TOPIC, GROUP, async () => {}, { startFrom: 'earliest' });
      await sub.close();
      return instance(q);
    },
    async connect(ns) {
      return instance(await open(ns));
    },
    async drop(ns) {
      const nc = await connect({ servers: await servers(), reconnect: false });
      try {
        const jsm = await jetstreamManager(nc);
        const names: string[] = [];
        for await (const si of jsm.streams.list()) if (si.config.name.startsWith(`${prefixOf(ns)}_`) || si.config.name === `${prefixOf(ns)}-DEAD`) names.push(si.config.name);
        for (const n of names) await jsm.streams.delete(n);
      } finally {
        await nc.close();
      }
    },
  };
}

export const ferryNats = natsSystem('ferry nats', 1, async () => [SINGLE]);
export const ferryNatsCluster = natsSystem('ferry nats r3', 3, clusterServers);
