/**
 * The `ferry queue` command tree (docs/CLI.md, "ferry queue"): the
 * subcommands and their arguments; src/cli/queue-ops.ts runs them.
 *
 * `--queue CONFIG.json` belongs to `queue` and may stand before or after
 * the subcommand; `--json` belongs to each subcommand.
 */
import type { Command } from 'commander';
import { integer } from './common.js';
import { groups, redrive, removeGroup, schedules, setPaused, stats, type QueueCommandOptions } from './queue-ops.js';

/** Adds `queue` and its subcommands to `program`; each action stores its exit status in `status.code`. */
export function addQueueCommand(program: Command, status: { code: number }): void {
  const queue = program
    .command('queue')
    .description('look at and operate a ferry/queue queue: stats, groups, pause, resume, remove-group, redrive, schedules')
    .requiredOption('--queue <config>', 'JSON file with the config createQueue takes ({"enabled": true, "type": ..., "config": {...}})');

  /** The options of `cmd` merged with `--queue` from `queue`. */
  const opts = <T>(cmd: Command) => cmd.optsWithGlobals() as QueueCommandOptions & T;
  const json = ['--json', 'one JSON value on one line, on stdout'] as const;

  queue
    .command('stats')
    .description('counts of one consumer group, or of every group of TOPIC (or of every topic): pending, leased, dead, oldest pending, paused')
    .argument('[topic]', 'topic name; every topic when omitted')
    .argument('[group]', 'consumer group; every group of TOPIC when omitted')
    .option(...json)
    .action(async (topic: string | undefined, group: string | undefined, _o, cmd: Command) => {
      status.code = await stats(opts(cmd), topic, group);
    });

  queue
    .command('groups')
    .description('list the registered consumer groups, sorted by topic then group')
    .argument('[topic]', 'only the groups of this topic')
    .option(...json)
    .action(async (topic: string | undefined, _o, cmd: Command) => {
      status.code = await groups(opts(cmd), topic);
    });

  queue
    .command('pause')
    .description('pause a consumer group for every instance: no subscription of it claims until it is resumed (publishing goes on)')
    .argument('<topic>', 'topic name')
    .argument('<group>', 'consumer group')
    .option(...json)
    .action(async (topic: string, group: string, _o, cmd: Command) => {
      status.code = await setPaused(opts(cmd), topic, group, true);
    });

  queue
    .command('resume')
    .description('resume a paused consumer group for every instance')
    .argument('<topic>', 'topic name')
    .argument('<group>', 'consumer group')
    .option(...json)
    .action(async (topic: string, group: string, _o, cmd: Command) => {
      status.code = await setPaused(opts(cmd), topic, group, false);
    });

  queue
    .command('remove-group')
    .description('delete a consumer group and every one of its deliveries (pending, leased, dead); needs --yes')
    .argument('<topic>', 'topic name')
    .argument('<group>', 'consumer group')
    .option('--yes', 'really delete it')
    .option(...json)
    .action(async (topic: string, group: string, _o, cmd: Command) => {
      status.code = await removeGroup(opts<{ yes?: boolean }>(cmd), topic, group);
    });

  queue
    .command('redrive')
    .description('republish the dead-letter copies on DLQ_TOPIC to the topics they came from (the copies stay)')
    .argument('<dlq-topic>', 'the dead-letter topic')
    .option('--limit <n>', 'republish at most N copies (default: all)', integer(1))
    .option('--after <cursor>', 'start after the copies an earlier run with --limit read (the cursor it printed)')
    .option(...json)
    .action(async (dlq: string, _o, cmd: Command) => {
      status.code = await redrive(opts<{ limit?: number; after?: string }>(cmd), dlq);
    });

  queue
    .command('schedules')
    .description('list the stored schedules with their last and next tick, or delete one with --remove')
    .option('--remove <name>', 'delete schedule NAME (messages it published stay)')
    .option(...json)
    .action(async (_o, cmd: Command) => {
      status.code = await schedules(opts<{ remove?: string }>(cmd));
    });
}
