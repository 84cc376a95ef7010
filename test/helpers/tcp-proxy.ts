/**
 * A TCP proxy a test controls, for network faults between a client and a
 * server on this machine. `freeze()` stops forwarding in both directions,
 * on open connections and new ones, without closing anything: to both ends
 * the other has gone silent, as in a network partition or a stopped server.
 * `thaw()` forwards what was held and carries on. `reset()` destroys every
 * open connection (both ends see it drop). `close()` does that and stops
 * listening. `freezeOn(match)` freezes at the first bytes from a client that
 * `match` (held, like everything after them): a partition that falls
 * between a client's read and its write. `freezeAnswers()` holds only what
 * the server sends: requests arrive and run, and their answers never come.
 *
 * Usage: `const p = await TcpProxy.start(5432)`, then connect to
 * `127.0.0.1:${p.port}` (see `p.url(...)`).
 */
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';

interface Pair {
  client: Socket;
  server: Socket | undefined;
  /** Bytes held while frozen, per direction. */
  toServer: Buffer[];
  toClient: Buffer[];
  /** The server side closed while frozen: dropped at `thaw`. */
  serverGone?: boolean;
}

export class TcpProxy {
  readonly #server: Server;
  readonly #targetHost: string;
  readonly #targetPort: number;
  readonly #pairs = new Set<Pair>();
  #frozen = false;
  /** Only the server's answers are held (`freezeAnswers`). */
  #answersHeld = false;
  #freezeOn: ((chunk: Buffer) => boolean) | undefined;
  /** Connections accepted so far. */
  accepted = 0;

  private constructor(server: Server, targetHost: string, targetPort: number) {
    this.#server = server;
    this.#targetHost = targetHost;
    this.#targetPort = targetPort;
  }

  /** Listens on an ephemeral port of 127.0.0.1, forwarding to `targetHost:targetPort`. */
  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, targetHost, targetPort);
    server.on('connection', (s) => proxy.#accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  /** The port the proxy listens on. */
  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  /** Whether forwarding is stopped. */
  get frozen(): boolean {
    return this.#frozen;
  }

  /** Open connections. */
  get connections(): number {
    return this.#pairs.size;
  }

  /** `url` with its host and port replaced by the proxy's. */
  url(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  /** Stops forwarding; new connections are accepted and held too. */
  freeze(): void {
    this.#frozen = true;
  }

  /** Holds what servers send (until `thaw`) while still forwarding what clients send. */
  freezeAnswers(): void {
    this.#answersHeld = true;
  }

  /**
   * Freezes (see `freeze`) when a chunk a client sends matches, before
   * forwarding it; resolves then. Armed once; `thaw` disarms it.
   */
  freezeOn(match: (chunk: Buffer) => boolean): Promise<void> {
    return new Promise((resolve) => {
      this.#freezeOn = (chunk) => {
        if (!match(chunk)) return false;
        this.#freezeOn = undefined;
        this.#frozen = true;
        resolve();
        return true;
      };
    });
  }

  /** Forwards what was held, in order, and resumes (opening held connections' upstream sides). */
  thaw(): void {
    this.#frozen = false;
    this.#answersHeld = false;
    this.#freezeOn = undefined;
    for (const p of this.#pairs) {
      if (p.serverGone) this.#drop(p);
      else if (p.server === undefined) this.#connectUpstream(p);
      else this.#flush(p);
    }
  }

  /** Destroys every open connection; the proxy keeps listening (and stays frozen if it was). */
  reset(): void {
    for (const p of this.#pairs) this.#drop(p);
  }

  /** Destroys every connection and stops listening. */
  async close(): Promise<void> {
    this.reset();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    this.accepted++;
    const p: Pair = { client, server: undefined, toServer: [], toClient: [] };
    this.#pairs.add(p);
    client.on('data', (d) => {
      this.#freezeOn?.(d);
      if (this.#frozen || p.server === undefined || p.toServer.length > 0) p.toServer.push(d);
      else p.server.write(d);
    });
    client.on('error', () => this.#drop(p));
    client.on('close', () => this.#drop(p));
    if (!this.#frozen) this.#connectUpstream(p);
  }

  #connectUpstream(p: Pair): void {
    if (!this.#pairs.has(p) || p.server !== undefined) return;
    const server = createConnection({ host: this.#targetHost, port: this.#targetPort });
    p.server = server;
    server.on('connect', () => this.#flush(p));
    server.on('data', (d) => {
      if (this.#frozen || this.#answersHeld || p.toClient.length > 0) p.toClient.push(d);
      else p.client.write(d);
    });
    // While frozen the client hears nothing, not even that the server hung up.
    const gone = () => (this.#frozen || this.#answersHeld ? (p.serverGone = true) : this.#drop(p));
    server.on('error', gone);
    server.on('close', gone);
  }

  #flush(p: Pair): void {
    if (this.#frozen || p.server === undefined || p.server.connecting) return;
    for (const d of p.toServer.splice(0)) p.server.write(d);
    for (const d of p.toClient.splice(0)) p.client.write(d);
  }

  #drop(p: Pair): void {
    if (!this.#pairs.delete(p)) return;
    p.client.destroy();
    p.server?.destroy();
  }
}
