/**
 * Child processes for tests that cannot outlive them. `spawnChild` is
 * `child_process.spawn` that remembers the child: when the test that spawned
 * it ends, passed or failed or timed out, a child still running gets SIGKILL
 * (a root-level `afterEach`), and so does any left when this process exits.
 * A test that fails half-way therefore leaves no worker holding a database
 * connection, a lock or a port behind it.
 *
 * Those kills run in this process. When this process is itself killed (the
 * runner kills a test file that outran its timeout), they never run, so each
 * child also gets a watchdog, {@link reapWithParent}, that SIGKILLs it once
 * this process is gone.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { afterEach } from 'node:test';

const running = new Set<ChildProcess>();

/** Shells started by {@link spawnShell}: each leads a process group of its own, killed whole. */
const groups = new WeakSet<ChildProcess>();

/** SIGKILLs `child`, and for a {@link spawnShell} shell every process of its group (the commands it started outlive the shell otherwise). */
export function killChild(child: ChildProcess): void {
  if (groups.has(child) && child.pid !== undefined) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* the group is gone already */
    }
  } else if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
  }
}

function killAll(): void {
  for (const c of running) killChild(c);
  running.clear();
}

afterEach(killAll);
process.once('exit', killAll);

/**
 * SIGKILLs process `pid` once this process has gone, however it went: a
 * detached shell checks both once a second and ends when either has. For
 * children that must not outlive the test process (workers, private servers).
 */
export function reapWithParent(pid: number | undefined, group = false): void {
  if (pid === undefined) return;
  const target = group ? `-- -${pid}` : String(pid);
  const watch = `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${pid} 2>/dev/null; do sleep 1; done; kill -9 ${target} 2>/dev/null`;
  spawn('/bin/sh', ['-c', watch], { detached: true, stdio: 'ignore' }).unref();
}

function track<C extends ChildProcess>(child: C): C {
  reapWithParent(child.pid, groups.has(child));
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** Whether process `pid` still runs (signal 0 reaches it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Like `spawn` (same overloads), but the child is SIGKILLed when the current test ends if it is still running. */
export const spawnChild: typeof spawn = ((...args: Parameters<typeof spawn>) => track(spawn(...args))) as typeof spawn;

/**
 * `/bin/sh -c script` as the leader of a process group of its own, tracked
 * like `spawnChild`, except that killing it ({@link killChild}, the end of its
 * test, this process's exit) kills every command the script started too.
 */
export function spawnShell(script: string, options: SpawnOptions = {}): ChildProcess {
  const child = spawn('/bin/sh', ['-c', script], { ...options, detached: true });
  groups.add(child);
  return track(child);
}

/** `node --import tsx <script> ...args`, tracked like `spawnChild`. */
export function spawnTsx(script: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  return spawnChild(process.execPath, ['--import', 'tsx', script, ...args], options);
}

/**
 * Workers that end only when their test kills them. `watch` records the
 * first exit by anything but SIGKILL; `check` throws it, so a wait on the
 * workers' progress fails at once with the cause instead of running into its
 * hang deadline a worker short.
 */
export class WorkerWatch {
  private died: Error | undefined;

  watch(child: ChildProcess, name: string): void {
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL') this.died ??= new Error(`worker ${name} exited by itself (code ${code}, signal ${signal}); its stderr is above`);
    });
  }

  check(): void {
    if (this.died) throw this.died;
  }
}
