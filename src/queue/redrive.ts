/**
 * Redriving dead letters: the copies a subscription with `deadLetterTopic`
 * published (dead-letter.ts) are read back from that topic, page by page in
 * publish order, and each is published again to the topic it came from.
 *
 * A copy is read, never consumed: it stays on the dead-letter topic (for the
 * groups that may consume it, and until the janitor purges it). Running a
 * redrive again is safe because the republished message's ID is a function
 * of the copy's ID (`redriveId`) and publishing an existing ID stores nothing.
 */
import { InvalidArgumentError, InvalidNameError } from '../errors.js';
import { requireStoreOp } from './admin.js';
import { HEADER_DLQ_SOURCE_TOPIC } from './dead-letter.js';
import { uuidV5 } from './delivery-id.js';
import { validateName } from './names.js';
import type { RedriveOptions, RedriveResult, Store, StoredMessage } from './types.js';
import { shown } from '../show-value.js';

/** ferry's namespace for redriven message IDs (RFC 9562 §5.5). Fixed forever: changing it would republish every copy redriven before. */
export const REDRIVE_ID_NAMESPACE = '20f41890-7b17-42bf-a8fc-03771b74974b';

/** Header on a redriven message: the ID of the dead-letter copy it was republished from. */
export const HEADER_REDRIVE_FROM = 'x-queue-redrive-from';

/** Headers starting with this are the dead-letter copy's own and are dropped on redrive. */
const DLQ_HEADER_PREFIX = 'x-queue-dlq-';

/** Copies read per `listMessages` call. */
export const REDRIVE_PAGE = 256;

/** A publish of a redrive flushes once its payloads pass this many bytes, so a page of large copies is not one huge append. */
const REDRIVE_BATCH_BYTES = 4 << 20;

/**
 * The ID a dead-letter copy with ID `copyId` is republished under: a UUIDv5
 * of `copyId` in `REDRIVE_ID_NAMESPACE` (36 characters, well under
 * `MAX_ID_LENGTH`).
 */
export function redriveId(copyId: string): string {
  return uuidV5(REDRIVE_ID_NAMESPACE, copyId);
}

/** `RedriveOptions` checked, with the default limit (no cap) applied. */
interface ResolvedRedriveOptions {
  limit: number;
  after: string | undefined;
  filter: RedriveOptions['filter'];
}

/**
 * Checks `opts`. Throws `InvalidArgumentError` for an unknown key, a `limit`
 * that is not an integer ≥ 1, an `after` that is not a non-empty string, or a
 * `filter` that is not a function.
 */
export function resolveRedriveOptions(opts: RedriveOptions | undefined): ResolvedRedriveOptions {
  if (opts === undefined) return { limit: Infinity, after: undefined, filter: undefined };
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw new InvalidArgumentError('redrive options must be an object');
  for (const k of Object.keys(opts)) {
    if (k !== 'limit' && k !== 'after' && k !== 'filter') throw new InvalidArgumentError(`redrive: unknown option ${JSON.stringify(k)} (known: limit, after, filter)`);
  }
  const { limit, after, filter } = opts;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1)) {
    throw new InvalidArgumentError(`redrive: limit must be an integer ≥ 1, got ${shown(limit)}`);
  }
  if (after !== undefined && (typeof after !== 'string' || after === '')) throw new InvalidArgumentError(`redrive: after must be the next cursor of an earlier redrive, got ${shown(after)}`);
  if (filter !== undefined && typeof filter !== 'function') throw new InvalidArgumentError('redrive: filter must be a function');
  return { limit: limit ?? Infinity, after, filter };
}

/**
 * The message `copy` is republished as, or undefined when it cannot be:
 * no source-topic header, a source topic that is not a valid name or is the
 * dead-letter topic itself, or a payload over `maxPayloadBytes`. Key and
 * payload are kept; headers lose every `x-queue-dlq-*` and gain
 * `x-queue-redrive-from`.
 */
export function redrivenMessage(copy: StoredMessage, deadLetterTopic: string, maxPayloadBytes: number, now: Date): StoredMessage | undefined {
  const source = copy.headers?.[HEADER_DLQ_SOURCE_TOPIC];
  if (source === undefined || source === deadLetterTopic) return undefined;
  try {
    validateName('source topic', source);
  } catch (err) {
    if (err instanceof InvalidNameError) return undefined;
    throw err;
  }
  if (copy.payload.byteLength > maxPayloadBytes) return undefined;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(copy.headers ?? {})) if (!k.startsWith(DLQ_HEADER_PREFIX)) headers[k] = v;
  headers[HEADER_REDRIVE_FROM] = copy.id;
  const out: StoredMessage = { id: redriveId(copy.id), topic: source, payload: copy.payload, headers, publishedAt: now };
  if (copy.key !== undefined) out.key = copy.key;
  return out;
}

/** What `redrive` needs from the queue. */
export interface RedriveHost {
  readonly store: Store;
  readonly maxPayloadBytes: number;
  /** Stores messages (IDs and publish times set), retrying transient errors, and wakes their topics' subscribers. */
  append(msgs: StoredMessage[]): Promise<void>;
}

/** See `Queue.redrive`. */
export async function redrive(host: RedriveHost, deadLetterTopic: string, opts?: RedriveOptions): Promise<RedriveResult> {
  validateName('dead-letter topic', deadLetterTopic);
  const { limit, after: start, filter } = resolveRedriveOptions(opts);
  const list = requireStoreOp(host.store, 'listMessages');
  const ids: string[] = [];
  let skipped = 0;
  let batch: StoredMessage[] = [];
  let batchBytes = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const msgs = batch;
    batch = [];
    batchBytes = 0;
    await host.append(msgs);
    for (const m of msgs) ids.push(m.id);
  };
  let after = start;
  let picked = 0;
  do {
    // A page never holds more copies than the limit has left, so a run that
    // reaches its limit does so at a page's end, where that page's cursor
    // lets the next run go on.
    const size = Math.min(REDRIVE_PAGE, limit - picked);
    const page = await list(deadLetterTopic, after === undefined ? { limit: size } : { after, limit: size });
    for (const copy of page.messages) {
      const m = redrivenMessage(copy, deadLetterTopic, host.maxPayloadBytes, new Date());
      if (m === undefined) {
        skipped++;
        continue;
      }
      if (filter !== undefined) {
        let keep: boolean;
        try {
          keep = await filter(copy);
        } catch (err) {
          await flush(); // what was accepted before the throw is republished
          throw err;
        }
        if (!keep) continue;
      }
      batch.push(m);
      picked++;
      batchBytes += m.payload.byteLength;
      if (batchBytes >= REDRIVE_BATCH_BYTES) await flush();
    }
    await flush();
    after = page.next;
  } while (after !== undefined && picked < limit);
  return after === undefined ? { ids, skipped } : { ids, skipped, next: after };
}
