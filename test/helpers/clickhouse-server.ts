/**
 * Starts Debian's `clickhouse-server` (18.16) by hand on 127.0.0.1 with a
 * config under a directory of ours: no system service, no files outside that
 * directory. Used by test/stores/clickhouse-env.ts (a private server when no
 * shared one answers) and by .ci/run (`node --import tsx
 * test/helpers/clickhouse-server.ts start PORT DIR`, a shared one that
 * outlives the command). Data goes under /dev/shm where it exists.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CLICKHOUSE_BINARY = ['/usr/bin/clickhouse-server', '/usr/sbin/clickhouse-server'].find((p) => existsSync(p));

/** The server config: HTTP and native ports on 127.0.0.1, data and logs under `dir`, one passwordless `default` user. */
export function serverConfig(dir: string, httpPort: number, tcpPort: number): string {
  return `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${dir}/server.log</log><errorlog>${dir}/server.err.log</errorlog><console>0</console></logger>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>200</max_concurrent_queries>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
  </users>
  <profiles><default></default></profiles>
  <quotas><default></default></quotas>
</yandex>
`;
}

/**
 * Where test servers keep their data: /dev/shm when there is one. The data is
 * thrown away after the run, and every ClickHouse write is a new part (a
 * directory of files), which on a busy disk costs tens of milliseconds.
 */
export function scratchRoot(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

/** A TCP port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** True when `url` answers ClickHouse's `/ping`. */
export async function answers(url: string, timeoutMs = 1000): Promise<boolean> {
  try {
    const res = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok && (await res.text()).startsWith('Ok');
  } catch {
    return false;
  }
}

/**
 * Starts a server with its config and data under `dir` and resolves once it
 * answers (within `timeoutMs`). `detached` servers outlive this process.
 */
export async function startServer(dir: string, httpPort: number, opts: { detached?: boolean; timeoutMs?: number } = {}): Promise<{ url: string; child: ChildProcess }> {
  if (!CLICKHOUSE_BINARY) throw new Error('clickhouse-server is not installed (apt-get install -y clickhouse-server)');
  mkdirSync(dir, { recursive: true });
  const tcpPort = await freePort();
  writeFileSync(join(dir, 'config.xml'), serverConfig(dir, httpPort, tcpPort));
  const out = openSync(join(dir, 'stdout.log'), 'a');
  const child = spawn(CLICKHOUSE_BINARY, [`--config-file=${join(dir, 'config.xml')}`], { cwd: dir, stdio: ['ignore', out, out], detached: opts.detached ?? false });
  if (opts.detached) child.unref();
  const url = `http://127.0.0.1:${httpPort}`;
  const end = Date.now() + (opts.timeoutMs ?? 30_000);
  let exited = false;
  child.once('exit', () => (exited = true));
  while (!(await answers(url, 500))) {
    if (exited) throw new Error(`clickhouse-server exited at start; see ${dir}/server.err.log`);
    if (Date.now() > end) {
      child.kill('SIGKILL');
      throw new Error(`clickhouse-server did not answer on ${url}; see ${dir}/server.err.log`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, child };
}

// CLI: start PORT DIR — a shared server for a CI run (no-op when one answers there already).
if (process.argv[1]?.endsWith('clickhouse-server.ts') && process.argv[2] === 'start') {
  const port = Number(process.argv[3] ?? 18123);
  const dir = process.argv[4] ?? join(scratchRoot(), 'ferry-clickhouse');
  if (await answers(`http://127.0.0.1:${port}`)) {
    console.log(`clickhouse-server already answers on 127.0.0.1:${port}`);
  } else {
    const { url, child } = await startServer(dir, port, { detached: true });
    console.log(`clickhouse-server ${child.pid} answers on ${url} (data in ${dir})`);
  }
  process.exit(0);
}
