#!/usr/bin/env node
/**
 * The `ferry` command (docs/CLI.md). Each command lives in its own module and
 * resolves to an exit status; this file only parses arguments and turns every
 * failure into one line on stderr and an exit status, never a stack trace
 * (set FERRY_DEBUG=1 to see one).
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, integer, milliseconds } from './common.js';
import { hideUrlPasswords } from './deliver.js';
import { push, DEFAULT_PUSH_BATCH } from './push.js';
import { drain } from './drain.js';
import { DEFAULT_DRAIN_BATCH, DEFAULT_POLL_MS } from './drain-delivery.js';
import { stats } from './stats.js';
import { verify } from './verify.js';
import { dashboard } from './dashboard.js';
import { addQueueCommand } from './queue-command.js';
import { forward, DEFAULT_HTTP_CONCURRENCY, DEFAULT_SYNC_BATCH, DEFAULT_TIMEOUT_MS, DEFAULT_RETRY_BASE_MS, DEFAULT_RETRY_MAX_MS } from './forward.js';

function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Builds the command tree; each action stores its exit status in `status.code`. */
export function buildProgram(status: { code: number }): Command {
  const program = new Command('ferry')
    .description('Durable queues on disk: push records in, drain them out, check the files, watch and operate a queue.')
    .version(version())
    .exitOverride()
    .showHelpAfterError('(run ferry --help for usage)')
    .configureOutput({ outputError: (str, write) => write(`ferry: ${hideUrlPasswords(str.replace(/^error: /, ''))}`) });

  const lockTimeout = ['--lock-timeout <ms>', 'wait up to this long for another process to release the queue', milliseconds(0)] as const;

  program
    .command('push')
    .description('append each line of FILE (or stdin) to the queue in DIR, durably')
    .argument('<dir>', 'queue directory (created when missing)')
    .argument('[file]', 'input file; stdin when omitted or "-"')
    .option('--raw', 'input is length-prefixed records (u32 big-endian length, then the bytes) instead of lines')
    .option('--sync-every <n>', 'flush once every N operations instead of every batch', integer(0))
    .option('--no-sync', 'never flush until the end (survives a crash of ferry, not a power cut)')
    .option('--segment-size <bytes>', 'segment size for a new queue, rounded up to a multiple of 4096 (default 8 MiB; an existing queue keeps its own)', integer(1))
    .option('--max-segments <n>', 'most segment files; 0 = no limit (default 32)', integer(0))
    .option('--max-bytes <bytes>', 'cap on the backlog in bytes; 0 = none', integer(0))
    .option('--batch <n>', `records per durable batch (default ${DEFAULT_PUSH_BATCH})`, integer(1))
    .option(...lockTimeout)
    .option('-q, --quiet', 'no summary line, no progress bar')
    .action(async (dir: string, file: string | undefined, o) => {
      status.code = await push(dir, file, o);
    });

  program
    .command('drain')
    .description('deliver every record to stdout or to a command, committing each after it succeeded')
    .argument('<dir>', 'queue directory')
    .option('--raw', 'frame output as length-prefixed records instead of lines')
    .option('--exec <cmd>', 'run `sh -c CMD` per record with the record as its stdin; commit when it exits 0')
    .option('--exec-batch <n>', 'with --exec: feed N framed records to one process instead', integer(1))
    .option('--max <n>', 'stop after N records', integer(0))
    .option('--follow', 'when the queue is empty, wait for more until SIGINT or SIGTERM')
    .option('--poll-ms <ms>', `with --follow: how often to look for new records (default ${DEFAULT_POLL_MS})`, milliseconds(1))
    .option('--batch <n>', `records per stdout write and commit (default ${DEFAULT_DRAIN_BATCH})`, integer(1))
    .option(...lockTimeout)
    .option('-q, --quiet', 'no summary line, no progress bar')
    .action(async (dir: string, o) => {
      status.code = await drain(dir, o);
    });

  program
    .command('stats')
    .description('print the queue\'s stats')
    .argument('<dir>', 'queue directory')
    .option('--json', 'one JSON object on one line')
    .option(...lockTimeout)
    .action(async (dir: string, o) => {
      status.code = await stats(dir, o);
    });

  program
    .command('verify')
    .description('check every segment and record without changing anything (exit 1 on damage)')
    .argument('<dir>', 'queue directory')
    .option('--json', 'the report as one JSON object on one line')
    .action(async (dir: string, o) => {
      status.code = await verify(dir, o);
    });

  program
    .command('forward')
    .description('store-and-forward: spool every input line durably, deliver it to a command or an HTTP endpoint, retry until accepted')
    .argument('[file]', 'input file; stdin when omitted or "-"')
    .requiredOption('--dir <dir>', 'spool directory (created when missing)')
    .option('--exec <cmd>', 'deliver by running `sh -c CMD` with the records (one per line) as its stdin; accepted on exit 0')
    .option('--http <url>', 'deliver by HTTP POST to URL; accepted on a 2xx answer')
    .option('--batch <n>', 'records per delivery (default 1)', integer(1))
    .option('--format <format>', 'how records go into a delivery: "lines" (bytes as they are, one per line; default) or "json" (each record as a JSON string: NDJSON)')
    .option('--concurrency <n>', `most deliveries outstanding at once; records are still committed in order (default ${DEFAULT_HTTP_CONCURRENCY} with --http, 1 with --exec)`, integer(1))
    .option('--sync-batch <n>', `input lines per group commit (default ${DEFAULT_SYNC_BATCH})`, integer(1))
    .option('--timeout-ms <ms>', `HTTP request timeout (default ${DEFAULT_TIMEOUT_MS})`, milliseconds(1))
    .option('--retry-base-ms <ms>', `first retry delay, doubled per attempt, with jitter (default ${DEFAULT_RETRY_BASE_MS})`, milliseconds(1))
    .option('--retry-max-ms <ms>', `longest retry delay (default ${DEFAULT_RETRY_MAX_MS})`, milliseconds(1))
    .option('--max-bytes <bytes>', 'spool backlog cap; 0 = the default 64 MiB', integer(0))
    .option('--segment-bytes <bytes>', 'spool segment size (default 8 MiB)', integer(1))
    .option('-q, --quiet', 'no progress line, no summary')
    .action(async (file: string | undefined, o) => {
      status.code = await forward(file, o);
    });

  program
    .command('dashboard')
    .description('serve a web page that shows a queue (or a DiskQueue/spool directory) live and redrives its dead letters')
    .option('--queue <config>', 'JSON file with the config createQueue takes ({"enabled": true, "type": ..., "config": {...}})')
    .option('--dir <dir>', 'a DiskQueue or spool directory to show instead: stats, segments, damage')
    .option('--host <address>', 'address to listen on; anything but loopback requires --token (default 127.0.0.1)')
    .option('--port <n>', 'TCP port (default 7070; 0 picks a free one)', integer(0))
    .option('--token <token>', 'access token every request must carry (or FERRY_DASHBOARD_TOKEN); at least 8 characters')
    .option('--dead-letter-topic <topic...>', 'dead-letter topics to list on the page')
    .option('--refresh-ms <ms>', 'how often to sample the queue (default 2000; 5000 for --dir)', milliseconds(100))
    .action(async (o) => {
      status.code = await dashboard(o);
    });

  addQueueCommand(program, status);

  return program;
}

/** Runs the CLI on `argv` (as `process.argv`); resolves to the exit status. */
export async function main(argv: string[]): Promise<number> {
  const status = { code: 0 };
  try {
    await buildProgram(status).parseAsync(argv);
    return status.code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version exit 0; every parse error is a usage error. Commander already printed the message.
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (err instanceof CliError) {
      process.stderr.write(`ferry: ${hideUrlPasswords(err.message)}\n`);
      return err.exitCode;
    }
    process.stderr.write(`ferry: ${hideUrlPasswords(describe(err))}\n`);
    if (process.env.FERRY_DEBUG) process.stderr.write(`${(err as Error)?.stack ?? ''}\n`);
    return EXIT_FAILED;
  }
}

process.exitCode = await main(process.argv);
