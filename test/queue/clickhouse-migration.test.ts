/**
 * The ClickHouse store's schema versions: a new database records each
 * numbered migration once however many handles open it together; a database
 * made before versions were recorded (built here by hand, with and without
 * the groups table's `deleted` column) migrates in place and its rows are
 * still served; a database at version 2 gets migrations 3 and 4 (schedules,
 * pause and rate limits) and keeps its rows; and every migration statement
 * has a form the runner can apply twice, since nothing serialises two opens.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { IOError } from '../../src/errors.js';
import { deliveryId } from '../../src/queue/index.js';
import { ProcessLocker } from '../../src/queue/lockers/process.js';
import { ADD_COLUMN } from '../../src/queue/stores/clickhouse/migrate.js';
import { insertRows, migrations, statements } from '../../src/queue/stores/clickhouse/sql.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, adminQuery, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';
import { claimReq, counts } from '../stores/helpers.js';

const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const EXPECTED = [
  [1, '001_tables.sql'],
  [2, '002_groups_deleted.sql'],
  [3, '003_schedules.sql'],
  [4, '004_pause_and_rate_limit.sql'],
];

/**
 * The tables as the store made them before it recorded a schema version:
 * no `migrations` table; the groups table with `deleted` (as the last such
 * store made it) or without (as the first one did).
 */
async function oldSchema(db: string, withDeleted: boolean): Promise<void> {
  await adminQuery(`CREATE DATABASE \`${db}\``);
  await adminQuery(`CREATE TABLE \`${db}\`.topics (topic String, next_seq UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY topic`);
  await adminQuery(
    `CREATE TABLE \`${db}\`.groups (topic String, grp String, created_at UInt64, ${withDeleted ? 'deleted UInt8 DEFAULT 0, ' : ''}ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp)`,
  );
  await adminQuery(
    `CREATE TABLE \`${db}\`.messages (topic String, id String, seq UInt64, msg_key Nullable(String), payload String, headers Nullable(String), published_at UInt64, deliver_at Nullable(UInt64), due_at UInt64, deleted UInt8, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, id)`,
  );
  await adminQuery(
    `CREATE TABLE \`${db}\`.deliveries (topic String, grp String, delivery_id String, message_id String, seq UInt64, msg_key Nullable(String), state UInt8, attempt UInt32, available_at UInt64, lease_until UInt64, claim_token String, holder String, last_error String, finished_at UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp, delivery_id)`,
  );
  await adminQuery(`CREATE TABLE \`${db}\`.janitor (name String, holder String, until UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY name`);
}

/**
 * Topic `t`, group `g` and five messages with their deliveries, written as
 * that store wrote them: m1 acked, m2 dead, m3 leased by a runner that
 * vanished (its lease long expired), m4 and m5 pending on key `k`.
 */
async function oldRows(db: string): Promise<void> {
  const now = Date.now();
  const ver = now * 1000;
  await adminQuery(`INSERT INTO \`${db}\`.topics (topic, next_seq, ver) VALUES ('t', 6, ${ver})`);
  await adminQuery(`INSERT INTO \`${db}\`.groups (topic, grp, created_at, ver) VALUES ('t', 'g', ${now}, ${ver})`);
  const key = (i: number) => (i >= 4 ? "'k'" : 'NULL');
  const headers = (i: number) => (i === 2 ? `'{"h":"v"}'` : 'NULL');
  await adminQuery(
    `INSERT INTO \`${db}\`.messages (topic, id, seq, msg_key, payload, headers, published_at, deliver_at, due_at, deleted, ver) VALUES ${[1, 2, 3, 4, 5]
      .map((i) => `('t', 'm${i}', ${i}, ${key(i)}, 'p${i}', ${headers(i)}, ${now}, NULL, ${now}, 0, ${ver})`)
      .join(', ')}`,
  );
  // state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at
  const states: Record<number, string> = {
    1: `2, 1, 0, 0, '', '', '', ${now}`,
    2: `3, 3, 0, 0, '', '', 'boom', ${now}`,
    3: `1, 1, 0, 1, 'gone-token', 'gone', '', 0`,
    4: `0, 0, 0, 0, '', '', '', 0`,
    5: `0, 0, 0, 0, '', '', '', 0`,
  };
  await adminQuery(
    `INSERT INTO \`${db}\`.deliveries (topic, grp, delivery_id, message_id, seq, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, ver) VALUES ${[1, 2, 3, 4, 5]
      .map((i) => `('t', 'g', '${deliveryId(`m${i}`, 'g')}', 'm${i}', ${i}, ${key(i)}, ${states[i]!}, ${ver})`)
      .join(', ')}`,
  );
}

/** A database at version 2 as this code's migrations 1 and 2 make it, recorded, before 3 and 4 existed. */
async function version2(db: string): Promise<void> {
  const quoted = `\`${db}\``;
  const sql = statements(quoted);
  await adminQuery(sql['create-database']);
  await adminQuery(sql['create-migrations']);
  for (const m of migrations(quoted).filter((m) => m.version <= 2)) {
    for (const statement of m.statements) await adminQuery(statement);
    await adminQuery(insertRows(sql['insert-migration'], [[m.version, m.name]]));
  }
}

/** The recorded versions of `db`, one per version however many rows recorded it. */
async function versions(db: string): Promise<Array<[number, string]>> {
  const text = await adminQuery(`SELECT version, any(name) FROM \`${db}\`.migrations GROUP BY version ORDER BY version FORMAT TSV`);
  return text
    .trim()
    .split('\n')
    .map((l) => l.split('\t'))
    .map(([v, n]) => [Number(v), n!]);
}

const rowCount = async (db: string, table: string) => Number((await adminQuery(`SELECT count() FROM \`${db}\`.${table}`)).trim());
/** The groups table's columns, in table order, as `name type default`. */
const groupsColumns = async (db: string) =>
  (await adminQuery(`DESCRIBE TABLE \`${db}\`.groups FORMAT TSV`))
    .trim()
    .split('\n')
    .map((l) => l.split('\t').slice(0, 4).join(' ').trim());

describe('clickhouse schema migrations', () => {
  it('every migration statement can be applied twice: CREATE … IF NOT EXISTS, or one ADD COLUMN the runner skips when the column is there', () => {
    const all = migrations('`db`');
    assert.deepEqual(all.map((m) => m.version), all.map((_, i) => i + 1), 'numbered 1, 2, … with no gap');
    for (const m of all) {
      assert.ok(m.statements.length > 0, m.name);
      for (const s of m.statements) {
        const idempotent = /^CREATE\s+(TABLE|DATABASE)\s+IF\s+NOT\s+EXISTS\s/i.test(s) || (ADD_COLUMN.test(s) && s.match(/ADD\s+COLUMN/gi)!.length === 1);
        assert.ok(idempotent, `${m.name}: ${s.split('\n')[0]}`);
      }
    }
  });
});

describe('clickhouse schema migrations on a server', { skip: CLICKHOUSE_SKIP }, () => {
  const dbs: string[] = [];
  const db = () => {
    const d = testDatabase('mig');
    dbs.push(d);
    return d;
  };
  after(async () => {
    for (const d of dbs) await dropDatabase(d);
  });

  it('handles opening a new database together record each migration and agree on the schema; a later open applies nothing', async () => {
    const database = db();
    const stores = await Promise.all(Array.from({ length: 4 }, () => ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker() })));
    try {
      assert.deepEqual(await versions(database), EXPECTED);
      assert.deepEqual(await groupsColumns(database), ['topic String', 'grp String', 'created_at UInt64', 'ver UInt64', 'deleted UInt8 DEFAULT 0', 'paused UInt8 DEFAULT 0']);
      const tables = (await adminQuery(`SELECT name FROM system.tables WHERE database = '${database}' ORDER BY name FORMAT TSV`)).trim().split('\n');
      assert.deepEqual(tables, ['claim_starts', 'deliveries', 'groups', 'janitor', 'messages', 'migrations', 'schedules', 'topics']);
      const rows = await rowCount(database, 'migrations');
      const later = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database });
      await later.close();
      assert.equal(await rowCount(database, 'migrations'), rows, 'an open at the newest version writes no version row');
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  for (const withDeleted of [false, true]) {
    it(`a database made before versions were recorded (groups ${withDeleted ? 'with' : 'without'} deleted) migrates in place and serves its rows`, async () => {
      const database = db();
      await oldSchema(database, withDeleted);
      await oldRows(database);
      // Two handles open it at once: both may run each migration.
      const locker = new ProcessLocker();
      const [a, b] = await Promise.all([
        ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
        ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
      ]);
      try {
        assert.deepEqual(await versions(database), EXPECTED);
        assert.ok((await groupsColumns(database)).includes('deleted UInt8 DEFAULT 0'));
        assert.deepEqual(await a.listGroups(), [{ topic: 't', group: 'g' }]);
        assert.deepEqual(counts(await b.stats('t', 'g')), { pending: 3, leased: 0, dead: 1 });
        const page = await a.listMessages('t', { limit: 10 });
        assert.deepEqual(page.messages.map((m) => [m.id, dec(m.payload), m.key ?? null]), [
          ['m1', 'p1', null],
          ['m2', 'p2', null],
          ['m3', 'p3', null],
          ['m4', 'p4', 'k'],
          ['m5', 'p5', 'k'],
        ]);
        assert.deepEqual(page.messages[1]!.headers, { h: 'v' });
        // The expired lease comes back alone, then the key lane in order.
        const [m3, ...rest3] = await b.claim(claimReq('t', 'g', { max: 10 }));
        assert.deepEqual([m3?.message.id, m3?.recovered, m3?.attempt, rest3.length], ['m3', true, 2, 0]);
        assert.deepEqual(await b.ack([m3!]), [m3!.deliveryId]);
        const [m4, ...rest4] = await a.claim(claimReq('t', 'g', { max: 10 }));
        assert.deepEqual([m4?.message.id, m4?.attempt, rest4.length], ['m4', 1, 0], 'm5 waits behind the head of its lane');
        assert.deepEqual(await a.ack([m4!]), [m4!.deliveryId]);
        const m5 = await a.claim(claimReq('t', 'g', { max: 10 }));
        assert.deepEqual(m5.map((c) => c.message.id), ['m5']);
        assert.deepEqual(await b.ack(m5), [m5[0]!.deliveryId]);
        assert.deepEqual(counts(await a.stats('t', 'g')), { pending: 0, leased: 0, dead: 1 });
        // Removal needs migration 2's column.
        assert.equal(await b.removeGroup('t', 'g'), true);
        assert.deepEqual(await a.listGroups('t'), []);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  }

  it('a database at version 2 migrates to 4 and keeps its rows: groups read not paused, claims, pauses, rate limits and schedules work on it', async () => {
    const database = db();
    await version2(database);
    await oldRows(database);
    const locker = new ProcessLocker();
    const [a, b] = await Promise.all([
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
    ]);
    try {
      assert.deepEqual(await versions(database), EXPECTED);
      assert.deepEqual(await a.listGroups(), [{ topic: 't', group: 'g' }]);
      const before = await b.stats('t', 'g');
      assert.deepEqual([counts(before), before.paused], [{ pending: 3, leased: 0, dead: 1 }, false]);
      assert.deepEqual(await a.duePairs([{ topic: 't', group: 'g' }]), [{ topic: 't', group: 'g' }]);
      // The expired lease comes back alone, under a rate limit that counts it.
      const rateLimit = { max: 2, intervalMs: 600_000 };
      const [m3, ...rest] = await b.claim(claimReq('t', 'g', { max: 10, rateLimit }));
      assert.deepEqual([m3?.message.id, m3?.recovered, rest.length], ['m3', true, 0]);
      assert.deepEqual(await b.ack([m3!]), [m3!.deliveryId]);
      assert.equal(await a.setGroupPaused('t', 'g', true), true);
      assert.deepEqual(await b.claim(claimReq('t', 'g', { rateLimit })), []);
      assert.deepEqual(await b.duePairs([{ topic: 't', group: 'g' }]), []);
      assert.equal(await b.setGroupPaused('t', 'g', false), true);
      const m4 = await a.claim(claimReq('t', 'g', { max: 10, rateLimit }));
      assert.deepEqual(m4.map((c) => c.message.id), ['m4'], 'm5 waits behind its lane');
      assert.deepEqual(await a.ack(m4), [m4[0]!.deliveryId]);
      assert.deepEqual(await a.claim(claimReq('t', 'g', { max: 10, rateLimit })), [], 'the window is full (m3, m4)');
      assert.deepEqual((await a.claim(claimReq('t', 'g'))).map((c) => c.message.id), ['m5']);
      const page = await a.listMessages('t', { limit: 10 });
      assert.deepEqual(page.messages.map((m) => m.id), ['m1', 'm2', 'm3', 'm4', 'm5']);
      assert.equal(await a.putSchedule({ name: 's', revision: 'r', spec: { everyMs: 1000, topic: 't', catchUp: 'none' }, payload: new Uint8Array([1]), updatedAt: new Date(1) }), true);
      assert.deepEqual((await b.listSchedules()).map((r) => r.name), ['s']);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
  it('a database a newer ferry migrated is refused with IOError, and its version rows stay', async () => {
    const database = db();
    const store = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker() });
    await store.close();
    const newest = EXPECTED[EXPECTED.length - 1]![0] as number;
    await adminQuery(`INSERT INTO \`${database}\`.migrations (version, name) VALUES (${newest + 1}, 'from_the_future.sql')`);
    await assert.rejects(ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker() }), (err: unknown) => {
      assert.ok(err instanceof IOError, `an IOError, got ${String(err)}`);
      assert.match(err.message, new RegExp(`at schema version ${newest + 1}, newer than this ferry's \\(${newest}\\); upgrade ferry`));
      assert.equal(err.transient, false, 'a retry cannot mend it');
      return true;
    });
    assert.deepEqual((await versions(database)).map(([v]) => v), [...EXPECTED.map(([v]) => v as number), newest + 1]);
  });
});
