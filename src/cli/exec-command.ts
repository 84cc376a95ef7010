/**
 * `--exec` commands, as `ferry drain` and `ferry forward` run them: `sh -c
 * CMD` with the records as its whole stdin, accepted on exit status 0, each
 * in a process group of its own. A Ctrl-C meant for ferry then lets the
 * command finish (ferry decides when to stop), and `killGroups` ends a
 * command together with whatever it started.
 */
import { spawn } from 'node:child_process';
import { describe } from './common.js';

/**
 * Runs `sh -c cmd` with `input` as its stdin; resolves when it exits 0,
 * rejects with an `Error` saying why not. Its process group is in `running`
 * while it runs.
 */
export function runInGroup(cmd: string, input: Uint8Array, running: Set<number>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'], detached: true });
    const pid = child.pid;
    if (pid !== undefined) running.add(pid);
    // A command that does not read all its input closes the pipe early; only its exit status decides.
    child.stdin.on('error', () => {});
    child.on('error', (err) => reject(new Error(`cannot run /bin/sh: ${describe(err)}`)));
    child.on('close', (code, signal) => {
      if (pid !== undefined) running.delete(pid);
      if (code === 0) resolve();
      else reject(new Error(`--exec command ${signal ? `was killed by ${signal}` : `exited with status ${code}`}`));
    });
    child.stdin.end(input);
  });
}

/** Ends the process groups in `running` with SIGKILL: ferry exits next, and a command that traps SIGTERM would outlive it. */
export function killGroups(running: Iterable<number>): void {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
