/**
 * The `config` block of a `type: 'nats'` queue: where the servers are, how
 * topics map to JetStream streams, and how to log in.
 *
 * Naming: one stream per topic. Each topic gets its own stream (its own Raft
 * group in a cluster, its own limits, retention and replica count), so a hot
 * topic never slows another's writes, a topic is removed by deleting one
 * stream, and a consumer group is one durable consumer with no subject filter
 * to evaluate. The cost is one stream per topic on the servers, which suits
 * the tens-to-hundreds of topics a job queue has, not millions.
 */
import { InvalidArgumentError } from '../../../errors.js';
import { knownKeys, rejectUnknownKeys } from '../../../known-keys.js';
import { MAX_RETENTION_HOURS } from '../../options.js';

/** Default prefix of stream names and subjects. */
export const DEFAULT_STREAM_PREFIX = 'FERRY';
/** Default publish de-duplication window, ms: JetStream's own default (2 minutes). */
export const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;

/** The `config` block of a `nats` queue, as parsed JSON. */
export interface NatsQueueConfig {
  /** Server URLs, e.g. `"nats://127.0.0.1:4222"` or a list of them. Default `127.0.0.1:4222`. */
  servers?: string | string[];
  /** Prefix of every stream name and subject this queue makes: letters, digits, `-` (no `.`, `_`, `*`, `>`), not ending in `-dead` or `-att` (`P-dead.>` and `P-att.>` are prefix `P`'s dead-letter and attempt ledgers). Default `FERRY`. Two queues with one prefix on one account share their topics. */
  streamPrefix?: string;
  /** Copies of each stream in a cluster, 1–5. Default 1. */
  replicas?: number;
  /** How long a published message ID is remembered, ms (the stream's duplicate window); a second publish of an ID within it stores nothing. Default 120000. */
  duplicateWindowMs?: number;
  /** User name, with `password`. */
  user?: string;
  /** Password, with `user`. */
  password?: string;
  /** Authentication token (instead of user and password). */
  token?: string;
  /** Path of a `.creds` file (JWT and NKey seed), for servers in operator mode. */
  credsFile?: string;
  /** Name this connection reports to the server (shown by `nats server report connections`). Default `ferry`. */
  name?: string;
  /** How long messages are kept in each stream, hours, whether or not every group has consumed them. Default: the engine's `retentionHours` (168). */
  retentionHours?: number;
  /** Largest payload accepted by `publish`, bytes. A NATS message carries its headers too, and the server refuses one over its `max_payload` (1 MiB unless configured), so this must leave `NATS_HEADER_ROOM` (8 KiB) below it for the headers, a dead-letter copy's included; a larger value makes opening the queue throw `InvalidArgumentError`. Default: 1 MiB, or the server's `max_payload` less that room if lower. */
  maxPayloadBytes?: number;
  /** Whether to trace publishes and handler attempts. Not supported here yet: `true` is refused. */
  tracing?: boolean;
}

/** Every key of `NatsQueueConfig`; anything else is refused. */
export const NATS_CONFIG_KEYS = knownKeys<NatsQueueConfig>({
  servers: true,
  streamPrefix: true,
  replicas: true,
  duplicateWindowMs: true,
  user: true,
  password: true,
  token: true,
  credsFile: true,
  name: true,
  retentionHours: true,
  maxPayloadBytes: true,
  tracing: true,
});

/** `NatsQueueConfig` checked, with its defaults. */
export interface ResolvedNatsConfig {
  servers: string[];
  streamPrefix: string;
  replicas: number;
  duplicateWindowMs: number;
  retentionHours: number;
  /** Undefined: the default, taken from the server when the queue opens. */
  maxPayloadBytes?: number;
  name: string;
  user?: string;
  password?: string;
  token?: string;
  credsFile?: string;
}

const PREFIX_RE = /^[A-Za-z0-9-]{1,32}$/;

function str(k: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new InvalidArgumentError(`nats queue config: ${k} must be a non-empty string`);
  return v;
}

function num(k: string, v: unknown, min: number, max: number, integer: boolean): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new InvalidArgumentError(`nats queue config: ${k} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * Checks a `nats` config block and applies the defaults. Throws
 * `InvalidArgumentError` for an unknown key, a wrong type or range, both a
 * token and a user, a password without a user, or `tracing: true`.
 */
export function resolveNatsConfig(block: unknown): ResolvedNatsConfig {
  if (block === undefined || block === null) block = {};
  if (typeof block !== 'object' || Array.isArray(block)) throw new InvalidArgumentError('nats queue config must be an object');
  rejectUnknownKeys('nats queue config key', block, NATS_CONFIG_KEYS);
  const c = block as NatsQueueConfig;
  const servers = c.servers === undefined ? ['127.0.0.1:4222'] : Array.isArray(c.servers) ? c.servers.map((s, i) => str(`servers[${i}]`, s)) : [str('servers', c.servers)];
  if (servers.length === 0) throw new InvalidArgumentError('nats queue config: servers is empty');
  const streamPrefix = c.streamPrefix === undefined ? DEFAULT_STREAM_PREFIX : str('streamPrefix', c.streamPrefix);
  if (!PREFIX_RE.test(streamPrefix)) throw new InvalidArgumentError(`nats queue config: streamPrefix ${JSON.stringify(streamPrefix)} must be 1–32 of [A-Za-z0-9-]`);
  // The ledgers of prefix P take the subjects `P-dead.>` and `P-att.>`, which a prefix `P-dead` or `P-att` would use for its topics.
  for (const end of ['-dead', '-att']) {
    if (streamPrefix.toLowerCase().endsWith(end)) throw new InvalidArgumentError(`nats queue config: streamPrefix ${JSON.stringify(streamPrefix)} must not end in "${end}" (the subjects of the prefix without it hold one of its ledgers)`);
  }
  if (c.tracing !== undefined && typeof c.tracing !== 'boolean') throw new InvalidArgumentError('nats queue config: tracing must be a boolean');
  if (c.tracing === true) throw new InvalidArgumentError('nats queue config: tracing is not supported by the nats queue yet');
  const out: ResolvedNatsConfig = {
    servers,
    streamPrefix,
    replicas: c.replicas === undefined ? 1 : num('replicas', c.replicas, 1, 5, true),
    duplicateWindowMs: c.duplicateWindowMs === undefined ? DEFAULT_DUPLICATE_WINDOW_MS : num('duplicateWindowMs', c.duplicateWindowMs, 100, 7 * 24 * 3_600_000, true),
    retentionHours: c.retentionHours === undefined ? 168 : num('retentionHours', c.retentionHours, 0.001, MAX_RETENTION_HOURS, false),
    name: c.name === undefined ? 'ferry' : str('name', c.name),
  };
  if (c.user !== undefined) out.user = str('user', c.user);
  if (c.password !== undefined) out.password = str('password', c.password);
  if (c.token !== undefined) out.token = str('token', c.token);
  if (c.maxPayloadBytes !== undefined) out.maxPayloadBytes = num('maxPayloadBytes', c.maxPayloadBytes, 1, 64 << 20, true);
  if (c.credsFile !== undefined) out.credsFile = str('credsFile', c.credsFile);
  if (out.password !== undefined && out.user === undefined) throw new InvalidArgumentError('nats queue config: password needs user');
  if (out.token !== undefined && out.user !== undefined) throw new InvalidArgumentError('nats queue config: give token or user/password, not both');
  if (out.retentionHours * 3_600_000 < out.duplicateWindowMs) throw new InvalidArgumentError('nats queue config: duplicateWindowMs must not exceed retentionHours');
  return out;
}

