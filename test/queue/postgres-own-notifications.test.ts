/**
 * A Postgres store's listener skips the notifications its own statements
 * sent (its queue already woke its subscriptions when the call returned),
 * on a borrowed pool too, and hears everything another store sent: another
 * instance, or another store of the same schema sharing its pool in this
 * process. Notifications reach a listener in commit order, so a later
 * notification from another store marks the point by which an echo would
 * have arrived.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { msg } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres store: own notifications', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });
  const fresh = () => {
    const s = testSchema('own');
    schemas.push(s);
    return s;
  };
  const open = async (opts: { schema: string; pool?: pg.Pool }) => {
    const s = await PostgresStore.open(opts.pool ? opts : { ...opts, connectionString: POSTGRES_URL, poolSize: 2 });
    closers.push(() => s.close());
    return s;
  };
  /** Starts `store.listen`; resolves once it hears `ready` (published by `other`), with the topics it heard. */
  const listening = async (store: PostgresStore, other: PostgresStore) => {
    const heard: string[] = [];
    const ctl = new AbortController();
    closers.push(async () => ctl.abort());
    void store.listen(ctl.signal, (t) => heard.push(t));
    await other.ensureGroup('ready', 'g', 'latest');
    // Until the listener is up, nothing is heard: publish until it hears one.
    for (let i = 0; !heard.includes('ready'); i++) {
      assert.ok(i < 200, 'the listener never heard another instance');
      await other.append([msg('ready')]);
      await new Promise((r) => setTimeout(r, 20));
    }
    heard.length = 0;
    return heard;
  };
  /** Publishes `marker` from `other` and waits until `heard` has it. */
  const until = async (heard: string[], other: PostgresStore, marker: string) => {
    await other.ensureGroup(marker, 'g', 'latest');
    await other.append([msg(marker)]);
    for (let i = 0; !heard.includes(marker); i++) {
      assert.ok(i < 250, `never heard ${marker}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('on a borrowed pool: its own publish is not heard, another instance\'s is', async () => {
    const schema = fresh();
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 2 });
    closers.push(() => pool.end());
    const a = await open({ schema, pool });
    const other = await open({ schema });
    const heard = await listening(a, other);
    await a.ensureGroup('t', 'g', 'latest');
    await a.append([msg('t')]);
    await a.append([msg('t')]);
    await until(heard, other, 'marker');
    assert.deepEqual(heard, ['marker']);
  });

  it('two stores of one schema on one borrowed pool hear each other; alone again, a store skips its own', async () => {
    const schema = fresh();
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 1 });
    closers.push(() => pool.end());
    const a = await open({ schema, pool });
    const b = await PostgresStore.open({ schema, pool });
    const other = await open({ schema });
    const heard = await listening(a, other);
    await a.ping(); // a has used the pool's one connection too
    await b.ensureGroup('from-b', 'g', 'latest');
    await b.append([msg('from-b')]);
    await until(heard, other, 'marker1');
    assert.deepEqual(heard, ['from-b', 'marker1'], 'b shares a\'s connection: its notification is heard');
    await b.close();
    heard.length = 0;
    await a.ensureGroup('from-a', 'g', 'latest');
    await a.append([msg('from-a')]);
    await until(heard, other, 'marker2');
    assert.deepEqual(heard, ['marker2']);
  });
});
