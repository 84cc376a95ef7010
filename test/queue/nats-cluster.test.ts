/**
 * The nats queue on a real 3-node JetStream cluster (streams with 3
 * replicas): two consumer processes, each in groups g1 and g2, take 5,000
 * messages of which 20% fail their first attempt, while the test SIGKILLs
 * one server node, restarts it, and SIGKILLs one consumer process. At the
 * end every message succeeded in every group (and was acked, but for
 * acks whose confirmation a kill cut off), every handler run after a
 * success follows a kill or a lost lease, the group's `maxInFlight` was
 * never exceeded outside the consumer-leader failover after the node kill
 * (handler intervals, which sit inside the server's leases; see below),
 * and nothing was lost. Needs nats-server (skipped without it, failed under
 * CI=true).
 */
import assert from 'node:assert/strict';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { createQueue } from '../../src/queue/registry.js';
import { spawnChild, spawnTsx } from '../helpers/children.js';
import { NATS_SERVER_BINARY, NatsCluster } from '../helpers/nats-cluster.js';
import { runs } from '../helpers/long.js';
import { testPrefix } from '../stores/nats-env.js';
import { waitFor } from '../stores/helpers.js';

const SKIP = NATS_SERVER_BINARY ? undefined : 'skipped: nats-server is not installed';
if (SKIP && process.env.CI === 'true') throw new Error(`CI=true: ${SKIP}`);

const MESSAGES = runs(5000, 5000, 'FERRY_NATS_CLUSTER_MESSAGES');
const MAX_IN_FLIGHT = 6;
const LEASE_MS = 3000;
/** How far apart two processes' clocks may read at one instant, ms. */
const CLOCK_SLACK_MS = 2;
const enc = new TextEncoder();

interface Run { group: string; id: string; start: number; end?: number; ok?: boolean; worker: number }

describe('nats queue on a 3-node JetStream cluster', { skip: SKIP }, () => {
  it('kills of a server node and a consumer lose nothing, duplicate only after a kill or lost lease, and keep maxInFlight outside the failover', { timeout: 600_000 }, async () => {
    const cluster = await NatsCluster.start(3, (cmd, args) => spawnChild(cmd, args, { stdio: 'ignore' }));
    const prefix = testPrefix();
    const events: Array<{ t: number; what: string }> = [];
    const runsOf: Run[] = [];
    const open = new Map<string, Run>(); // worker:group:id -> running
    const acked = new Map<string, number>(); // group:id -> acks
    const lost = new Set<string>();
    let ackTotal = 0;
    const workers: ChildProcess[] = [];
    const exited: number[] = [];
    const producer = (await createQueue({ type: 'nats', config: { servers: cluster.servers, streamPrefix: prefix, replicas: 3 } }, { onError: () => undefined }))!;
    try {
      const ready: Promise<void>[] = [];
      for (let w = 0; w < 2; w++) {
        const child = spawnTsx(new URL('./fixtures/nats-cluster-worker.ts', import.meta.url).pathname, [cluster.servers.join(','), prefix, String(MAX_IN_FLIGHT), String(LEASE_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
        workers.push(child);
        child.once('exit', () => exited.push(w));
        ready.push(new Promise<void>((resolve) => {
          createInterface({ input: child.stdout! }).on('line', (line) => {
            const [kind, group, id, a, b] = line.split(' ');
            if (kind === 'ready') return resolve();
            const key = `${w}:${group}:${id}`;
            if (kind === 'start') {
              const r: Run = { group: group!, id: id!, start: Number(b), worker: w };
              runsOf.push(r);
              open.set(key, r);
            } else if (kind === 'end') {
              const r = open.get(key);
              if (r) {
                r.end = Number(b);
                r.ok = a === 'ok';
                open.delete(key);
              }
            } else if (kind === 'acked') {
              acked.set(`${group}:${id}`, (acked.get(`${group}:${id}`) ?? 0) + 1);
              ackTotal++;
            } else if (kind === 'lost') lost.add(`${group}:${id}`);
          });
        }));
      }
      await Promise.all(ready);

      const publishing = (async () => {
        for (let i = 0; i < MESSAGES; i += 100) {
          const batch = Array.from({ length: Math.min(100, MESSAGES - i) }, (_, j) => ({ id: `m${i + j}`, topic: 'jobs', payload: enc.encode('x') }));
          // A batch that fails while a node is down is published again: same IDs, de-duplicated.
          for (;;) {
            try {
              await producer.publish(...batch);
              break;
            } catch {
              await new Promise((r) => setTimeout(r, 200));
            }
          }
        }
      })();

      const target = MESSAGES * 2;
      await waitFor(() => ackTotal >= target * 0.25, 300_000, 'a quarter acked');
      cluster.kill(1);
      const nodeKilledAt = Date.now();
      events.push({ t: nodeKilledAt, what: 'node 2 killed' });
      await waitFor(() => ackTotal >= target * 0.5, 300_000, 'half acked with a node down');
      cluster.restart(1);
      events.push({ t: Date.now(), what: 'node 2 restarted' });
      await cluster.waitReady(1);
      const nodeBackAt = Date.now();
      await waitFor(() => ackTotal >= target * 0.65, 300_000, 'two thirds acked');
      workers[0]!.kill('SIGKILL');
      const killedAt = Date.now();
      events.push({ t: killedAt, what: 'worker 0 killed' });
      await publishing;
      // Succeeded: a handler run returned. (An ack whose confirmation was lost with a node may have
      // completed the message without a `completed` event, so the acks alone cannot tell.)
      const succeeded = () => new Set(runsOf.filter((r) => r.ok).map((r) => `${r.group}:${r.id}`));
      const missing = () => {
        const ok = succeeded();
        return [...Array(MESSAGES).keys()].flatMap((i) => [`g1:m${i}`, `g2:m${i}`]).filter((k) => !ok.has(k));
      };
      try {
        await waitFor(() => missing().length === 0, 300_000, 'every message succeeded in both groups');
      } catch (err) {
        const m = missing();
        throw new Error(`${(err as Error).message}: ${m.length} missing, e.g. ${m.slice(0, 5).join(', ')}; acked ${acked.size} of ${target}`);
      }
      // Every message was acked in both groups, but for those whose ack confirmation a kill cut off:
      // a success in the killed worker (its ack in flight at the SIGKILL) or a lost lease.
      const unacked = () => {
        const killedOk = new Set(runsOf.filter((r) => r.worker === 0 && r.ok).map((r) => `${r.group}:${r.id}`));
        return [...Array(MESSAGES).keys()].flatMap((i) => [`g1:m${i}`, `g2:m${i}`]).filter((k) => !acked.has(k) && !lost.has(k) && !killedOk.has(k));
      };
      // The last acks may still be on their way when the last handler returns.
      await waitFor(() => unacked().length === 0, 30_000, `the acks of ${unacked().slice(0, 5).join(', ')}`);
      assert.deepEqual(exited, [0], 'only the killed worker exited');

      // No message lost: each one acked in each group (checked above); none acked that was not published.
      for (const k of acked.keys()) assert.match(k, /^g[12]:m[0-9]+$/);

      // Duplicates: a run after a successful one of the same delivery follows a kill, a restart or a lost lease.
      const firstOk = new Map<string, Run>();
      let duplicates = 0;
      for (const r of [...runsOf].sort((a, b) => a.start - b.start)) {
        const key = `${r.group}:${r.id}`;
        const prev = firstOk.get(key);
        if (prev) {
          duplicates++;
          const explained = lost.has(key) || events.some((e) => e.t >= prev.start - LEASE_MS && e.t <= r.start);
          assert.ok(explained, `${key} ran again at ${r.start} after succeeding at ${prev.end} with no kill or lost lease between`);
        } else if (r.ok) firstOk.set(key, r);
      }

      // maxInFlight per group across both processes: handler intervals never overlap more than the cap.
      // A run the kill cut short holds its lease until the ack wait runs out: at least two thirds of a lease
      // after the kill (the last in-progress ack went out at most a third of a lease before it). The two processes' clocks
      // (timeOrigin + now) agree only to about a millisecond, so each interval is trimmed by CLOCK_SLACK_MS
      // at both ends; handlers take 20 ms, so the check still sees every run.
      //
      // JetStream keeps the cap (max_ack_pending) on the consumer's leader. When the node holding it dies,
      // the new leader knows only the deliveries that had been replicated, so for about one ack wait it may
      // hand out more than the cap while the old deliveries still run: docs/QUEUE.md says so. The cap is
      // asserted outside that window (from one lease before the node kill to one lease after it answers
      // again); inside it the peak is reported.
      const cutLeaseEnd = killedAt + (LEASE_MS * 2) / 3 - 100;
      const failover: [number, number] = [nodeKilledAt - LEASE_MS, nodeBackAt + LEASE_MS];
      const peaks: string[] = [];
      for (const group of ['g1', 'g2']) {
        const points: Array<[number, number]> = [];
        for (const r of runsOf) {
          if (r.group !== group) continue;
          points.push([r.start + CLOCK_SLACK_MS, 1], [(r.end ?? cutLeaseEnd) - CLOCK_SLACK_MS, -1]);
        }
        points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        let cur = 0;
        let peak = 0;
        let peakInFailover = 0;
        for (const [t, d] of points) {
          cur += d;
          if (t >= failover[0] && t <= failover[1]) peakInFailover = Math.max(peakInFailover, cur);
          else peak = Math.max(peak, cur);
        }
        assert.ok(peak <= MAX_IN_FLIGHT, `${group}: ${peak} handlers at once outside the failover, cap ${MAX_IN_FLIGHT}`);
        peaks.push(`${group} ${peak} (${peakInFailover} during the failover)`);
      }
      console.log(`# nats cluster: handlers at once, cap ${MAX_IN_FLIGHT}: ${peaks.join(', ')}`);
      const failedFirst = runsOf.filter((r) => r.ok === false).length;
      // A first attempt the worker kill cut short ends unreported, so a few may be missing.
      assert.ok(failedFirst >= (MESSAGES / 5) * 2 * 0.9, `${failedFirst} failed first attempts`);
      console.log(`# nats cluster: ${runsOf.length} handler runs, ${failedFirst} failed first attempts, ${duplicates} duplicates, ${lost.size} lost leases`);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
      await producer.close({ timeoutMs: 100 }).catch(() => undefined);
      cluster.stop();
    }
  });
});
