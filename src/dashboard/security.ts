/**
 * The dashboard's request checks.
 *
 * - Host: the `Host` header must name the address the server listens on (or
 *   `localhost` for a loopback bind), so a page on another site cannot reach
 *   a loopback dashboard through DNS rebinding.
 * - Access token (`--token`, required for a non-loopback bind): every request
 *   carries it, as `Authorization: Bearer T` or as the `ferry_dashboard`
 *   cookie; `GET /?token=T` sets that cookie (HttpOnly, SameSite=Strict) and
 *   redirects to `/` so the token leaves the address bar. Missing or wrong: 401.
 * - CSRF: every state-changing request is a POST whose `X-CSRF-Token` header
 *   equals the token this server process made at start and put into the
 *   page; a cross-site page cannot read it. A POST whose `Origin` is present
 *   and not this server (`null` included) is refused too. Either way: 403,
 *   with a message saying which check failed.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** Name of the cookie that carries the access token. */
export const TOKEN_COOKIE = 'ferry_dashboard';
/** Header that carries the CSRF token. */
export const CSRF_HEADER = 'x-csrf-token';

/** Whether `host` is a loopback address (or `localhost`). */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const h = host.replace(/^\[|\]$/g, '');
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1';
  return false;
}

/** Compares two secrets in time independent of where they differ. */
export function sameSecret(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  const raw = req.headers.cookie;
  if (!raw) return undefined;
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    if (part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** The checks of one server: its bind address and port, its tokens. */
export class Guard {
  /** Random per process; the page reads it from its `<meta name="csrf-token">`. */
  readonly csrf = randomBytes(32).toString('hex');
  readonly #token: string | undefined;
  readonly #hosts = new Set<string>();

  constructor(token: string | undefined) {
    this.#token = token;
  }

  /** Sets the address the server listens on, once it is bound (the port may have been 0). */
  bound(host: string, port: number): void {
    this.#hosts.clear();
    const names = isLoopback(host) ? ['127.0.0.1', 'localhost', '[::1]', host] : [host.includes(':') && !host.startsWith('[') ? `[${host}]` : host];
    for (const n of names) this.#hosts.add(`${n}:${port}`.toLowerCase());
    // Wildcard binds: any Host is accepted (the token is then the guard).
    if (host === '0.0.0.0' || host === '::') this.#hosts.add('*');
  }

  /** Whether the request's Host header names this server. */
  hostOk(req: IncomingMessage): boolean {
    if (this.#hosts.has('*')) return true;
    const h = (req.headers.host ?? '').toLowerCase();
    return this.#hosts.has(h);
  }

  get tokenRequired(): boolean {
    return this.#token !== undefined;
  }

  /** Whether the request carries the access token (always true without one). */
  authorized(req: IncomingMessage): boolean {
    if (this.#token === undefined) return true;
    const auth = req.headers.authorization;
    if (typeof auth === 'string' && /^bearer /i.test(auth) && sameSecret(auth.slice(7), this.#token)) return true; // the scheme is case-insensitive (RFC 9110)
    const c = cookie(req, TOKEN_COOKIE);
    return c !== undefined && sameSecret(c, this.#token);
  }

  /** Whether `given` is the access token (for `?token=`). */
  tokenMatches(given: string): boolean {
    return this.#token !== undefined && sameSecret(given, this.#token);
  }

  /** The Set-Cookie value that stores the access token. */
  tokenCookie(): string {
    return `${TOKEN_COOKIE}=${encodeURIComponent(this.#token ?? '')}; HttpOnly; SameSite=Strict; Path=/`;
  }

  /** Whether a state-changing request carries the CSRF token and, if it names an origin, this server's. */
  csrfOk(req: IncomingMessage): boolean {
    return this.csrfProblem(req) === undefined;
  }

  /**
   * What is wrong with a state-changing request, as the 403 answer says it,
   * or undefined when it carries the CSRF token and names no other origin.
   */
  csrfProblem(req: IncomingMessage): string | undefined {
    const given = req.headers[CSRF_HEADER];
    if (typeof given !== 'string' || given === '') return 'missing CSRF token: send the X-CSRF-Token header from the dashboard page';
    if (!sameSecret(given, this.csrf)) return 'wrong CSRF token: reload the dashboard page (a restarted dashboard has a new token)';
    const origin = req.headers.origin;
    if (origin === undefined) return undefined;
    const own = `the dashboard's own page (${req.headers.host ?? 'its address'})`;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return `Origin ${JSON.stringify(origin)} refused: changes are accepted only from ${own}`;
    }
    // The dashboard serves plain http: its own page's origin is http://<Host>.
    if (url.protocol === 'http:' && url.host.toLowerCase() === (req.headers.host ?? '').toLowerCase()) return undefined;
    return `Origin ${JSON.stringify(origin)} refused: changes are accepted only from ${own}`;
  }
}
