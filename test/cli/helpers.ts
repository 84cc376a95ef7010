/**
 * Runs the ferry CLI as a child process and gives each test its own
 * temporary directory. The CLI runs from source through tsx (no build
 * needed), or, under FERRY_TEST_DIST=1 (.ci/run, right after `npm run build`
 * in a fresh clone, so dist/ is these sources), from dist/: a start without
 * tsx's transform takes a fraction of the time, over hundreds of runs.
 */
import { spawnChild } from '../helpers/children.js';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Node's arguments that start `ferry`, before the CLI's own. */
export const CLI: readonly string[] =
  process.env.FERRY_TEST_DIST === '1' && existsSync(join(ROOT, 'dist', 'cli', 'main.js'))
    ? [join(ROOT, 'dist', 'cli', 'main.js')]
    : ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts')];

export interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Runs `ferry ...args` with `input` on stdin (closed at once when absent); `timeoutMs` kills it (code null) if it runs longer. */
export function ferry(args: string[], opts: { input?: Uint8Array | string; env?: Record<string, string>; closeStdout?: boolean; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawnChild(process.execPath, [...CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    // closeStdout: the reader of the child's stdout is gone before it writes (a consumer that quit).
    if (opts.closeStdout) child.stdout.destroy();
    else child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}

/** A fresh temporary directory, removed by the returned cleanup. */
export async function scratch(): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'ferry-cli-test-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Asserts-friendly view of stderr: no stack trace lines. */
export function hasStackTrace(stderr: string): boolean {
  return /^\s+at .+\(.+:\d+:\d+\)$/m.test(stderr) || /^\s+at \S+:\d+:\d+$/m.test(stderr);
}

/** `records` framed as the CLI's --raw input: u32 big-endian length, then the bytes. */
export function rawFrames(records: Uint8Array[]): Buffer {
  return Buffer.concat(
    records.flatMap((r) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(r.length);
      return [len, Buffer.from(r)];
    }),
  );
}
