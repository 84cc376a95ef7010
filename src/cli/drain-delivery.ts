/**
 * What both kinds of `ferry drain` share, whatever the directory holds (a
 * DiskQueue in drain.ts, a spool in drain-spool.ts): the options, and how
 * records are handed on, to stdout or to `--exec`, with the error that says
 * a delivery failed and its records stay queued.
 */
import { describe, BATCH_BYTES } from './common.js';
import { encodeRecords, type Framing } from './framing.js';
import { killGroups, runInGroup } from './exec-command.js';

/** Options of `ferry drain`, as parsed from the command line. */
export interface DrainOptions {
  raw?: boolean;
  exec?: string;
  execBatch?: number;
  max?: number;
  follow?: boolean;
  pollMs?: number;
  /** Most records per stdout write. */
  batch?: number;
  lockTimeout?: number;
  quiet?: boolean;
}

/** Default records per stdout write. */
export const DEFAULT_DRAIN_BATCH = 8192;
/** Default idle poll interval of `--follow`, ms. */
export const DEFAULT_POLL_MS = 500;
/** Exit status after SIGINT/SIGTERM stopped a drain that was not following. */
export const EXIT_INTERRUPTED = 130;

/** A delivery did not succeed; its records stay queued. */
export class DeliveryError extends Error {}

export function writeStdout(buf: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(buf, (err) => (err ? reject(new DeliveryError(`cannot write to stdout: ${describe(err)}`)) : resolve()));
  });
}

/** Process groups of the `--exec` commands running now. */
const running = new Set<number>();

/** Runs `sh -c cmd` with `input` as its whole stdin, in a process group of its own (exec-command.ts); resolves when it exits 0. */
export function runCommand(cmd: string, input: Uint8Array): Promise<void> {
  return runInGroup(cmd, input, running).catch((err: Error) => {
    throw new DeliveryError(err.message);
  });
}

/**
 * How `ferry drain` hands records on, whatever the directory holds: to stdout
 * (framed, `--batch` records per write) or to `--exec` (one record per run,
 * or `--exec-batch` records framed on its stdin).
 */
export function deliveryPlan(o: DrainOptions): { deliver: (records: Uint8Array[]) => Promise<void>; perDelivery: number; byteLimit: number } {
  const framing: Framing = o.raw ? 'raw' : 'lines';
  const deliver = o.exec === undefined
    ? (records: Uint8Array[]) => writeStdout(encodeRecords(records, framing))
    : o.execBatch === undefined
      ? (records: Uint8Array[]) => runCommand(o.exec!, records[0]!)
      : (records: Uint8Array[]) => runCommand(o.exec!, encodeRecords(records, framing));
  return {
    deliver,
    perDelivery: o.exec === undefined ? (o.batch ?? DEFAULT_DRAIN_BATCH) : (o.execBatch ?? 1),
    byteLimit: o.exec === undefined ? BATCH_BYTES : Infinity,
  };
}

/** Exit status after SIGHUP (128 + 1): the terminal went away. */
export const EXIT_HANGUP = 129;

/**
 * Stops a drain on SIGINT or SIGTERM: the first aborts `signal` (the drain
 * finishes the delivery in hand and commits it), a second ends any `--exec`
 * command still running and exits at once with `EXIT_INTERRUPTED` (what it
 * was delivering is not committed). SIGHUP (the terminal closed) does what
 * a second signal does, with `EXIT_HANGUP`: the commands run in process
 * groups of their own, so the hangup would not reach them. `dispose` removes
 * the handlers.
 */
export function stopOnSignals(): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) {
      killGroups(running);
      process.exit(EXIT_INTERRUPTED);
    }
    stop.abort();
  };
  const onHangup = () => {
    killGroups(running);
    process.exit(EXIT_HANGUP);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onHangup);
  return {
    signal: stop.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.off('SIGHUP', onHangup);
    },
  };
}
