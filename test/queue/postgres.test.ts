/**
 * Postgres-specific behaviour beyond the conformance suite: configuration,
 * lazy loading, migrations racing, a borrowed pool, wake-ups between
 * instances (and polling without them), the listener reconnecting, and a
 * consumer process killed while it holds leases.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { spawnChild } from '../helpers/children.js';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { InvalidArgumentError, IOError, PayloadTooLargeError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { createQueue } from '../../src/queue/index.js';
import { MAX_APPEND_PAYLOAD_BYTES, MAX_POSTGRES_PAYLOAD_BYTES, MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES, PostgresStore, checkAppendBytes } from '../../src/queue/stores/postgres/store.js';
import type { ScheduleRecord } from '../../src/queue/schedules/types.js';
import type { Queue, Store, StoredMessage } from '../../src/queue/types.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, primaryKeyOf, testSchema } from '../stores/postgres-env.js';
import { HOUR_POLL, sleep, waitFor, counts } from '../stores/helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe('postgres store', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  const fresh = (tag = 'pq') => {
    const s = testSchema(tag);
    schemas.push(s);
    return s;
  };
  const open = async (schema: string) => {
    const s = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    closers.push(() => s.close());
    return s;
  };
  const queueOn = (store: Store) => {
    const q = createStoreQueue(store, { onError: () => undefined });
    closers.push(() => q.close({ timeoutMs: 100 }));
    return q;
  };
  /** Undoes migrations 2 and up on `schema` (dropping its ack records): its tables and indexes are then as an earlier ferry's migration 1 left them. */
  const backToVersion1 = async (schema: string) => {
    await adminPool.query(`ALTER TABLE "${schema}".deliveries DROP CONSTRAINT deliveries_pkey, ADD PRIMARY KEY (delivery_id)`);
    await adminPool.query(`DROP TRIGGER deliveries_lane_deleted ON "${schema}".deliveries`);
    await adminPool.query(`DROP TRIGGER deliveries_lane_finished ON "${schema}".deliveries`);
    await adminPool.query(`DROP FUNCTION "${schema}".unblock_lane()`);
    // Its index deliveries_pending_keyed goes with the column.
    await adminPool.query(`ALTER TABLE "${schema}".deliveries DROP COLUMN blocked, DROP COLUMN blocks_next`);
    await adminPool.query(`DROP TRIGGER groups_version ON "${schema}".groups`);
    await adminPool.query(`DROP FUNCTION "${schema}".set_groups_version()`);
    await adminPool.query(`ALTER TABLE "${schema}".topics DROP COLUMN groups_version`);
    await adminPool.query(`DROP TABLE "${schema}".claim_starts`);
    await adminPool.query(`ALTER TABLE "${schema}".groups DROP COLUMN paused`);
    await adminPool.query(`ALTER TABLE "${schema}".messages DROP COLUMN priority`);
    // Its index deliveries_pending goes with the column.
    await adminPool.query(`ALTER TABLE "${schema}".deliveries DROP COLUMN priority`);
    await adminPool.query(`DROP TABLE "${schema}".schedules`);
    await adminPool.query(`DROP TABLE "${schema}".acked_spans`);
    await adminPool.query(`DROP INDEX IF EXISTS "${schema}".deliveries_pending`);
    await adminPool.query(`CREATE INDEX deliveries_live ON "${schema}".deliveries (topic, grp, message_seq) WHERE state < 2`);
    await adminPool.query(`CREATE INDEX deliveries_message ON "${schema}".deliveries (message_seq)`);
    await adminPool.query(`DELETE FROM "${schema}".migrations WHERE version >= 2`);
  };
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });

  it('loads pg only when a postgres queue is created', () => {
    const schema = fresh();
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'pg-lazy-load.ts'), POSTGRES_URL, schema], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { before: false, afterMemory: false, afterPostgres: true });
  });

  it('an append or a schedule whose payload passes what Postgres can carry or read back is refused with PayloadTooLargeError, before anything is sent', async () => {
    // Payloads stand in by their size alone: nothing of this size is allocated.
    const m = (bytes: number) => ({ id: 'x', topic: 't', payload: { byteLength: bytes } as Uint8Array, publishedAt: 0 }) as unknown as StoredMessage;
    const fill = (n: number, each: number) => Array.from({ length: n }, () => m(each));
    assert.doesNotThrow(() => checkAppendBytes([...fill(2, MAX_POSTGRES_PAYLOAD_BYTES), m(MAX_APPEND_PAYLOAD_BYTES - 2 * MAX_POSTGRES_PAYLOAD_BYTES)]));
    assert.throws(() => checkAppendBytes([...fill(3, MAX_POSTGRES_PAYLOAD_BYTES), m(1)]), PayloadTooLargeError);
    assert.throws(() => checkAppendBytes(fill(70, 16 << 20)), PayloadTooLargeError);
    // One message a claim could not read back (base64 past V8's string limit; 400 MiB crashed a consumer).
    assert.throws(() => checkAppendBytes([m(MAX_POSTGRES_PAYLOAD_BYTES + 1)]), /read back as base64/);
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema: fresh('bigappend'), poolSize: 1 });
    try {
      await assert.rejects(store.append(fill(4, MAX_POSTGRES_PAYLOAD_BYTES)), PayloadTooLargeError);
      await assert.rejects(store.append([m(400 << 20)]), PayloadTooLargeError);
      // A schedule is read back as hex text by every instance at start: one of 256 MiB ended every process that opened the schema.
      const schedule = { name: 'big', revision: 'r', spec: '{}', payload: { byteLength: MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES + 1 } as Uint8Array, updatedAt: 0 } as unknown as ScheduleRecord;
      await assert.rejects(store.putSchedule(schedule), PayloadTooLargeError);
      assert.deepEqual(await store.listSchedules(), []);
    } finally {
      await store.close();
    }
  });

  it('refuses bad schema names and ambiguous connection settings; an unreachable server is an IOError', async () => {
    for (const schema of ['Upper', 'a-b', 'a"b', 'pg_x', 'information_schema', '1abc', '', 'x'.repeat(49)]) {
      await assert.rejects(PostgresStore.open({ connectionString: POSTGRES_URL, schema }), InvalidArgumentError, schema);
    }
    await assert.rejects(PostgresStore.open({}), InvalidArgumentError);
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 1 });
    try {
      await assert.rejects(PostgresStore.open({ connectionString: POSTGRES_URL, pool }), InvalidArgumentError);
    } finally {
      await pool.end();
    }
    await assert.rejects(createQueue({ enabled: true, type: 'postgres', config: {} }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'postgres', config: { connectionString: POSTGRES_URL, poolSize: 3 } }), InvalidArgumentError);
    const err = await PostgresStore.open({ connectionString: 'postgres://127.0.0.1:1/nothing' }).catch((e: unknown) => e);
    assert.ok(err instanceof IOError, String(err));
    assert.ok(err.cause instanceof Error);
  });

  it('instances opening a new schema together migrate it once', async () => {
    const schema = fresh();
    const stores = await Promise.all(Array.from({ length: 6 }, () => open(schema)));
    const rows = await adminPool.query(`SELECT version, name FROM "${schema}".migrations ORDER BY version`);
    assert.deepEqual(rows.rows, [
      { version: 1, name: '001_init.sql' },
      { version: 2, name: '002_hash_message_index.sql' },
      { version: 3, name: '003_pending_index.sql' },
      { version: 4, name: '004_ack_deletes.sql' },
      { version: 5, name: '005_schedules.sql' },
      { version: 6, name: '006_flow_control.sql' },
      { version: 7, name: '007_split_pending_index.sql' },
      { version: 8, name: '008_groups_version.sql' },
      { version: 9, name: '009_lane_blocked.sql' },
      { version: 10, name: '010_no_message_fk.sql' },
      { version: 11, name: '011_unblock_in_statement.sql' },
      { version: 12, name: '012_deliveries_by_message.sql' },
      { version: 13, name: '013_acked_spans.sql' },
    ]);
    await Promise.all(stores.map((s) => s.ping()));
    await open(schema);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".migrations`)).rows[0].n, 13);
  });

  it('migration 2 needs the tables\' owner: another user\'s open fails with IOError and changes nothing; the owner\'s open applies it', async () => {
    const schema = fresh();
    await open(schema);
    // Back to migration 1, as a schema made by an earlier ferry.
    await backToVersion1(schema);
    const role = `ferry_app_${process.pid}`;
    const db = new URL(POSTGRES_URL).pathname.slice(1) || 'test';
    await adminPool.query(`DROP ROLE IF EXISTS ${role}`);
    await adminPool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      await adminPool.query(`GRANT CREATE ON DATABASE "${db}" TO ${role}`);
      await adminPool.query(`GRANT USAGE, CREATE ON SCHEMA "${schema}" TO ${role}`);
      await adminPool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
      const url = new URL(POSTGRES_URL);
      url.username = role;
      const err = await PostgresStore.open({ connectionString: url.toString(), schema }).catch((e: unknown) => e);
      assert.ok(err instanceof IOError && /must be owner of index deliveries_message/.test(err.message), String(err));
      const versions = async () => (await adminPool.query(`SELECT version FROM "${schema}".migrations ORDER BY version`)).rows.map((r) => r.version);
      assert.deepEqual(await versions(), [1]);
      await open(schema);
      assert.deepEqual(await versions(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
      // Migration 2 made deliveries_message a hash index; migration 12 keys the table by message and drops it.
      const index = await adminPool.query(`SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'deliveries_message'`, [schema]);
      assert.equal(index.rowCount, 0);
      assert.deepEqual(await primaryKeyOf(schema, 'deliveries'), ['message_seq', 'grp']);
    } finally {
      await adminPool.query(`DROP OWNED BY ${role}`);
      await adminPool.query(`DROP ROLE ${role}`);
    }
  });

  it('a schema at migration 1 with pending, leased, keyed, acked and dead rows migrates in place and its work carries on in order', async () => {
    const schema = fresh();
    const before = queueOn(await open(schema));
    const seen: string[] = [];
    let failOnce = true;
    const sub = await before.subscribe('t', 'g', async (d) => {
      const body = dec(d.payload);
      if (body === 'dead') throw new Error('dead');
      if (body === 'k1' && failOnce) {
        failOnce = false;
        throw new Error('retry me');
      }
      seen.push(body);
    }, { pollIntervalMs: 20, maxAttempts: 1 });
    await before.publish({ topic: 't', payload: enc('dead') }, { topic: 't', payload: enc('a1') });
    await waitFor(async () => (await before.stats('t', 'g')).dead === 1 && seen.length === 1, 120_000, 'first round');
    await sub.close();
    // Leased (by a runner that then vanished), pending, keyed behind a head, all before the upgrade.
    await before.publish({ topic: 't', payload: enc('k1'), key: 'k' }, { topic: 't', payload: enc('k2'), key: 'k' }, { topic: 't', payload: enc('b1') });
    const raw = await open(schema);
    const held = await raw.claim({ topic: 't', group: 'g', runnerId: 'gone', max: 1, leaseMs: 1, maxInFlight: 0 });
    assert.equal(held.length, 1);
    await backToVersion1(schema);
    // Migration 1 kept an acked delivery as a row in state 2.
    await adminPool.query(
      `INSERT INTO "${schema}".deliveries (delivery_id, message_seq, topic, grp, state, attempt, available_at, finished_at)
       SELECT 'acked-before', seq, topic, 'g', 2, 1, '-infinity', now() FROM "${schema}".messages WHERE payload = $1`,
      [Buffer.from('a1')],
    );
    const after = await open(schema);
    const versions = (await adminPool.query(`SELECT version FROM "${schema}".migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    const moved = await adminPool.query(`SELECT m.payload FROM "${schema}".acked_spans a JOIN "${schema}".messages m ON int8range(a.first_seq, a.last_seq, '[]') @> m.seq`);
    assert.deepEqual(moved.rows.map((r) => dec(r.payload)), ['a1'], 'the acked row moved to acks, and its record to a span of acks');
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".deliveries WHERE state = 2`)).rows[0].n, 0);
    const st = await after.stats('t', 'g');
    assert.equal(st.dead, 1);
    assert.equal(st.pending + st.leased, 3);
    const q = queueOn(after);
    seen.length = 0;
    failOnce = true;
    const sub2 = await q.subscribe('t', 'g', async (d) => {
      const body = dec(d.payload);
      if (body === 'k1' && failOnce) {
        failOnce = false;
        throw new Error('retry me');
      }
      seen.push(body);
    }, { pollIntervalMs: 20, backoffBaseMs: 1, maxAttempts: 5, concurrency: 4 });
    try {
      await waitFor(() => seen.length === 3, 120_000, 'the rows from before the upgrade');
      assert.deepEqual([...seen].sort(), ['b1', 'k1', 'k2']);
      assert.ok(seen.indexOf('k1') < seen.indexOf('k2'), `key order kept: ${seen.join(',')}`);
    } finally {
      await sub2.close();
    }
  });

  it('works on a borrowed pool and leaves it open when the queue closes', async () => {
    const schema = fresh();
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 3 });
    try {
      const q = (await createQueue({ enabled: true, type: 'postgres', config: { schema } }, { pool }))!;
      const got: string[] = [];
      await q.subscribe('t', 'g', async (d) => void got.push(dec(d.payload)), { pollIntervalMs: 20 });
      await q.publish({ topic: 't', payload: enc('borrowed') });
      await waitFor(() => got.length === 1, 5000, 'delivery');
      await q.close();
      assert.deepEqual(got, ['borrowed']);
      assert.equal((await pool.query('SELECT 41 + 1 AS n')).rows[0].n, 42, 'the pool still works');
    } finally {
      await pool.end();
    }
  });

  it('a publish in one instance wakes an idle subscriber of another (hourly poll: the delivery came from the wake-up)', async () => {
    const schema = fresh();
    const consumer = queueOn(await open(schema));
    const producer = queueOn(await open(schema));
    const got: Array<{ text: string; at: number }> = [];
    await consumer.subscribe('t', 'g', async (d) => void got.push({ text: dec(d.payload), at: Date.now() }), { pollIntervalMs: HOUR_POLL });
    await sleep(300); // the subscription's first claim has come back empty
    await producer.publish({ topic: 't', payload: enc('ping') });
    await waitFor(() => got.length === 1, 2000, 'woken delivery');
    assert.equal(got[0]!.text, 'ping');
  });

  it("acking a key lane's head wakes the next message of that key in every instance without a poll", async () => {
    const schema = fresh();
    const a = queueOn(await open(schema));
    const b = queueOn(await open(schema));
    const producer = queueOn(await open(schema));
    const log: Array<{ text: string; start: number; end: number }> = [];
    const handler = async (d: { payload: Uint8Array }) => {
      const start = Date.now();
      await sleep(50);
      log.push({ text: dec(d.payload), start, end: Date.now() });
    };
    await a.subscribe('t', 'g', handler, { pollIntervalMs: HOUR_POLL });
    await b.subscribe('t', 'g', handler, { pollIntervalMs: HOUR_POLL });
    await sleep(300);
    await producer.publish(...['k1', 'k2', 'k3', 'k4'].map((t) => ({ topic: 't', key: 'k', payload: enc(t) })));
    await waitFor(() => log.length === 4, 5000, 'the whole lane');
    assert.deepEqual(log.map((l) => l.text), ['k1', 'k2', 'k3', 'k4']);
    // The whole lane ran with neither subscription's hourly poll firing: each ack woke the next.
    for (let i = 1; i < 4; i++) assert.ok(log[i]!.start >= log[i - 1]!.end, 'one at a time');
  });

  it('polling alone delivers everything when every notification is lost', async () => {
    const schema = fresh();
    const inner = await open(schema);
    // The same store without its wake source: nothing this instance hears.
    const deaf = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'listen') return undefined;
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Store;
    assert.equal(deaf.listen, undefined);
    const consumer = queueOn(deaf);
    const producer = queueOn(await open(schema));
    const got = new Set<string>();
    await consumer.subscribe('t', 'g', async (d) => void got.add(dec(d.payload)), { pollIntervalMs: 150, concurrency: 4 });
    await sleep(50);
    for (let i = 0; i < 5; i++) await producer.publish(...Array.from({ length: 20 }, (_, j) => ({ topic: 't', key: `k${j % 3}`, payload: enc(`m${i * 20 + j}`) })));
    await waitFor(() => got.size === 100, 10_000, 'all 100 by polling');
    // The last handlers have returned; their acks are written just after.
    let last = counts(await consumer.stats('t', 'g'));
    await waitFor(async () => (last = counts(await consumer.stats('t', 'g'))).leased === 0, 120_000, 'the last acks');
    assert.deepEqual(last, { pending: 0, leased: 0, dead: 0 });
  });

  it('the listener reconnects after its connection is killed and wakes subscribers again', async () => {
    const schema = fresh();
    const consumer = queueOn(await open(schema));
    const producer = queueOn(await open(schema));
    const got: Array<{ text: string; at: number }> = [];
    await consumer.subscribe('t', 'g', async (d) => void got.push({ text: dec(d.payload), at: Date.now() }), { pollIntervalMs: HOUR_POLL });
    const listeners = async () =>
      (await adminPool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${schema}.wake"`])).rows.map((r) => r.pid);
    await waitFor(async () => (await listeners()).length === 2, 3000, 'two listeners');
    const before = await listeners();
    await adminPool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
    await waitFor(async () => {
      const now = await listeners();
      return now.length === 2 && now.every((p) => !before.includes(p));
    }, 5000, 'both listeners back');
    await producer.publish({ topic: 't', payload: enc('after reconnect') });
    // The poll is hourly: a delivery at all came from the reconnected listener.
    await waitFor(() => got.length === 1, 2000, 'woken delivery');
  });

  it('a consumer process SIGKILLed while holding leases: each lease expires and its delivery completes elsewhere exactly once', async () => {
    const schema = fresh();
    const setup = await open(schema);
    await setup.ensureGroup('jobs', 'workers', 'latest');
    const producer = queueOn(setup);
    const texts = ['a', 'b', 'c', 'd', 'e', 'f'];
    await producer.publish(...texts.map((t) => ({ topic: 'jobs', payload: enc(t) })));

    const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'pg-holder.ts'), POSTGRES_URL, schema, '4'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    const held: string[] = [];
    for await (const line of createInterface({ input: child.stdout! })) {
      const s = JSON.parse(line) as { text: string; attempt: number };
      assert.equal(s.attempt, 1);
      held.push(s.text);
      if (held.length === 4) break;
    }
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');
    assert.deepEqual(counts(await setup.stats('jobs', 'workers')), { pending: 2, leased: 4, dead: 0 });
    // When each lease the dead consumer held runs out (the database's clock,
    // this machine's): heartbeats may have lagged on a busy machine, so how
    // much of a lease was left at the kill is read, not assumed.
    const leaseEnds = new Map(
      (await adminPool.query<{ text: string; until: number }>(
        `SELECT convert_from(m.payload, 'UTF8') AS text, (extract(epoch FROM d.lease_until) * 1000)::float8 AS until
         FROM "${schema}".deliveries d JOIN "${schema}".messages m ON m.seq = d.message_seq WHERE d.state = 1`,
      )).rows.map((r) => [r.text, r.until]),
    );
    assert.deepEqual([...leaseEnds.keys()].sort(), [...held].sort());

    const rescuer = queueOn(await open(schema));
    const done: Array<{ text: string; attempt: number; at: number }> = [];
    await rescuer.subscribe('jobs', 'workers', async (d) => void done.push({ text: dec(d.payload), attempt: d.attempt, at: Date.now() }), {
      pollIntervalMs: 50,
      concurrency: 4,
    });
    await waitFor(() => done.length >= 6, 10_000, 'every delivery');
    await sleep(500); // room for a duplicate to show up
    assert.deepEqual(done.map((d) => d.text).sort(), texts, 'each exactly once');
    for (const d of done) {
      if (held.includes(d.text)) {
        assert.equal(d.attempt, 2, `${d.text} was the dead consumer's first attempt`);
        // Never taken back inside the lease it had at the kill.
        assert.ok(d.at >= leaseEnds.get(d.text)!, `${d.text} taken back ${leaseEnds.get(d.text)! - d.at} ms before its lease ran out`);
      } else {
        assert.equal(d.attempt, 1);
      }
    }
    await waitFor(async () => (await rescuer.stats('jobs', 'workers')).leased === 0, 3000, 'acks flushed');
    assert.deepEqual(counts(await rescuer.stats('jobs', 'workers')), { pending: 0, leased: 0, dead: 0 });
  });
});

export type { Queue };
