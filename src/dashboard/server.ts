/**
 * The dashboard's HTTP server (node:http): one page, its static files, and a
 * small JSON API under `/api/`. See docs/CLI.md, "ferry dashboard".
 *
 * Every request passes the checks of `security.ts` (Host, then the access
 * token when there is one); every POST also needs the CSRF token and a JSON
 * body. A background loop samples the queue every `refreshMs`; the page's
 * polls read that sample, so any number of open pages cost the store one
 * round of `stats()` per interval.
 *
 * The changes: `redrive`, `remove-group`, `pause-group` and `resume-group`
 * (404 for a group that is not registered, 501 when the store cannot).
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { FerryError, InvalidArgumentError, InvalidNameError, UnsupportedError } from '../errors.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import { MAX_ID_LENGTH, validateName } from '../queue/names.js';
import type { Queue } from '../queue/types.js';
import { lookAtDir, type DirView } from './dir-source.js';
import { Guard, isLoopback } from './security.js';
import { QueueSource, type GroupRow } from './source.js';
import { Throughput } from './throughput.js';

/** Options of {@link startDashboard}. Give exactly one of `queue` and `dir`. */
export interface DashboardOptions {
  /** The queue to show; the dashboard never closes it. */
  queue?: Queue<unknown>;
  /** A DiskQueue or spool directory to show instead. */
  dir?: string;
  /** Address to listen on. Default `127.0.0.1`; anything but a loopback address requires `token`. */
  host?: string;
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** Access token every request must carry. Required when `host` is not loopback. */
  token?: string;
  /** Dead-letter topics listed on the page from the start (others can be typed in). */
  deadLetterTopics?: string[];
  /** How often the server samples the queue or directory, ms. Default 2000 (5000 for `dir`). */
  refreshMs?: number;
  /**
   * How the throughput chart counts: `events` counts the `completed` and
   * `deadLettered` events of `queue` (its consumers run in this process);
   * `sampled` derives both rates from successive `stats()` samples (another
   * process consumes; `queue`'s events would never come). Default: `events`
   * when the queue emits them, else `sampled`.
   */
  throughput?: 'events' | 'sampled';
}

const DASHBOARD_OPTION_KEYS = knownKeys<DashboardOptions>({ queue: true, dir: true, host: true, port: true, token: true, deadLetterTopics: true, refreshMs: true, throughput: true });

/** A running dashboard. */
export interface Dashboard {
  /** `http://host:port/`, without the token. */
  readonly url: string;
  readonly port: number;
  /** Stops the server and the sampling; leaves the queue open. */
  close(): Promise<void>;
}

/** Largest POST body read, bytes. */
const MAX_BODY = 64 * 1024;
/** Most dead letters on one page, and most IDs in one redrive. */
export const MAX_PAGE = 200;
const DEFAULT_PAGE = 25;

const PAGE_DIR = new URL('./page/', import.meta.url);
/** The host request targets are resolved against; a target that names another is refused. */
const TARGET_BASE = 'dashboard.invalid';
const require = createRequire(import.meta.url);

/** Static files: URL path → [file, content type]. uPlot comes from its installed package. */
const STATIC: Record<string, [() => string, string]> = {
  '/static/app.js': [() => fileURLToPath(new URL('app.js', PAGE_DIR)), 'text/javascript; charset=utf-8'],
  '/static/style.css': [() => fileURLToPath(new URL('style.css', PAGE_DIR)), 'text/css; charset=utf-8'],
  '/static/uPlot.iife.min.js': [() => require.resolve('uplot/dist/uPlot.iife.min.js'), 'text/javascript; charset=utf-8'],
  '/static/uPlot.min.css': [() => require.resolve('uplot/dist/uPlot.min.css'), 'text/css; charset=utf-8'],
};

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'cross-origin-resource-policy': 'same-origin',
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, body: string | Buffer, type: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
  res.end(body);
}

function json(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, JSON.stringify(value), 'application/json; charset=utf-8');
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new HttpError(415, 'the body must be application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_BODY) throw new HttpError(413, `the body is larger than ${MAX_BODY} bytes`);
    chunks.push(c);
  }
  let v: unknown;
  try {
    v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the body is not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new HttpError(400, 'the body must be a JSON object');
  return v as Record<string, unknown>;
}

function name(kind: string, v: unknown): string {
  if (typeof v !== 'string') throw new InvalidNameError(`${kind} name is missing`);
  validateName(kind, v);
  return v;
}

function ids(v: unknown): string[] | 'all' {
  if (v === 'all') return 'all';
  if (!Array.isArray(v) || v.length === 0 || v.length > MAX_PAGE) throw new InvalidArgumentError(`ids must be "all" or a list of 1 to ${MAX_PAGE} message IDs`);
  for (const id of v) {
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) throw new InvalidArgumentError('every ID must be a non-empty string of at most 255 characters');
  }
  return [...new Set(v as string[])];
}

function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof InvalidArgumentError || err instanceof InvalidNameError) return 400;
  if (err instanceof UnsupportedError) return 501;
  return 500;
}

/**
 * Throws `InvalidArgumentError` for a token shorter than 8 characters or
 * holding whitespace, or a `host` that is not loopback without a token.
 * `startDashboard` checks this; `ferry dashboard` also checks it before it
 * opens the queue, so a bad bind is the error reported whatever the queue.
 */
export function checkBinding(host: string, token: string | undefined): void {
  if (token !== undefined && (token.length < 8 || /\s/.test(token))) throw new InvalidArgumentError('the token must be at least 8 characters, without whitespace');
  if (!isLoopback(host) && token === undefined) throw new InvalidArgumentError(`binding to ${host} (not a loopback address) requires a token`);
}

/**
 * Starts a dashboard and resolves once it listens.
 *
 * @throws InvalidArgumentError an unknown option; neither or both of `queue` and `dir`; `deadLetterTopics` or `throughput` with `dir`; a non-loopback `host` without `token`; an empty token; a bad port or interval.
 */
export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  rejectUnknownKeys('dashboard option', o, DASHBOARD_OPTION_KEYS);
  if (o === undefined) throw new InvalidArgumentError('startDashboard needs options: a queue or a directory');
  if ((o.queue === undefined) === (o.dir === undefined)) throw new InvalidArgumentError('give either a queue or a directory');
  // Options that only one kind of dashboard reads would be ignored by the other.
  if (o.dir !== undefined && (o.deadLetterTopics !== undefined || o.throughput !== undefined)) {
    throw new InvalidArgumentError('deadLetterTopics and throughput apply to a queue, not a directory');
  }
  if (o.deadLetterTopics !== undefined && !Array.isArray(o.deadLetterTopics)) throw new InvalidArgumentError('deadLetterTopics must be an array of topic names');
  const host = o.host ?? '127.0.0.1';
  checkBinding(host, o.token);
  const port = o.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`port must be 0 to 65535, got ${port}`);
  const refreshMs = o.refreshMs ?? (o.dir !== undefined ? 5000 : 2000);
  if (!Number.isInteger(refreshMs) || refreshMs < 100) throw new InvalidArgumentError('refreshMs must be a whole number of at least 100');
  const dlqTopics = (o.deadLetterTopics ?? []).map((t) => name('dead-letter topic', t));

  const guard = new Guard(o.token);
  const template = await readFile(new URL('index.html', PAGE_DIR), 'utf8');
  let throughput: Throughput | undefined;
  const source = o.queue ? new QueueSource(o.queue, (kind) => throughput?.count(kind)) : undefined;
  if (o.throughput !== undefined && o.throughput !== 'events' && o.throughput !== 'sampled') {
    throw new InvalidArgumentError(`throughput must be "events" or "sampled", got ${JSON.stringify(o.throughput)}`);
  }
  if (source) throughput = new Throughput(o.throughput ?? (source.features.events ? 'events' : 'sampled'));

  // The latest sample, refreshed in the background.
  let rows: GroupRow[] = [];
  let dirView: DirView | null = null;
  let sampledAt = 0;
  let sampleError: string | null = null;
  let sampling: Promise<void> | undefined;
  const sample = (): Promise<void> =>
    (sampling ??= (async () => {
      try {
        if (source) {
          rows = await source.rows();
          throughput!.sample(rows);
        } else {
          dirView = await lookAtDir(o.dir!);
        }
        sampleError = null;
      } catch (err) {
        sampleError = err instanceof Error ? err.message : String(err);
      } finally {
        sampledAt = Date.now();
        sampling = undefined;
      }
    })());
  /** A sample begun after this call: one already running may have read the queue before a change. */
  const resample = async (): Promise<void> => {
    await sampling;
    await sample();
  };
  await sample();
  const timer = setInterval(() => void sample(), refreshMs);
  timer.unref();

  const page = (): string =>
    template
      .replace('{{csrf}}', guard.csrf)
      .replace('{{mode}}', source ? 'queue' : 'dir')
      .replace('{{refresh}}', String(Math.min(refreshMs, 5000)));

  async function api(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname;
    if (req.method === 'GET') {
      if (path === '/api/overview') {
        return json(res, 200, {
          mode: source ? 'queue' : 'dir',
          at: sampledAt,
          error: sampleError,
          features: source?.features ?? null,
          groups: rows,
          deadLetterTopics: dlqTopics,
          dir: dirView,
        });
      }
      if (path === '/api/throughput') {
        if (!throughput) throw new HttpError(404, 'no throughput for a directory');
        return json(res, 200, throughput.series());
      }
      if (path === '/api/dead-letters') {
        if (!source) throw new HttpError(404, 'no dead letters for a directory');
        const topic = name('topic', url.searchParams.get('topic') ?? undefined);
        const after = url.searchParams.get('after');
        if (after !== null && (after.length === 0 || after.length > MAX_ID_LENGTH)) throw new InvalidArgumentError('after must be a message ID');
        const limitText = url.searchParams.get('limit') ?? String(DEFAULT_PAGE);
        const limit = Number(limitText);
        if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_PAGE) throw new InvalidArgumentError(`limit must be 1 to ${MAX_PAGE}`);
        return json(res, 200, { topic, ...(await source.deadLetters(topic, after, limit)) });
      }
      throw new HttpError(404, 'not found');
    }
    if (req.method !== 'POST') throw new HttpError(405, 'method not allowed');
    const refused = guard.csrfProblem(req);
    if (refused) throw new HttpError(403, refused);
    if (!source) throw new HttpError(404, 'nothing to change for a directory');
    const body = await readJson(req);
    if (path === '/api/redrive') {
      const topic = name('topic', body.topic);
      const redriven = await source.redrive(topic, ids(body.ids));
      void sample();
      return json(res, 200, { redriven });
    }
    if (path === '/api/remove-group') {
      const topic = name('topic', body.topic);
      const group = name('group', body.group);
      if (!(await source.removeGroup(topic, group))) throw new HttpError(404, `no group ${group} on topic ${topic}`);
      void sample();
      return json(res, 200, { removed: { topic, group } });
    }
    if (path === '/api/pause-group' || path === '/api/resume-group') {
      const topic = name('topic', body.topic);
      const group = name('group', body.group);
      const paused = path === '/api/pause-group';
      if (!(await source.setPaused(topic, group, paused))) throw new HttpError(404, `no group ${group} on topic ${topic}`);
      // Answer once the sample shows the change, so the page's next poll does not show the old state.
      await resample();
      return json(res, 200, { topic, group, paused });
    }
    throw new HttpError(404, 'not found');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!guard.hostOk(req)) return send(res, 403, 'unexpected Host header', 'text/plain; charset=utf-8');
    // A request target the URL parser refuses (`http://[`) is the client's
    // error, and so is one it reads as naming a host (`//host/api/x`,
    // `/\\host/api/x`, `http://host/api/x`): it would serve `/api/x`, a path
    // the client did not send as such.
    let url: URL;
    try {
      url = new URL(req.url ?? '/', `http://${TARGET_BASE}`);
      if (url.host !== TARGET_BASE) throw new Error('a target naming a host');
    } catch {
      return send(res, 400, 'malformed request target', 'text/plain; charset=utf-8');
    }
    if (req.method === 'GET' && url.pathname === '/' && url.searchParams.has('token') && guard.tokenRequired) {
      if (!guard.tokenMatches(url.searchParams.get('token')!)) return send(res, 401, 'wrong token', 'text/plain; charset=utf-8');
      return send(res, 303, '', 'text/plain; charset=utf-8', { location: '/', 'set-cookie': guard.tokenCookie() });
    }
    if (!guard.authorized(req)) {
      return send(res, 401, 'this dashboard needs its token: open /?token=TOKEN or send Authorization: Bearer TOKEN', 'text/plain; charset=utf-8', {
        'www-authenticate': 'Bearer',
      });
    }
    if (url.pathname.startsWith('/api/')) return api(req, res, url);
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'method not allowed');
    if (url.pathname === '/') return send(res, 200, page(), 'text/html; charset=utf-8');
    const file = STATIC[url.pathname];
    if (!file) throw new HttpError(404, 'not found');
    return send(res, 200, await readFile(file[0]()), file[1]);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const status = statusOf(err);
      const code = err instanceof FerryError ? err.code : undefined;
      const message = status === 500 ? `internal error: ${err instanceof Error ? err.message : String(err)}` : (err as Error).message;
      if (res.headersSent) return void res.end();
      // The rest of a body too large to read is never read: the connection
      // cannot carry another request, so the answer says it closes.
      if (status === 413) res.setHeader('connection', 'close');
      if (req.url?.startsWith('/api/')) json(res, status, { error: message, ...(code ? { code } : {}) });
      else send(res, status, message, 'text/plain; charset=utf-8');
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  guard.bound(host, bound);
  const shown = host.includes(':') ? `[${host}]` : host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${shown}:${bound}/`,
    port: bound,
    close: () =>
      (closed ??= (async () => {
        clearInterval(timer);
        source?.detach();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await sampling;
      })()),
  };
}
