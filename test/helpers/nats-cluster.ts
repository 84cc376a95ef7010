/**
 * A private NATS JetStream cluster for a test or a benchmark: `n`
 * nats-server processes on free loopback ports, each with its own config
 * file and store directory under one temporary directory, routed to each
 * other. Servers are started with the given `spawn`: a test passes
 * `spawnChild` (test/helpers/children.ts), so they are SIGKILLed when the
 * test ends on any path. `stop()` kills them and removes the directory.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, scratchRoot } from './clickhouse-server.js';

/** Debian's nats-server, or undefined when it is not installed. */
export const NATS_SERVER_BINARY = ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server'].find((p) => existsSync(p));

/** Starts a server process: `spawn(command, args)` with its output ignored. */
export type Spawner = (command: string, args: string[]) => ChildProcess;

interface Node {
  readonly name: string;
  readonly port: number;
  readonly conf: string;
  child: ChildProcess | undefined;
}

export class NatsCluster {
  readonly #dir: string;
  readonly #nodes: Node[];
  readonly #spawn: Spawner;

  private constructor(dir: string, nodes: Node[], spawn: Spawner) {
    this.#dir = dir;
    this.#nodes = nodes;
    this.#spawn = spawn;
  }

  /** Starts `n` routed servers and waits until JetStream answers through all of them. */
  static async start(n: number, spawn: Spawner): Promise<NatsCluster> {
    if (!NATS_SERVER_BINARY) throw new Error('nats-server is not installed');
    const dir = mkdtempSync(join(scratchRoot(), 'ferry-nats-'));
    const ports = await Promise.all(Array.from({ length: n }, async () => ({ client: await freePort(), route: await freePort() })));
    const nodes: Node[] = ports.map((p, i) => {
      const name = `n${i + 1}`;
      const store = join(dir, name);
      mkdirSync(store);
      const routes = ports.filter((_, j) => j !== i).map((q) => `nats-route://127.0.0.1:${q.route}`);
      const conf = join(dir, `${name}.conf`);
      writeFileSync(conf, [
        `server_name: ${name}`,
        `listen: 127.0.0.1:${p.client}`,
        `jetstream { store_dir: "${store}", max_memory_store: 64MB, max_file_store: 1GB }`,
        `cluster { name: ferry-test, listen: 127.0.0.1:${p.route}, routes: [${routes.join(', ')}] }`,
        '',
      ].join('\n'));
      return { name, port: p.client, conf, child: undefined };
    });
    const c = new NatsCluster(dir, nodes, spawn);
    try {
      for (let i = 0; i < n; i++) c.restart(i);
      for (let i = 0; i < n; i++) await c.waitReady(i);
      return c;
    } catch (err) {
      c.stop();
      throw err;
    }
  }

  /** Client URLs of every node. */
  get servers(): string[] {
    return this.#nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  /** SIGKILLs node `i` (no shutdown of any kind). */
  kill(i: number): void {
    const node = this.#nodes[i]!;
    node.child?.kill('SIGKILL');
    node.child = undefined;
  }

  /** Starts node `i` (again) on its own config and store. */
  restart(i: number): void {
    const node = this.#nodes[i]!;
    if (node.child) throw new Error(`${node.name} is running`);
    node.child = this.#spawn(NATS_SERVER_BINARY!, ['-c', node.conf]);
  }

  /** Waits until JetStream answers through node `i` (the cluster has a meta leader), or throws after `timeoutMs`. */
  async waitReady(i: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        const nc = await connect({ servers: `127.0.0.1:${this.#nodes[i]!.port}`, timeout: 1000, reconnect: false });
        try {
          await (await jetstreamManager(nc, { timeout: 2000 })).getAccountInfo();
          return;
        } finally {
          await nc.close();
        }
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    throw new Error(`${this.#nodes[i]!.name}: JetStream not ready after ${timeoutMs} ms (${(last as Error)?.message})`);
  }

  /** Kills every node and removes the directory. */
  stop(): void {
    for (let i = 0; i < this.#nodes.length; i++) this.kill(i);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
