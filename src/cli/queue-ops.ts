/**
 * `ferry queue --queue CONFIG.json COMMAND`: what each subcommand does to the
 * queue and what it prints. Every one goes through the public `Queue` API
 * only (`stats`, `listGroups`, `pauseGroup`, `resumeGroup`, `removeGroup`,
 * `redrive`, `listSchedules`, `unschedule`), on a queue opened for this one
 * command and closed after it.
 *
 * Output: data (stats, lists) goes to stdout, as an aligned table or, with
 * `--json`, as one JSON value on one line; what a change did goes to stderr
 * as a `ferry: ` line, or to stdout as JSON with `--json`. A name that is
 * not registered exits `EXIT_NOT_FOUND` with nothing changed.
 */
import { InvalidArgumentError, InvalidNameError, UnsupportedError } from '../errors.js';
import { validateName } from '../queue/names.js';
import type { Queue } from '../queue/types.js';
import type { ScheduleInfo } from '../queue/schedules/types.js';
import { CliError, EXIT_NOT_FOUND, EXIT_USAGE, note } from './common.js';
import { openConfiguredQueue } from './queue-config.js';
import { formatAge, printTable } from './queue-format.js';

/** Options every `ferry queue` subcommand has. */
export interface QueueCommandOptions {
  /** The `createQueue` config file. */
  queue: string;
  json?: boolean;
}

/**
 * Opens the queue of `o.queue`, runs `op` on it and closes it. The queue's
 * own refusals become usage errors: a bad name or option, an operation the
 * store does not implement (`UnsupportedError`).
 */
export async function withQueue(o: QueueCommandOptions, what: string, op: (q: Queue) => Promise<number>): Promise<number> {
  const q = await openConfiguredQueue(o.queue, { existing: true });
  try {
    return await op(q);
  } catch (err) {
    if (err instanceof InvalidNameError || err instanceof InvalidArgumentError || err instanceof UnsupportedError) {
      // The queue's message may name the operation itself ("redrive: after must be …").
      throw new CliError(err.message.startsWith(`${what}: `) ? err.message : `${what}: ${err.message}`, EXIT_USAGE);
    }
    throw err;
  } finally {
    await q.close();
  }
}

function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function noGroup(topic: string, group: string): CliError {
  return new CliError(`no group ${group} on topic ${topic}`, EXIT_NOT_FOUND);
}

/** One group's row of `stats`. */
export interface GroupStatsRow {
  topic: string;
  group: string;
  pending: number;
  leased: number;
  dead: number;
  oldestPendingAgeMs: number;
  paused: boolean;
}

/**
 * `stats [TOPIC [GROUP]]`: one group's counts, or every group's of TOPIC, or
 * of every topic. With GROUP, `--json` prints one object; otherwise an array.
 */
export function stats(o: QueueCommandOptions, topic?: string, group?: string): Promise<number> {
  return withQueue(o, 'stats', async (q) => {
    const groups = await q.listGroups(topic);
    let pairs = groups;
    if (group !== undefined) {
      validateName('group', group);
      pairs = groups.filter((g) => g.group === group);
      if (pairs.length === 0) throw noGroup(topic!, group);
    }
    const rows: GroupStatsRow[] = [];
    for (const g of pairs) rows.push({ topic: g.topic, group: g.group, ...(await q.stats(g.topic, g.group)) });
    if (o.json) {
      printJson(group !== undefined ? rows[0] : rows);
      return 0;
    }
    if (rows.length === 0) {
      note(`ferry: no consumer groups${topic !== undefined ? ` on topic ${topic}` : ''}`);
      return 0;
    }
    printTable(
      ['TOPIC', 'GROUP', 'PENDING', 'LEASED', 'DEAD', 'OLDEST PENDING', 'STATE'],
      rows.map((r) => [r.topic, r.group, String(r.pending), String(r.leased), String(r.dead), r.pending > 0 ? formatAge(r.oldestPendingAgeMs) : '-', r.paused ? 'paused' : 'running']),
    );
    return 0;
  });
}

/** `groups [TOPIC]`: the registered consumer groups, sorted by topic then group. */
export function groups(o: QueueCommandOptions, topic?: string): Promise<number> {
  return withQueue(o, 'groups', async (q) => {
    const list = await q.listGroups(topic);
    if (o.json) {
      printJson(list.map((g) => ({ topic: g.topic, group: g.group })));
      return 0;
    }
    if (list.length === 0) {
      note(`ferry: no consumer groups${topic !== undefined ? ` on topic ${topic}` : ''}`);
      return 0;
    }
    printTable(
      ['TOPIC', 'GROUP'],
      list.map((g) => [g.topic, g.group]),
    );
    return 0;
  });
}

/** `pause TOPIC GROUP` and `resume TOPIC GROUP`. */
export function setPaused(o: QueueCommandOptions, topic: string, group: string, paused: boolean): Promise<number> {
  return withQueue(o, paused ? 'pause' : 'resume', async (q) => {
    const registered = paused ? await q.pauseGroup(topic, group) : await q.resumeGroup(topic, group);
    if (!registered) throw noGroup(topic, group);
    if (o.json) printJson({ topic, group, paused });
    else if (paused) note(`ferry: paused group ${group} of topic ${topic}: no instance claims its deliveries until it is resumed`);
    else note(`ferry: resumed group ${group} of topic ${topic}`);
    return 0;
  });
}

/** `remove-group TOPIC GROUP --yes`. */
export function removeGroup(o: QueueCommandOptions & { yes?: boolean }, topic: string, group: string): Promise<number> {
  if (!o.yes) {
    throw new CliError(`remove-group deletes group ${group} of topic ${topic} with every one of its deliveries (pending, leased and dead): add --yes to do it`, EXIT_USAGE);
  }
  return withQueue(o, 'remove-group', async (q) => {
    if (!(await q.removeGroup(topic, group))) throw noGroup(topic, group);
    if (o.json) printJson({ topic, group, removed: true });
    else note(`ferry: removed group ${group} of topic ${topic} with its deliveries`);
    return 0;
  });
}

/** `redrive DLQ_TOPIC [--limit N] [--after CURSOR]`. */
export function redrive(o: QueueCommandOptions & { limit?: number; after?: string }, deadLetterTopic: string): Promise<number> {
  return withQueue(o, 'redrive', async (q) => {
    const r = await q.redrive(deadLetterTopic, { ...(o.limit !== undefined && { limit: o.limit }), ...(o.after !== undefined && { after: o.after }) });
    if (o.json) printJson({ topic: deadLetterTopic, ids: r.ids, skipped: r.skipped, ...(r.next !== undefined && { next: r.next }) });
    else {
      const skipped = r.skipped > 0 ? `; ${r.skipped} copies without a usable source topic skipped` : '';
      const more = r.next !== undefined ? `; stopped at the limit: go on with --after ${r.next}` : '';
      note(`ferry: redrove ${r.ids.length} message(s) from ${deadLetterTopic} to their source topics${skipped}${more}`);
    }
    return 0;
  });
}

/** A stored schedule as `schedules --json` prints it: instants as ISO strings, the payload as base64. */
export interface ScheduleRow {
  name: string;
  cron?: string;
  everyMs?: number;
  timezone?: string;
  topic: string;
  key?: string;
  headers?: Record<string, string>;
  catchUp: ScheduleInfo['catchUp'];
  /** The payload of every tick's message, base64. */
  payloadBase64: string;
  updatedAt: string;
  lastTickAt?: string;
  nextTickAt?: string;
}

function scheduleRow(s: ScheduleInfo): ScheduleRow {
  return {
    name: s.name,
    ...(s.cron !== undefined ? { cron: s.cron } : {}),
    ...(s.everyMs !== undefined ? { everyMs: s.everyMs } : {}),
    ...(s.timezone !== undefined ? { timezone: s.timezone } : {}),
    topic: s.topic,
    ...(s.key !== undefined ? { key: s.key } : {}),
    ...(s.headers !== undefined ? { headers: s.headers } : {}),
    catchUp: s.catchUp,
    payloadBase64: Buffer.from(s.payload.buffer, s.payload.byteOffset, s.payload.byteLength).toString('base64'),
    updatedAt: s.updatedAt.toISOString(),
    ...(s.lastTickAt !== undefined ? { lastTickAt: s.lastTickAt.toISOString() } : {}),
    ...(s.nextTickAt !== undefined ? { nextTickAt: s.nextTickAt.toISOString() } : {}),
  };
}

/** `schedules` lists the stored schedules; `schedules --remove NAME` deletes one. */
export function schedules(o: QueueCommandOptions & { remove?: string }): Promise<number> {
  if (o.remove !== undefined) {
    const name = o.remove;
    return withQueue(o, 'schedules --remove', async (q) => {
      if (!(await q.unschedule(name))) throw new CliError(`no schedule ${name}`, EXIT_NOT_FOUND);
      if (o.json) printJson({ name, removed: true });
      else note(`ferry: removed schedule ${name}; the messages it published stay`);
      return 0;
    });
  }
  return withQueue(o, 'schedules', async (q) => {
    const list = (await q.listSchedules()).map(scheduleRow);
    if (o.json) {
      printJson(list);
      return 0;
    }
    if (list.length === 0) {
      note('ferry: no schedules');
      return 0;
    }
    printTable(
      ['NAME', 'TOPIC', 'WHEN', 'CATCH-UP', 'LAST TICK', 'NEXT TICK'],
      list.map((s) => [
        s.name,
        s.topic,
        s.cron !== undefined ? `cron ${s.cron} (${s.timezone ?? 'UTC'})` : `every ${s.everyMs} ms`,
        typeof s.catchUp === 'string' ? s.catchUp : JSON.stringify(s.catchUp),
        s.lastTickAt ?? '-',
        s.nextTickAt ?? '-',
      ]),
    );
    return 0;
  });
}
