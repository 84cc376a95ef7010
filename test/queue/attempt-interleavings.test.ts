/**
 * No two attempts of one delivery overlap in a queue, whatever order claims,
 * lease renewals, acks, lapses and handler completions happen in. fast-check's
 * scheduler decides when each store reply and each handler's end arrive; a
 * small model store decides, per claim, whether the leases it holds have run
 * out (as a database's would during a blip) and, per renewal, whether it
 * fails. The property: a handler never starts while another run of the same
 * delivery is still inside its handler, every delivery is acked exactly once
 * in the end, and every redelivery follows a reported `leaseLost`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { createStoreQueue } from '../../src/queue/engine.js';
import type { ClaimRequest, Claimed, QueueStats, Store } from '../../src/queue/types.js';

const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 40);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Row {
  id: string;
  token: string | undefined;
  leaseUntil: number;
  attempt: number;
  acks: number;
  done: boolean;
}

/** A one-group store whose replies the scheduler releases; `expire` and `failRenewal` are consumed one value per call. */
function modelStore(s: fc.Scheduler, n: number, expire: boolean[], failRenewal: boolean[]) {
  const rows: Row[] = Array.from({ length: n }, (_, i) => ({ id: `d${i}`, token: undefined, leaseUntil: 0, attempt: 0, acks: 0, done: false }));
  const byId = new Map(rows.map((r) => [r.id, r]));
  const held = (c: Claimed) => {
    const r = byId.get(c.deliveryId)!;
    return !r.done && r.token === c.claimToken ? r : undefined;
  };
  const reply = <T>(label: string, v: T): Promise<T> => s.schedule(Promise.resolve(v), label);
  const store: Store = {
    ensureGroup: async () => undefined,
    append: async () => undefined,
    claim: (req: ClaimRequest) => {
      const now = Date.now();
      const expireNow = expire.shift() ?? false;
      const out: Claimed[] = [];
      for (const r of rows) {
        if (out.length >= req.max) break;
        if (r.done) continue;
        if (r.token !== undefined && r.leaseUntil > now && !expireNow) continue;
        r.token = randomUUID();
        r.attempt++;
        r.leaseUntil = now + req.leaseMs;
        out.push({ deliveryId: r.id, claimToken: r.token, group: req.group, attempt: r.attempt, message: { id: r.id, topic: req.topic, payload: new Uint8Array(), publishedAt: new Date(0) } });
      }
      return reply('claim', out);
    },
    ack: (cs) => {
      const ok: string[] = [];
      for (const c of cs) {
        const r = held(c);
        if (!r) continue;
        r.done = true;
        r.acks++;
        r.token = undefined;
        ok.push(r.id);
      }
      return reply('ack', ok);
    },
    retry: async () => false,
    kill: async () => false,
    extend: (cs, leaseMs) => {
      if (failRenewal.shift() ?? false) return s.schedule(Promise.resolve(), 'extend fails').then(() => Promise.reject(new Error('renewal failed')));
      const now = Date.now();
      const ok: string[] = [];
      for (const c of cs) {
        const r = held(c);
        if (!r) continue;
        r.leaseUntil = now + leaseMs;
        ok.push(r.id);
      }
      return reply('extend', ok);
    },
    release: async (cs) => {
      for (const c of cs) {
        const r = held(c);
        if (!r) continue;
        r.token = undefined;
        r.attempt--;
      }
    },
    purge: async () => 0,
    stats: async (): Promise<QueueStats> => ({ pending: 0, leased: 0, dead: 0, oldestPendingAgeMs: 0, paused: false }),
    ping: async () => undefined,
    close: async () => undefined,
  };
  return { store, rows };
}

describe('attempts of one delivery never overlap, under any interleaving', () => {
  it('claims, renewals, acks, lapses and handler ends in any order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.boolean(), { maxLength: 12 }),
        fc.array(fc.boolean(), { maxLength: 8 }),
        async (s, n, expire, failRenewal) => {
          const { store, rows } = modelStore(s, n, expire, failRenewal);
          const q = createStoreQueue(store, { onError: () => undefined });
          const inside = new Map<string, number>();
          const overlaps: string[] = [];
          const lost = new Map<string, number>();
          const starts = new Map<string, number>();
          q.on('leaseLost', (e) => lost.set(e.deliveryId, (lost.get(e.deliveryId) ?? 0) + 1));
          try {
            await q.subscribe('t', 'g', async (d) => {
              const k = inside.get(d.deliveryId) ?? 0;
              if (k > 0) overlaps.push(`${d.deliveryId} attempt ${d.attempt} started while ${k} ran`);
              inside.set(d.deliveryId, k + 1);
              starts.set(d.deliveryId, (starts.get(d.deliveryId) ?? 0) + 1);
              try {
                await s.schedule(Promise.resolve(), `handler ${d.deliveryId}#${d.attempt} ends`);
              } finally {
                inside.set(d.deliveryId, inside.get(d.deliveryId)! - 1);
              }
            }, { leaseDurationMs: 60, pollIntervalMs: 1, concurrency: 3, maxAttempts: 1000 });
            const end = Date.now() + 20_000; // "hung", not a timing assertion
            // Real time passes between steps, so the poll loop claims (and
            // leases may lapse) while handlers and replies are held back.
            while (!rows.every((r) => r.done) && Date.now() < end) {
              await sleep(2);
              if (s.count() > 0) await s.waitOne();
            }
            assert.ok(rows.every((r) => r.done), `every delivery acked: ${s.report().length} steps`);
            assert.deepEqual(overlaps, []);
            for (const r of rows) {
              assert.equal(r.acks, 1, `${r.id} acked once`);
              const runs = starts.get(r.id) ?? 0;
              assert.ok(runs - 1 <= (lost.get(r.id) ?? 0), `${r.id}: ${runs} runs, each rerun after a reported leaseLost (${lost.get(r.id) ?? 0})`);
            }
          } finally {
            const closing = q.close({ timeoutMs: 50 });
            while (s.count() > 0) await s.waitAll();
            await closing;
          }
        },
      ),
      { numRuns: RUNS, includeErrorInReport: true, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH, endOnFailure: true } : {}) },
    );
  });
});
