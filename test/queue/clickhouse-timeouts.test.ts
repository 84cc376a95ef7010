/**
 * No ClickHouse store call waits forever: through a TCP proxy that stops
 * forwarding, calls reject with a transient `IOError` once
 * `requestTimeoutMs` passes, an aborted signal ends one at once with
 * `ClosedError`, and after the thaw the store answers again.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ClosedError, IOError } from '../../src/errors.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { claimReq, counts, msg, within as withinHang } from '../stores/helpers.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';

const HANG_MS = 30_000;
const within = <T>(p: Promise<T>, what: string): Promise<T> => withinHang(p, what, HANG_MS);

describe('clickhouse store on a frozen connection', { skip: CLICKHOUSE_SKIP }, () => {
  const db = testDatabase('freeze');
  after(() => dropDatabase(db));

  it('stats and claim reject with a transient IOError within requestTimeoutMs; an abort ends a call with ClosedError; after the thaw it answers', { timeout: 600_000 }, async () => {
    const u = new URL(CLICKHOUSE_URL);
    const proxy = await TcpProxy.start(Number(u.port || 8123), u.hostname === 'localhost' ? '127.0.0.1' : u.hostname);
    let store: ClickHouseStore | undefined;
    try {
      store = await ClickHouseStore.open({ url: proxy.url(CLICKHOUSE_URL), database: db, requestTimeoutMs: 1000 });
      await store.ensureGroup('t', 'g', 'latest');
      await store.append([msg('t', { id: 'a' })]);
      proxy.freeze();
      for (const [what, call] of [
        ['stats', () => store!.stats('t', 'g')],
        ['claim', () => store!.claim(claimReq('t', 'g'))],
      ] as const) {
        await within(
          assert.rejects(call(), (err) => {
            assert.ok(err instanceof IOError, `${what}: ${String(err)}`);
            assert.equal(err.transient, true);
            return true;
          }),
          what,
        );
      }
      const ctl = new AbortController();
      const pinging = store.ping(ctl.signal);
      ctl.abort();
      await within(assert.rejects(pinging, ClosedError), 'aborted ping');
      proxy.thaw();
      assert.deepEqual(counts(await within(store.stats('t', 'g'), 'stats after the thaw')), { pending: 1, leased: 0, dead: 0 });
    } finally {
      proxy.thaw();
      await store?.close();
      await proxy.close();
    }
  });
});
