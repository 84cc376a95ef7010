/**
 * Consumer processes seen from the parent: forks N of bench/peers/consumer.ts,
 * waits until each is connected, starts them together, and follows their
 * handled counts.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CONSUMER = fileURLToPath(new URL('./consumer.ts', import.meta.url));

export interface ConsumerSettings {
  system: string;
  ns: string;
  keyed: boolean;
  processes: number;
  concurrency: number;
  handlerMs: number;
  failKey?: string;
}

export class Consumers {
  handled = 0;
  other = 0;
  readonly #children: ChildProcess[];
  #waiters: Array<{ count: 'handled' | 'other'; n: number; resolve: (ms: number) => void }> = [];

  private constructor(children: ChildProcess[]) {
    this.#children = children;
    for (const c of children) {
      c.on('message', (m: { type: string; n?: number; other?: number }) => {
        if (m.type !== 'n') return;
        this.handled += m.n!;
        this.other += m.other!;
        const now = performance.now();
        this.#waiters = this.#waiters.filter((w) => {
          if (this[w.count] < w.n) return true;
          w.resolve(now);
          return false;
        });
      });
    }
  }

  /** Forks the processes and resolves once every one has connected. */
  static async start(s: ConsumerSettings): Promise<Consumers> {
    const children = Array.from({ length: s.processes }, () =>
      fork(CONSUMER, [s.system, s.ns, s.keyed ? '1' : '0', String(s.concurrency), String(s.handlerMs), s.failKey ?? ''], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    );
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve, reject) => {
            c.on('message', (m: { type: string }) => m.type === 'ready' && resolve());
            c.once('exit', (code) => reject(new Error(`consumer exited with ${code} before it was ready`)));
          }),
      ),
    );
    return new Consumers(children);
  }

  go(): void {
    for (const c of this.#children) c.send({ type: 'go' });
  }

  live(since: number): void {
    for (const c of this.#children) c.send({ type: 'live', since });
  }

  /** Resolves with performance.now() when `count` reaches `n`, or NaN after `timeoutMs`. */
  waitFor(count: 'handled' | 'other', n: number, timeoutMs: number): Promise<number> {
    if (this[count] >= n) return Promise.resolve(performance.now());
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(NaN), timeoutMs);
      this.#waiters.push({
        count,
        n,
        resolve: (ms) => {
          clearTimeout(t);
          resolve(ms);
        },
      });
    });
  }

  /** Stops every process; resolves with their latencies (ms) and order violations. */
  async stop(): Promise<{ latencies: number[]; violations: number }> {
    const results = await Promise.all(
      this.#children.map(
        (c) =>
          new Promise<{ latencies: number[]; violations: number }>((resolve) => {
            const timer = setTimeout(() => {
              c.kill('SIGKILL');
              resolve({ latencies: [], violations: 0 });
            }, 30_000);
            c.on('message', (m: { type: string; latencies?: number[]; violations?: number }) => {
              if (m.type === 'result') {
                clearTimeout(timer);
                resolve({ latencies: m.latencies!, violations: m.violations! });
              }
            });
            c.once('exit', () => {
              clearTimeout(timer);
              resolve({ latencies: [], violations: 0 });
            });
            c.send({ type: 'stop' });
          }),
      ),
    );
    await Promise.all(this.#children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => c.once('exit', r)))));
    return { latencies: results.flatMap((r) => r.latencies), violations: results.reduce((a, r) => a + r.violations, 0) };
  }
}
