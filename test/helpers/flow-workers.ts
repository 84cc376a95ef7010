/**
 * Worker processes of the flow-control process tests
 * (test/queue/fixtures/pg-flow-worker.ts): spawned through children.ts, so
 * each is SIGKILLed when its test ends however it ends; their event lines
 * are collected as they arrive.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { SubscribeOptions } from '../../src/queue/options.js';
import { orHang } from '../stores/helpers.js';
import { spawnTsx, WorkerWatch } from './children.js';

const here = dirname(fileURLToPath(import.meta.url));

/** A handler start a worker reported. */
export interface Start {
  id: string;
  attempt: number;
  /** Date.now() in the worker as the handler began. */
  at: number;
}

/** One running worker and what it reported so far. */
export class FlowWorker {
  readonly starts: Start[] = [];
  readonly #events: Array<{ ev: string; at?: number }> = [];
  readonly #waiters = new Set<() => void>();

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const e = JSON.parse(line) as { ev: string; id?: string; attempt?: number; at?: number };
      if (e.ev === 'start') this.starts.push({ id: e.id!, attempt: e.attempt!, at: e.at! });
      else this.#events.push(e);
      for (const w of this.#waiters) w();
    });
  }

  /** Resolves when `cond` holds (checked on each line the worker prints); fails at once when a watched worker exits by itself, or after the hang deadline. */
  async until(cond: () => boolean, what: string, watch?: WorkerWatch): Promise<void> {
    let check!: () => void;
    try {
      await orHang(
        new Promise<void>((resolve, reject) => {
          check = () => {
            try {
              watch?.check();
              if (cond()) resolve();
            } catch (err) {
              reject(err);
            }
          };
          this.#waiters.add(check);
          this.child.on('exit', check);
          check();
        }),
        `${this.name}: ${what}`,
      );
    } finally {
      this.#waiters.delete(check);
      this.child.off('exit', check);
    }
  }

  /** The instant (the worker's Date.now()) of its `nth` event `ev` (from 0), if it has come. */
  event(ev: string, nth = 0): number | undefined {
    return this.#events.filter((e) => e.ev === ev)[nth]?.at;
  }

  /** Sends a command line (`pause`, `resume`) and resolves with the instant the worker's call resolved. */
  async command(op: 'pause' | 'resume', watch?: WorkerWatch): Promise<number> {
    const ev = op === 'pause' ? 'paused' : 'resumed';
    const seen = this.#events.filter((e) => e.ev === ev).length;
    this.child.stdin!.write(`${op}\n`);
    await this.until(() => this.event(ev, seen) !== undefined, ev, watch);
    return this.event(ev, seen)!;
  }

  /** Closes its standard input: the worker closes its queue and exits 0. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) {
      assert.equal(this.child.exitCode, 0, `${this.name} exited with ${this.child.exitCode}`);
      return;
    }
    const exited = once(this.child, 'exit');
    this.child.stdin!.end();
    assert.deepEqual(await orHang(exited, `${this.name} to close`), [0, null], `${this.name} closed cleanly`);
  }
}

/** Starts a worker consuming `jobs`/`workers` on `schema` with `opts`, each handler taking `handlerMs`; resolves once it has subscribed. */
export async function startWorker(url: string, schema: string, name: string, opts: SubscribeOptions, handlerMs: number, watch: WorkerWatch): Promise<FlowWorker> {
  const child = spawnTsx(join(here, '..', 'queue', 'fixtures', 'pg-flow-worker.ts'), [url, schema, name, JSON.stringify(opts), String(handlerMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  watch.watch(child, name);
  const w = new FlowWorker(name, child);
  await w.until(() => w.event('ready') !== undefined, 'subscribe', watch);
  return w;
}
