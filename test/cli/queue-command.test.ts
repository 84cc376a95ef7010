/**
 * `ferry queue --queue CONFIG.json ...` against a SQLite queue that this
 * test process also has open (as an application would, beside the tool):
 * what each subcommand prints, with and without --json, what it changes in
 * the store, its exit status (0, 1, 2, 3 for a name that does not exist),
 * and that the queue the command opens never fires a schedule.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createQueue, permanent, type Queue } from '../../src/queue/index.js';
import { ferry, hasStackTrace, scratch, type Run } from './helpers.js';
import { waitFor } from '../stores/helpers.js';
import pg from 'pg';
import { poolConfig } from '../../src/queue/stores/postgres/connection.js';
import { POSTGRES_URL } from '../stores/postgres-env.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, adminQuery, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';

const tmp = await scratch();
const opened: Queue[] = [];
after(async () => {
  for (const q of opened) await q.close();
  await tmp.cleanup();
});

/** A SQLite queue of its own for one test, its config file, and `ferry queue --queue CONFIG ...args`. */
async function setup(name: string): Promise<{ queue: Queue; config: string; run: (...args: string[]) => Promise<Run> }> {
  const config = join(tmp.dir, `${name}.json`);
  const json = { enabled: true, type: 'sqlite', config: { path: join(tmp.dir, `${name}.db`) } };
  await writeFile(config, JSON.stringify(json));
  // This process must not fire schedules either: a tick in the store would then not tell which process published it.
  const queue = (await createQueue(json, { fireSchedules: false }))!;
  opened.push(queue);
  return { queue, config, run: (...args) => ferry(['queue', '--queue', config, ...args]) };
}

/** Registers `group` on `topic` without consuming anything. */
async function register(queue: Queue, topic: string, group: string): Promise<void> {
  const sub = await queue.subscribe(topic, group, async () => {});
  await sub.close();
}

/** Exactly one `ferry: ` line on stderr, no stack trace. */
function oneLine(res: Run): string {
  const lines = res.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, res.stderr);
  assert.match(lines[0]!, /^ferry: /);
  assert.ok(!hasStackTrace(res.stderr), res.stderr);
  return lines[0]!;
}

const parsed = (res: Run): unknown => JSON.parse(res.stdout.toString());

test('groups lists every registered group sorted, or one topic\'s; --json is one line', async () => {
  const { queue, run } = await setup('groups');
  await register(queue, 'payments', 'ledger');
  await register(queue, 'orders', 'billing');
  await register(queue, 'orders', 'audit');

  const all = await run('groups', '--json');
  assert.equal(all.code, 0, all.stderr);
  assert.equal(all.stdout.toString().split('\n').length, 2, 'one line and its newline');
  assert.deepEqual(parsed(all), [
    { topic: 'orders', group: 'audit' },
    { topic: 'orders', group: 'billing' },
    { topic: 'payments', group: 'ledger' },
  ]);

  const table = await run('groups', 'orders');
  assert.equal(table.code, 0, table.stderr);
  assert.deepEqual(table.stdout.toString().trimEnd().split('\n').map((l) => l.split(/\s+/)), [
    ['TOPIC', 'GROUP'],
    ['orders', 'audit'],
    ['orders', 'billing'],
  ]);

  const none = await run('groups', 'nothing-here');
  assert.equal(none.code, 0);
  assert.equal(none.stdout.toString(), '');
  assert.equal(oneLine(none), 'ferry: no consumer groups on topic nothing-here');
  assert.deepEqual(parsed(await run('groups', 'nothing-here', '--json')), []);
});

test('stats gives one group\'s counts as stats() does, or every group\'s; an unknown group exits 3', async () => {
  const { queue, run } = await setup('stats');
  const sub = await queue.subscribe('orders', 'billing', async () => {
    throw permanent(new Error('no'));
  }, { deadLetterTopic: 'orders.dlq', pollIntervalMs: 10 });
  try {
    await register(queue, 'orders', 'audit');
    await queue.publish({ topic: 'orders', payload: Buffer.from('a') }, { topic: 'orders', payload: Buffer.from('b') });
    await waitFor(async () => (await queue.stats('orders', 'billing')).dead === 2, 10_000, 'both dead');
  } finally {
    await sub.close();
  }

  const one = await run('stats', 'orders', 'audit', '--json');
  assert.equal(one.code, 0, one.stderr);
  const { oldestPendingAgeMs, ...counts } = parsed(one) as Record<string, unknown>;
  assert.deepEqual(counts, { topic: 'orders', group: 'audit', pending: 2, leased: 0, dead: 0, paused: false });
  assert.equal(typeof oldestPendingAgeMs, 'number');

  const many = (await run('stats', '--json')) as Run;
  const rows = (parsed(many) as Record<string, unknown>[]).map(({ oldestPendingAgeMs: _, ...r }) => r);
  assert.deepEqual(rows, [
    { topic: 'orders', group: 'audit', pending: 2, leased: 0, dead: 0, paused: false },
    { topic: 'orders', group: 'billing', pending: 0, leased: 0, dead: 2, paused: false },
  ]);
  for (const r of rows) {
    const want = await queue.stats(r.topic as string, r.group as string);
    assert.deepEqual([r.pending, r.leased, r.dead, r.paused], [want.pending, want.leased, want.dead, want.paused]);
  }

  const table = await run('stats', 'orders');
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.toString().trimEnd().split('\n');
  assert.match(lines[0]!, /^TOPIC\s+GROUP\s+PENDING\s+LEASED\s+DEAD\s+OLDEST PENDING\s+STATE$/);
  assert.match(lines[1]!, /^orders\s+audit\s+2\s+0\s+0\s+\S.*\s+running$/);
  assert.match(lines[2]!, /^orders\s+billing\s+0\s+0\s+2\s+-\s+running$/);

  const unknown = await run('stats', 'orders', 'nobody', '--json');
  assert.equal(unknown.code, 3);
  assert.equal(unknown.stdout.toString(), '');
  assert.equal(oneLine(unknown), 'ferry: no group nobody on topic orders');

  const badName = await run('stats', 'orders', 'a/b');
  assert.equal(badName.code, 2);
  assert.match(oneLine(badName), /group name "a\/b" has characters outside/);
});

test('remove-group needs --yes; it deletes the group and its deliveries; a second one exits 3', async () => {
  const { queue, run } = await setup('remove');
  await register(queue, 'orders', 'audit');
  await register(queue, 'orders', 'billing');
  await queue.publish({ topic: 'orders', payload: Buffer.from('a') });

  const refused = await run('remove-group', 'orders', 'audit');
  assert.equal(refused.code, 2);
  assert.match(oneLine(refused), /add --yes/);
  assert.equal((await queue.listGroups('orders')).length, 2, 'nothing removed without --yes');

  const removed = await run('remove-group', 'orders', 'audit', '--yes', '--json');
  assert.equal(removed.code, 0, removed.stderr);
  assert.deepEqual(parsed(removed), { topic: 'orders', group: 'audit', removed: true });
  assert.deepEqual(await queue.listGroups('orders'), [{ topic: 'orders', group: 'billing' }]);
  assert.equal((await queue.stats('orders', 'audit')).pending, 0, 'its deliveries went with it');
  assert.equal((await queue.stats('orders', 'billing')).pending, 1, 'the other group kept its own');

  const again = await run('remove-group', 'orders', 'audit', '--yes');
  assert.equal(again.code, 3);
  assert.equal(oneLine(again), 'ferry: no group audit on topic orders');
});

test('redrive republishes dead letters to their source topic, --limit at a time', async () => {
  const { queue, run } = await setup('redrive');
  let healed = false;
  const got: string[] = [];
  const sub = await queue.subscribe('orders', 'billing', async (d) => {
    if (!healed) throw permanent(new Error('no'));
    got.push(Buffer.from(d.payload).toString());
  }, { deadLetterTopic: 'orders.dlq', pollIntervalMs: 10 });
  try {
    await queue.publish(...['a', 'b', 'c'].map((p) => ({ topic: 'orders', payload: Buffer.from(p) })));
    await waitFor(async () => (await queue.stats('orders', 'billing')).dead === 3, 10_000, 'three dead');
    healed = true;

    const first = await run('redrive', 'orders.dlq', '--limit', '1', '--json');
    assert.equal(first.code, 0, first.stderr);
    const r = parsed(first) as { topic: string; ids: string[]; skipped: number; next?: string };
    assert.equal(r.topic, 'orders.dlq');
    assert.equal(r.ids.length, 1);
    assert.equal(r.skipped, 0);
    assert.equal(typeof r.next, 'string', 'stopped at the limit: a cursor to go on from');
    await waitFor(() => got.length === 1, 10_000, 'the first redriven message');

    // Going on from the cursor redrives the next copy, not the first again.
    const second = await run('redrive', 'orders.dlq', '--limit', '1', '--after', r.next!);
    assert.equal(second.code, 0, second.stderr);
    assert.match(oneLine(second), /^ferry: redrove 1 message\(s\) from orders\.dlq to their source topics; stopped at the limit: go on with --after \S+$/);
    await waitFor(() => got.length === 2, 10_000, 'the second redriven message');
    assert.equal(new Set(got).size, 2, 'two different dead letters');

    const rest = await run('redrive', 'orders.dlq');
    assert.equal(rest.code, 0, rest.stderr);
    assert.equal(rest.stdout.toString(), '');
    // The copies redriven first are republished under the same IDs, which stores nothing new.
    assert.equal(oneLine(rest), 'ferry: redrove 3 message(s) from orders.dlq to their source topics');
    await waitFor(() => got.length === 3, 10_000, 'the last one');
    assert.deepEqual([...got].sort(), ['a', 'b', 'c'], 'each dead letter delivered once');

    const badLimit = await run('redrive', 'orders.dlq', '--limit', '0');
    assert.equal(badLimit.code, 2);
    const badAfter = await run('redrive', 'orders.dlq', '--after', '');
    assert.equal(badAfter.code, 2);
    assert.match(oneLine(badAfter), /^ferry: redrive: after must be the next cursor of an earlier redrive/, 'the operation named once');
  } finally {
    await sub.close();
  }
});

test('pause and resume set the group\'s state in the store; an unknown group exits 3', async () => {
  const { queue, run } = await setup('pause');
  await register(queue, 'orders', 'billing');

  const paused = await run('pause', 'orders', 'billing', '--json');
  assert.equal(paused.code, 0, paused.stderr);
  assert.deepEqual(parsed(paused), { topic: 'orders', group: 'billing', paused: true });
  assert.equal((await queue.stats('orders', 'billing')).paused, true);
  const shown = await run('stats', 'orders', 'billing');
  assert.match(shown.stdout.toString().split('\n')[1]!, /\spaused$/);

  // A subscription of the paused group claims nothing; published messages wait.
  const got: string[] = [];
  const sub = await queue.subscribe('orders', 'billing', async (d) => void got.push(Buffer.from(d.payload).toString()), { pollIntervalMs: 10 });
  try {
    await queue.publish({ topic: 'orders', payload: Buffer.from('waits') });
    const again = await run('pause', 'orders', 'billing');
    assert.equal(again.code, 0, 'pausing a paused group is fine');
    assert.equal(oneLine(again), 'ferry: paused group billing of topic orders: no instance claims its deliveries until it is resumed');
    assert.deepEqual(got, [], 'nothing claimed while paused (two CLI runs of polling)');
    assert.equal((await queue.stats('orders', 'billing')).pending, 1);

    const resumed = await run('resume', 'orders', 'billing');
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(oneLine(resumed), 'ferry: resumed group billing of topic orders');
    assert.equal((await queue.stats('orders', 'billing')).paused, false);
    await waitFor(() => got.length === 1, 10_000, 'the message after resume');
  } finally {
    await sub.close();
  }

  for (const verb of ['pause', 'resume']) {
    const unknown = await run(verb, 'orders', 'nobody');
    assert.equal(unknown.code, 3, `${verb}: ${unknown.stderr}`);
    assert.equal(oneLine(unknown), 'ferry: no group nobody on topic orders');
  }
  assert.deepEqual(await queue.listGroups('orders'), [{ topic: 'orders', group: 'billing' }], 'pausing an unknown group registers nothing');
});

test('schedules lists the stored schedules; --remove deletes one; the command never fires a tick', async () => {
  const { queue, run } = await setup('schedules');
  await queue.schedule('nightly-report', { cron: '0 3 * * *', timezone: 'Europe/Berlin', topic: 'reports', payload: Buffer.from('go') });
  await queue.schedule('heartbeat', { everyMs: 1000, topic: 'beats', catchUp: 'latest' });
  // Let a heartbeat tick come due: a queue that fired schedules would publish it at open.
  const beat = (await queue.listSchedules()).find((s) => s.name === 'heartbeat')!;
  await waitFor(() => Date.now() > beat.nextTickAt!.getTime() + 50, 10_000, 'a heartbeat tick to come due');

  const listed = await run('schedules', '--json');
  assert.equal(listed.code, 0, listed.stderr);
  const rows = parsed(listed) as Record<string, unknown>[];
  assert.deepEqual(rows.map((s) => s.name), ['heartbeat', 'nightly-report']);
  const nightly = rows[1]!;
  assert.equal(nightly.cron, '0 3 * * *');
  assert.equal(nightly.timezone, 'Europe/Berlin');
  assert.equal(nightly.topic, 'reports');
  assert.equal(nightly.payloadBase64, Buffer.from('go').toString('base64'));
  assert.equal(nightly.catchUp, 'latest');
  assert.match(String(nightly.nextTickAt), /^\d{4}-\d\d-\d\dT/);
  assert.equal(rows[0]!.everyMs, 1000);

  const table = await run('schedules');
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.toString().trimEnd().split('\n');
  assert.match(lines[0]!, /^NAME\s+TOPIC\s+WHEN\s+CATCH-UP\s+LAST TICK\s+NEXT TICK$/);
  assert.match(lines[1]!, /^heartbeat\s+beats\s+every 1000 ms\s+latest\s+-\s+\d{4}-/);
  assert.match(lines[2]!, /^nightly-report\s+reports\s+cron 0 3 \* \* \* \(Europe\/Berlin\)\s+latest\s+-\s+\d{4}-/);

  assert.deepEqual((await queue.listMessages('beats')).messages, [], 'the command published no tick');

  const removed = await run('schedules', '--remove', 'heartbeat');
  assert.equal(removed.code, 0, removed.stderr);
  assert.match(oneLine(removed), /^ferry: removed schedule heartbeat/);
  assert.deepEqual((await queue.listSchedules()).map((s) => s.name), ['nightly-report']);
  const again = await run('schedules', '--remove', 'heartbeat', '--json');
  assert.equal(again.code, 3);
  assert.equal(again.stdout.toString(), '');
  assert.equal(oneLine(again), 'ferry: no schedule heartbeat');
});

test('usage: --queue on either side of the subcommand, required; configs that could only show an empty queue exit 2', async () => {
  const { queue, config } = await setup('usage');
  await register(queue, 'orders', 'billing');
  const after = await ferry(['queue', 'groups', '--json', '--queue', config]);
  assert.equal(after.code, 0, after.stderr);
  assert.deepEqual(parsed(after), [{ topic: 'orders', group: 'billing' }]);

  const cases: Array<[string[], RegExp]> = [
    [['queue', 'groups'], /required option '--queue <config>' not specified/],
    [['queue', '--queue', config, 'frobnicate'], /unknown command 'frobnicate'/],
    [['queue', '--queue', config, 'pause', 'orders'], /missing required argument 'group'/],
    [['queue', '--queue', join(tmp.dir, 'missing.json'), 'groups'], /cannot read .*missing\.json: no such file or directory \(ENOENT\)/],
  ];
  for (const [args, message] of cases) {
    const res = await ferry(args);
    assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
    assert.match(res.stderr, message);
    assert.match(res.stderr, /^ferry: /);
    assert.ok(!hasStackTrace(res.stderr), res.stderr);
  }

  const memory = join(tmp.dir, 'memory.json');
  await writeFile(memory, '{"enabled": true, "type": "memory"}');
  const mem = await ferry(['queue', '--queue', memory, 'groups']);
  assert.equal(mem.code, 2);
  assert.match(oneLine(mem), /is a memory queue/);

  const typo = join(tmp.dir, 'typo.json');
  const typoDb = join(tmp.dir, 'no-such.db');
  await writeFile(typo, JSON.stringify({ enabled: true, type: 'sqlite', config: { path: typoDb } }));
  const missingDb = await ferry(['queue', '--queue', typo, 'groups']);
  assert.equal(missingDb.code, 2);
  assert.equal(oneLine(missingDb), `ferry: no queue at ${typoDb} (from ${typo}): the SQLite file does not exist`);
  assert.equal(existsSync(typoDb), false, 'no empty database was created');

  // The same mistake on Postgres: a schema that does not exist is refused, not created.
  const pgTypo = join(tmp.dir, 'pg-typo.json');
  const schema = `ferry_cli_no_such_${process.pid}`;
  await writeFile(pgTypo, JSON.stringify({ enabled: true, type: 'postgres', config: { connectionString: POSTGRES_URL, schema } }));
  const missingSchema = await ferry(['queue', '--queue', pgTypo, 'groups']);
  assert.equal(missingSchema.code, 2, missingSchema.stderr);
  assert.equal(oneLine(missingSchema), `ferry: no queue in schema ${schema} (from ${pgTypo}): the Postgres schema does not exist`);
  const probe = new pg.Client(poolConfig(pg, POSTGRES_URL, 1));
  await probe.connect();
  try {
    assert.equal((await probe.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rowCount, 0, 'no schema was created');
  } finally {
    await probe.end();
  }

  // A schema name the store refuses is reported as such, not as a missing schema.
  const pgBad = join(tmp.dir, 'pg-bad.json');
  await writeFile(pgBad, JSON.stringify({ enabled: true, type: 'postgres', config: { connectionString: POSTGRES_URL, schema: 'Bad-Name' } }));
  const badSchema = await ferry(['queue', '--queue', pgBad, 'groups']);
  assert.equal(badSchema.code, 2, badSchema.stderr);
  assert.match(oneLine(badSchema), /schema "Bad-Name" must match/);
  assert.doesNotMatch(oneLine(badSchema), /does not exist/);

  const off = join(tmp.dir, 'off.json');
  await writeFile(off, '{"enabled": false, "type": "sqlite"}');
  const disabled = await ferry(['queue', '--queue', off, 'groups']);
  assert.equal(disabled.code, 2);
  assert.match(oneLine(disabled), /builds no queue/);

  const bad = join(tmp.dir, 'bad.json');
  await writeFile(bad, JSON.stringify({ enabled: true, type: 'sqlite', config: { path: join(tmp.dir, 'usage.db'), bogus: 1 } }));
  const badConfig = await ferry(['queue', '--queue', bad, 'groups']);
  assert.equal(badConfig.code, 2);
  assert.match(oneLine(badConfig), /cannot open the queue of .*bad\.json: .*unknown setting "bogus"/);
});

test('a clickhouse config naming a database that does not exist is refused, not created', { skip: CLICKHOUSE_SKIP }, async () => {
  const database = testDatabase('cli_no_such');
  const file = join(tmp.dir, 'ch-typo.json');
  await writeFile(file, JSON.stringify({ enabled: true, type: 'clickhouse', config: { url: CLICKHOUSE_URL, database } }));
  try {
    for (const args of [['queue', '--queue', file, 'stats'], ['queue', '--queue', file, 'groups']]) {
      const res = await ferry(args);
      assert.equal(res.code, 2, res.stderr);
      assert.equal(oneLine(res), `ferry: no queue in database ${database} (from ${file}): the ClickHouse database does not exist`);
    }
    const listed = await adminQuery(`SELECT count() FROM system.databases WHERE name = '${database}' FORMAT TSV`);
    assert.equal(listed.trim(), '0', 'no database was created');
  } finally {
    await dropDatabase(database);
  }
});
