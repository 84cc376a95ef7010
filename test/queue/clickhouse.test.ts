/**
 * ClickHouse-specific behaviour: consuming needs a shared locker
 * (`NoLockerError` at subscribe, before anything is registered) while
 * publishing does not; the driver loads lazily; the registry's config block;
 * operations of two instances run at once; the server clock is followed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { InvalidArgumentError, NoLockerError } from '../../src/errors.js';
import { codecs, createQueue, deliveryId } from '../../src/queue/index.js';
import { ProcessLocker } from '../../src/queue/lockers/process.js';
import { ServerClock } from '../../src/queue/stores/clickhouse/clock.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, adminQuery, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';
import { claimReq, counts, msg, waitFor } from '../stores/helpers.js';

const here = dirname(fileURLToPath(import.meta.url));

describe('clickhouse store', { skip: CLICKHOUSE_SKIP }, () => {
  const dbs: string[] = [];
  const db = () => {
    const d = testDatabase('q');
    dbs.push(d);
    return d;
  };
  after(async () => {
    for (const d of dbs) await dropDatabase(d);
  });

  it('without a locker publishing works and subscribe throws NoLockerError before registering anything', async () => {
    const database = db();
    const q = (await createQueue({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL, database } }))!;
    try {
      const [id] = await q.publish({ topic: 't', payload: new TextEncoder().encode('x') });
      assert.ok(id);
      await assert.rejects(q.subscribe('t', 'g', async () => undefined), NoLockerError);
      assert.equal((await adminQuery(`SELECT count() FROM \`${database}\`.groups`)).trim(), '0', 'no group was registered');
      assert.equal((await adminQuery(`SELECT count() FROM \`${database}\`.messages`)).trim(), '1');
    } finally {
      await q.close();
    }
  });

  it('applies deps.codec, as every factory does: a string payload goes in and comes out as a string', async () => {
    const database = db();
    const q = (await createQueue({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL, database } }, { locker: new ProcessLocker(), codec: codecs.utf8 }))!;
    try {
      let got: unknown;
      await q.subscribe('t', 'g', async (d) => void (got = d.payload), { pollIntervalMs: 20 });
      await q.publish({ topic: 't', payload: 'héllo' });
      await waitFor(() => got !== undefined, 10_000, 'the delivery');
      assert.equal(got, 'héllo');
    } finally {
      await q.close();
    }
  });

  it('with a locker in deps the queue consumes; a bad locker or config is refused', async () => {
    const database = db();
    const q = (await createQueue({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL, database } }, { locker: new ProcessLocker() }))!;
    try {
      let got = '';
      await q.subscribe('t', 'g', async (d) => void (got = new TextDecoder().decode(d.payload)), { pollIntervalMs: 20 });
      await q.publish({ topic: 't', payload: new TextEncoder().encode('hello') });
      await waitFor(() => got === 'hello', 10_000, 'the delivery');
    } finally {
      await q.close();
    }
    await assert.rejects(createQueue({ enabled: true, type: 'clickhouse', config: {} }), /url is required/);
    await assert.rejects(createQueue({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL, schema: 'x' } }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL } }, { locker: {} }), /DistributedLocker/);
    await assert.rejects(ClickHouseStore.open({ url: CLICKHOUSE_URL, database: 'bad-name' }), InvalidArgumentError);
    await assert.rejects(ClickHouseStore.open({ url: CLICKHOUSE_URL, database: 'system' }), InvalidArgumentError);
  });

  it('loads @clickhouse/client only when a clickhouse store is opened', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'ch-lazy-load.ts'), CLICKHOUSE_URL, db()], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { before: false, afterMemory: false, afterClickHouse: true });
  });

  it('two instances run every operation at once without losing or doubling a delivery', async () => {
    const database = db();
    const locker = new ProcessLocker();
    const a = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker });
    const b = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker });
    try {
      await a.ensureGroup('t', 'g', 'latest');
      const ms = Array.from({ length: 60 }, (_, i) => msg('t', { id: `m${i}`, key: `k${i % 3}` }));
      const claimed: string[] = [];
      let appended = false;
      // Appends, a new group's registration, claims, acks and stats of both instances, all at once.
      await Promise.all([
        (async () => {
          for (let i = 0; i < ms.length; i += 10) await (i % 20 ? a : b).append(ms.slice(i, i + 10));
          appended = true;
        })(),
        b.ensureGroup('t', 'late', 'earliest'),
        ...[a, b].map(async (s) => {
          while (!appended || (await s.stats('t', 'g')).pending > 0) {
            const cs = await s.claim(claimReq('t', 'g', { max: 4 }));
            claimed.push(...cs.map((c) => c.message.id));
            assert.deepEqual(await s.ack(cs), cs.map((c) => c.deliveryId));
          }
        }),
      ]);
      assert.equal(claimed.length, 60);
      assert.equal(new Set(claimed).size, 60);
      for (const k of ['k0', 'k1', 'k2']) {
        const lane = claimed.filter((id) => Number(id.slice(1)) % 3 === Number(k.slice(1)));
        assert.deepEqual(lane, [...lane].sort((x, y) => Number(x.slice(1)) - Number(y.slice(1))), `lane ${k} in order`);
      }
      assert.deepEqual(counts(await a.stats('t', 'late')), { pending: 60, leased: 0, dead: 0 }, 'the earliest group has every message once');
      const late = await a.claim(claimReq('t', 'late', { max: 100 }));
      assert.deepEqual(late.map((c) => c.deliveryId), ['m0', 'm1', 'm2'].map((id) => deliveryId(id, 'late')), 'the heads of its three lanes');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('fenced writes of one claim run at once: ack with extend, kill with release, on two handles', async () => {
    const database = db();
    const locker = new ProcessLocker();
    const a = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker });
    const b = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker });
    try {
      await a.ensureGroup('t', 'g', 'latest');
      await a.append([msg('t', { id: 'x' }), msg('t', { id: 'y' })]);
      const [x, y] = await a.claim(claimReq('t', 'g'));
      // Whichever lands first, the ack wins: an extend after it finds the delivery no longer leased.
      const [acked] = await Promise.all([a.ack([x!]), b.extend([x!], 60_000), a.extend([x!], 60_000)]);
      assert.deepEqual(acked, [x!.deliveryId]);
      // Kill and release of one claim: exactly one of them applies.
      const [killed] = await Promise.all([b.kill(y!, 'boom'), a.release([y!])]);
      const st = await a.stats('t', 'g');
      assert.equal(st.leased, 0);
      assert.deepEqual(killed ? { pending: 0, dead: 1 } : { pending: 1, dead: 0 }, { pending: st.pending, dead: st.dead });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a delivery whose append never committed its message is not handed out', async () => {
    const database = db();
    // An orphan is stale at twice the lock TTL. A TTL of 3 s leaves a loaded
    // machine room for each claim's reads (a claim gives up when its lock is
    // about to lapse) and for the first claim to come while the orphan is young.
    const s = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker(), lockTtlMs: 3000 });
    try {
      await s.ensureGroup('t', 'g', 'latest');
      // What a publisher that died between writing deliveries and the message leaves behind.
      const ver = Date.now() * 1000;
      await adminQuery(
        `INSERT INTO \`${database}\`.deliveries (topic, grp, delivery_id, message_id, seq, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, ver) VALUES ('t', 'g', '${deliveryId('ghost', 'g')}', 'ghost', 1, 'k', 0, 0, 0, 0, '', '', '', 0, ${ver})`,
      );
      await adminQuery(`INSERT INTO \`${database}\`.topics (topic, next_seq, ver) VALUES ('t', 2, 2)`);
      await s.append([msg('t', { id: 'real', key: 'k' })]);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'a young orphan blocks its lane (its append may still commit)');
      await new Promise((r) => setTimeout(r, 6500));
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'the stale orphan is purged on this claim');
      assert.deepEqual((await s.claim(claimReq('t', 'g'))).map((c) => c.message.id), ['real']);
    } finally {
      await s.close();
    }
  });

  it('a database whose groups table predates removal gains the column on open and keeps its groups', async () => {
    const database = db();
    // The groups table as the first version of the store made it: no `deleted` column.
    await adminQuery(`CREATE DATABASE \`${database}\``);
    await adminQuery(`CREATE TABLE \`${database}\`.groups (topic String, grp String, created_at UInt64, ver UInt64) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp)`);
    await adminQuery(`INSERT INTO \`${database}\`.groups (topic, grp, created_at, ver) VALUES ('t', 'old', 1, 1000)`);
    // Two handles open at once: both may try to add the column.
    const [a, b] = await Promise.all([
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker() }),
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker: new ProcessLocker() }),
    ]);
    try {
      assert.deepEqual(await a.listGroups(), [{ topic: 't', group: 'old' }]);
      await a.append([msg('t', { id: 'm1' })]);
      assert.deepEqual((await b.claim(claimReq('t', 'old'))).map((c) => c.message.id), ['m1'], 'the old registration still fans out');
      assert.equal(await b.removeGroup('t', 'old'), true);
      assert.deepEqual(await a.listGroups('t'), []);
      await a.ensureGroup('t', 'old', 'earliest');
      assert.deepEqual(await b.listGroups(), [{ topic: 't', group: 'old' }]);
      assert.deepEqual((await a.claim(claimReq('t', 'old'))).map((c) => [c.message.id, c.attempt]), [['m1', 1]]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('listen hears the writes of other handles on the same database, not its own nor another database\'s', async () => {
    const database = db();
    const locker = new ProcessLocker();
    const [a, b, other] = await Promise.all([
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker }),
      ClickHouseStore.open({ url: CLICKHOUSE_URL, database: db(), locker }),
    ]);
    const heard: string[] = [];
    const stop = new AbortController();
    const listening = a.listen(stop.signal, (topic) => void heard.push(topic));
    try {
      await Promise.all([a.ensureGroup('t', 'g', 'latest'), other.ensureGroup('t', 'g', 'latest')]);
      await a.append([msg('u', { id: 'own' })]);
      await other.append([msg('u', { id: 'elsewhere' })]);
      assert.deepEqual(heard, []);
      await b.append([msg('t', { id: 'k1', key: 'k' }), msg('t', { id: 'k2', key: 'k' }), msg('t', { id: 'plain' })]);
      assert.deepEqual(heard, ['t'], 'a publish');
      const [k1] = await b.claim(claimReq('t', 'g', { max: 1 }));
      await b.ack([k1!]);
      assert.deepEqual(heard, ['t', 't'], 'a keyed ack');
      const [k2, plain] = await b.claim(claimReq('t', 'g', { max: 2 }));
      assert.equal(await b.kill(k2!, 'x'), true);
      assert.deepEqual(heard.length, 3, 'a keyed kill');
      await b.ack([plain!]);
      assert.deepEqual(heard.length, 3, 'an ack without a key frees no lane');
      await b.append([msg('t', { id: 'r' })]);
      const [r] = await b.claim(claimReq('t', 'g'));
      await b.release([r!]);
      assert.deepEqual(heard.length, 5, 'a publish and a release');
      await b.release([r!]);
      assert.deepEqual(heard.length, 5, 'a stale release changes nothing and wakes nobody');
    } finally {
      stop.abort();
      await listening;
      await Promise.all([a.close(), b.close(), other.close()]);
    }
  });

  it('two closes at once: the second resolves with the first, not before it (it returned while the client still closed)', async () => {
    const a = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database: db(), locker: new ProcessLocker() });
    const order: string[] = [];
    await Promise.all([a.close().then(() => order.push('first')), a.close().then(() => order.push('second'))]);
    assert.deepEqual(order, ['first', 'second']);
  });

  it('kill with unrun takes back the attempt its claim added', async () => {
    const s = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database: db(), locker: new ProcessLocker() });
    try {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a' }), msg('t', { id: 'b' })]);
      const [a, b] = await s.claim(claimReq('t', 'g', { max: 2 }));
      // Both at once: they are fenced writes of one group.
      assert.deepEqual(await Promise.all([s.kill(a!, 'x', { unrun: true }), s.kill(b!, 'y')]), [true, true]);
      const rows = await adminQuery(
        `SELECT message_id, argMax(attempt, ver) FROM \`${s.database}\`.deliveries GROUP BY message_id ORDER BY message_id FORMAT TSV`,
      );
      assert.equal(rows.trim(), 'a\t0\nb\t1');
    } finally {
      await s.close();
    }
  });
});

describe('clickhouse server clock', () => {
  it('narrows to the second boundary and follows a server clock that steps', () => {
    const c = new ServerClock(1000);
    // Local monotonic ms → server reading in seconds, for a server 5,000,250 ms ahead.
    const offset = 5_000_250;
    const read = (t: number) => Math.floor((t + offset) / 1000);
    c.observe(read(100), 100, 102);
    assert.ok(c.uncertaintyMs > 400);
    for (let t = 110; t < 1200; t += 7) c.observe(read(t), t, t + 2);
    assert.ok(c.uncertaintyMs <= 5, `uncertainty ${c.uncertaintyMs}`);
    // c.now() reads performance.now() itself: bracket that read, so a
    // descheduled moment between two clock reads cannot count as an error.
    const offsetNow = (): [number, number] => {
      const before = performance.now();
      const server = c.now();
      const after = performance.now();
      return [server - after, server - before];
    };
    const [lo, hi] = offsetNow();
    assert.ok(lo - 6 <= offset && offset <= hi + 6, `offset ${lo}..${hi} vs ${offset}`);
    // The server clock steps 3 s ahead: readings disagree, the window slides.
    for (let t = 1200; t < 2400; t += 7) c.observe(read(t) + 3, t, t + 2);
    const [lo2, hi2] = offsetNow();
    assert.ok(lo2 - 10 <= offset + 3000 && offset + 3000 <= hi2 + 10, `offset ${lo2}..${hi2} vs ${offset + 3000}`);
  });
});
