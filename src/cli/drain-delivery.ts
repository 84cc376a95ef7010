/**
 * What both kinds of `ferry drain` share, whatever the directory holds (a
 * DiskQueue in drain.ts, a spool in drain-spool.ts): the options, and how
 * records are handed on, to stdout or to `--exec`, with the error that says
 * a delivery failed and its records stay queued.
 */
import { spawn } from 'node:child_process';
import { describe, BATCH_BYTES } from './common.js';
import { encodeRecords, type Framing } from './framing.js';

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

/** Process groups of the `--exec` commands running now (see `runCommand`). */
const running = new Set<number>();

/**
 * Runs `sh -c cmd` with `input` as its whole stdin; resolves when it exits 0.
 * The command runs in a process group of its own: a Ctrl-C meant for ferry
 * lets the delivery in hand finish (the drain stops after it), and a second
 * signal ends the command and whatever it started (`stopOnSignals`).
 */
export function runCommand(cmd: string, input: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'], detached: true });
    const pid = child.pid;
    if (pid !== undefined) running.add(pid);
    // A command that does not read all its input closes the pipe early; only
    // its exit status decides whether the delivery succeeded.
    child.stdin.on('error', () => {});
    child.on('error', (err) => reject(new DeliveryError(`cannot run /bin/sh: ${describe(err)}`)));
    child.on('close', (code, signal) => {
      if (pid !== undefined) running.delete(pid);
      if (code === 0) resolve();
      else reject(new DeliveryError(`--exec command ${signal ? `was killed by ${signal}` : `exited with status ${code}`}`));
    });
    child.stdin.end(input);
  });
}

/**
 * Ends the `--exec` commands still running, with what they started: SIGKILL,
 * since ferry exits next and cannot wait for a command that traps SIGTERM.
 */
export function endCommands(): void {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
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
      endCommands();
      process.exit(EXIT_INTERRUPTED);
    }
    stop.abort();
  };
  const onHangup = () => {
    endCommands();
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
