/**
 * No Postgres store call waits forever. Through a TCP proxy that stops
 * forwarding (a frozen network: no error, no answer), claims, heartbeats,
 * acks and a connection's opening reject with a transient `IOError` once
 * their timeout passes; an aborted signal ends a call at once without
 * costing the pool its connection; the wake listener notices the silence and
 * connects again; and a subscription carries on through the freeze and
 * completes every message once it ends.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { ClosedError, IOError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { PostgresStoreOptions } from '../../src/queue/stores/postgres/store.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { claimReq, counts, msg, waitFor, within as withinHang } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

/** Hang catcher: generous, only there so a hang fails instead of stalling the run. */
const HANG_MS = 30_000;

const within = <T>(p: Promise<T>, what: string): Promise<T> => withinHang(p, what, HANG_MS);

function isTransientIOError(err: unknown): boolean {
  assert.ok(err instanceof IOError, `expected an IOError, got ${String(err)}`);
  assert.equal(err.transient, true, err.message);
  return true;
}

/** A transient IOError that names the option whose timeout ran out (before: the driver's bare "Query read timeout"). */
function namesItsTimeout(err: unknown): boolean {
  isTransientIOError(err);
  assert.match((err as Error).message, /: no (answer within queryTimeoutMs|connection within connectTimeoutMs) \(the driver's "/);
  return true;
}

describe('postgres store on a frozen connection', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('freeze');
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  after(() => dropSchema(schema));

  const port = Number(new URL(POSTGRES_URL).port || 5432);
  async function proxied(opts: Partial<PostgresStoreOptions> = {}): Promise<{ proxy: TcpProxy; store: PostgresStore; direct: PostgresStore }> {
    const proxy = await TcpProxy.start(port, new URL(POSTGRES_URL).hostname === 'localhost' ? '127.0.0.1' : new URL(POSTGRES_URL).hostname);
    cleanups.push(() => proxy.close());
    const direct = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    cleanups.push(() => direct.close());
    const store = await PostgresStore.open({ connectionString: proxy.url(POSTGRES_URL), schema, poolSize: 2, connectTimeoutMs: 1000, statementTimeoutMs: 500, queryTimeoutMs: 1000, ...opts });
    // Thawed first, so a close never waits on the freeze.
    cleanups.push(async () => (proxy.thaw(), await store.close()));
    return { proxy, store, direct };
  }

  it('claim, extend, ack and a new connection reject with a transient IOError; after the thaw the leases are acked', { timeout: 600_000 }, async () => {
    const { proxy, store, direct } = await proxied();
    const topic = 'freeze-calls';
    await direct.ensureGroup(topic, 'g', 'latest');
    await direct.append([msg(topic, { id: 'a' }), msg(topic, { id: 'b' }), msg(topic, { id: 'c' })]);
    const held = await store.claim(claimReq(topic, 'g', { max: 2, leaseMs: 120_000 }));
    assert.equal(held.length, 2);

    proxy.freeze();
    // Each call meets a frozen connection (or, once those are gone, a connection that never opens).
    await within(assert.rejects(store.claim(claimReq(topic, 'g', { max: 1 })), namesItsTimeout), 'claim');
    await within(assert.rejects(store.extend(held, 120_000), namesItsTimeout), 'extend');
    await within(assert.rejects(store.ack(held), namesItsTimeout), 'ack');
    await within(assert.rejects(Promise.all([store.stats(topic, 'g'), store.ping()]), isTransientIOError), 'stats and ping at once');

    proxy.thaw();
    assert.deepEqual((await within(store.ack(held), 'ack after thaw')).sort(), ['a', 'b'].map((id) => held.find((c) => c.message.id === id)!.deliveryId).sort());
    assert.deepEqual(counts(await direct.stats(topic, 'g')), { pending: 1, leased: 0, dead: 0 });
  });

  it('an aborted signal ends a frozen call at once with ClosedError, and the pool of one connection is still usable', { timeout: 600_000 }, async () => {
    // Timeouts far past the hang catcher: only the abort can end the calls.
    const { proxy, store } = await proxied({ poolSize: 1, queryTimeoutMs: 600_000, statementTimeoutMs: 0, connectTimeoutMs: 600_000 });
    const topic = 'freeze-abort';
    await store.ensureGroup(topic, 'g', 'latest');
    proxy.freeze();
    const ctl = new AbortController();
    const claiming = store.claim(claimReq(topic, 'g', { maxInFlight: 5 }), ctl.signal);
    const pinging = store.ping(ctl.signal); // waits for the pool's one connection
    setTimeout(() => ctl.abort(), 200);
    await within(assert.rejects(claiming, ClosedError), 'aborted claim');
    await within(assert.rejects(pinging, ClosedError), 'aborted ping');
    await assert.rejects(store.stats(topic, 'g', AbortSignal.abort()), ClosedError);
    proxy.thaw();
    // Had the aborted call kept the only connection, this would wait forever.
    await within(store.ping(), 'ping after the thaw');
    assert.deepEqual(await within(store.claim(claimReq(topic, 'g')), 'claim after the thaw'), []);
  });

  it('the wake listener notices a frozen connection, connects again, and wakes after the thaw', { timeout: 600_000 }, async () => {
    const { proxy, store, direct } = await proxied();
    const topic = 'freeze-listen';
    await direct.ensureGroup(topic, 'g', 'latest');
    const ctl = new AbortController();
    const woken: string[] = [];
    const listening = store.listen(ctl.signal, (t) => woken.push(t));
    cleanups.push(async () => (ctl.abort(), await listening));
    await waitFor(() => proxy.connections >= 1, HANG_MS, 'the listener to connect');
    // Connected is not yet listening: a NOTIFY sent before the LISTEN lands is not heard, so publish until one is.
    await waitFor(async () => {
      await direct.append([msg(topic)]);
      return woken.includes(topic);
    }, HANG_MS, 'a wake before the freeze');

    proxy.freeze();
    const accepted = proxy.accepted;
    // A silent connection sends no error: only the listener's own probe can tell it is gone.
    await waitFor(() => proxy.accepted > accepted, HANG_MS, 'the listener to try a new connection');
    proxy.thaw();
    woken.length = 0;
    await waitFor(async () => {
      await direct.append([msg(topic)]);
      return woken.includes(topic);
    }, HANG_MS, 'a wake after the thaw');
    ctl.abort();
    await within(listening, 'listen to return');
  });

  it('a subscription through a freeze: claims, heartbeats and acks fail with transient IOErrors, it keeps running, and every message completes after', { timeout: 600_000 }, async () => {
    const { proxy, store, direct } = await proxied();
    const topic = 'freeze-sub';
    const N = 40;
    await direct.ensureGroup(topic, 'g', 'latest');
    await direct.append(Array.from({ length: N }, (_, i) => msg(topic, { id: `m${i}` })));

    const errors: Array<{ op: string; err: unknown }> = [];
    const q = createStoreQueue(store, { onError: (err, op) => errors.push({ op, err }) });
    cleanups.push(async () => (proxy.thaw(), await q.close()));
    const succeeded = new Set<string>();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    await q.subscribe(
      topic,
      'g',
      async (d) => {
        if (++started <= 4) await gate;
        succeeded.add(d.id);
      },
      { concurrency: 4, batchSize: 4, leaseDurationMs: 6000, pollIntervalMs: 200, backoffBaseMs: 20, backoffMaxMs: 100 },
    );
    await waitFor(() => started >= 4, HANG_MS, 'four handlers to start');

    proxy.freeze();
    const ops = () => new Set(errors.map((e) => e.op));
    await waitFor(() => ops().has('heartbeat'), HANG_MS, 'a failed heartbeat');
    release(); // the handlers finish while the database cannot be reached: their acks fail
    await waitFor(() => ops().has('ack') && ops().has('claim'), HANG_MS, 'a failed ack and a failed claim');
    proxy.thaw();

    // One stats read per check: two reads could see the same unacked delivery leased, then pending once its lease ran out.
    await waitFor(async () => {
      if (succeeded.size < N) return false;
      const s = counts(await direct.stats(topic, 'g'));
      return s.pending + s.leased === 0;
    }, 120_000, 'every message to complete');
    assert.deepEqual(counts(await direct.stats(topic, 'g')), { pending: 0, leased: 0, dead: 0 });
    for (const { op, err } of errors) {
      if (op === 'heartbeat' || op === 'ack' || op === 'claim') assert.ok(err instanceof IOError && err.transient, `${op}: ${String(err)}`);
    }
  });
});
