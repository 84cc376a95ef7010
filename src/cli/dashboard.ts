/**
 * `ferry dashboard`: serves the dashboard page (src/dashboard/) for a queue
 * built from a `createQueue` config file, or for a DiskQueue or spool
 * directory, until SIGINT or SIGTERM. The queue it opens fires no
 * schedules (see queue-config.ts).
 */
import type { Queue } from '../queue/types.js';
import { checkBinding, startDashboard } from '../dashboard/server.js';
import { CliError, EXIT_USAGE, describe, note, requireDirectory } from './common.js';
import { openConfiguredQueue } from './queue-config.js';

/** Options of `ferry dashboard`. */
export interface DashboardCommandOptions {
  queue?: string;
  dir?: string;
  host?: string;
  port?: number;
  token?: string;
  deadLetterTopic?: string[];
  refreshMs?: number;
}

/** Runs `ferry dashboard`; resolves to the exit status once stopped by a signal. */
export async function dashboard(o: DashboardCommandOptions): Promise<number> {
  if ((o.queue === undefined) === (o.dir === undefined)) throw new CliError('give either --queue CONFIG.json or --dir DIR', EXIT_USAGE);
  if (o.dir !== undefined && o.deadLetterTopic !== undefined) throw new CliError('--dead-letter-topic applies to --queue, not --dir', EXIT_USAGE);
  const token = o.token ?? process.env.FERRY_DASHBOARD_TOKEN;
  try {
    checkBinding(o.host ?? '127.0.0.1', token);
  } catch (err) {
    throw new CliError(`cannot start the dashboard: ${describe(err)}`, EXIT_USAGE);
  }
  let queue: Queue | undefined;
  if (o.queue !== undefined) {
    // A watcher, not an instance of the application: it fires no schedules,
    // and it opens only a queue that exists (a mistyped SQLite path or
    // Postgres schema would otherwise be created and shown empty).
    queue = await openConfiguredQueue(o.queue, { existing: true });
  } else {
    await requireDirectory(o.dir!);
  }
  let server;
  try {
    // This process only watches: the queue's consumers run elsewhere, so its
    // own completed/deadLettered events never come; count from stats().
    const common = { host: o.host, port: o.port ?? 7070, token, refreshMs: o.refreshMs };
    server = await startDashboard(queue ? { ...common, queue, deadLetterTopics: o.deadLetterTopic, throughput: 'sampled' } : { ...common, dir: o.dir });
  } catch (err) {
    await queue?.close();
    throw new CliError(`cannot start the dashboard: ${describe(err)}`, EXIT_USAGE);
  }
  note(`ferry: dashboard at ${server.url}${token !== undefined ? ` (open ${server.url}?token=TOKEN once)` : ''}; stop with Ctrl-C`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  await queue?.close();
  return 0;
}
