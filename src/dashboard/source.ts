/**
 * The dashboard's one view of a `Queue`: every call it makes on the queue
 * API goes through here, so the rest of the dashboard never depends on the
 * exact shape of `listGroups`, `removeGroup`, `pauseGroup`, `resumeGroup`,
 * `redrive`, `listMessages`, the `completed`/`deadLettered` events,
 * `oldestPendingAgeMs` or `paused`.
 *
 * Each of those is looked up when the dashboard starts; a queue without one
 * gets a page without the matching control (`features`), never an error.
 */
import { InvalidArgumentError, UnsupportedError } from '../errors.js';
import { HEADER_DLQ_ATTEMPTS, HEADER_DLQ_ERROR, HEADER_DLQ_GROUP, HEADER_DLQ_SOURCE_TOPIC } from '../queue/dead-letter.js';
import type { Queue, StoredMessage } from '../queue/types.js';

/** One consumer group's counts, as the page shows them. */
export interface GroupRow {
  topic: string;
  group: string;
  pending: number;
  leased: number;
  dead: number;
  /** Milliseconds the longest-waiting due pending delivery has waited (`QueueStats.oldestPendingAgeMs`); null when none is pending or the queue cannot say. */
  oldestPendingAgeMs: number | null;
  /** Whether the group is paused (`QueueStats.paused`); null when the queue does not say. */
  paused: boolean | null;
}

/** One dead-letter copy, cut down for the page. */
export interface DeadLetterRow {
  id: string;
  /** The first `PREVIEW_BYTES` of the payload as UTF-8 (invalid bytes replaced). */
  preview: string;
  /** The payload's full length in bytes. */
  bytes: number;
  headers: Record<string, string>;
  sourceTopic: string | null;
  group: string | null;
  lastError: string | null;
  attempts: number | null;
  /** Milliseconds since the epoch. */
  publishedAt: number;
}

/** A page of dead letters and the cursor of the next one (null at the end). */
export interface DeadLetterPage {
  items: DeadLetterRow[];
  next: string | null;
}

/** What the queue behind the dashboard can do. */
export interface Features {
  groups: boolean;
  deadLetters: boolean;
  redrive: boolean;
  removeGroup: boolean;
  /** Whether groups can be paused and resumed: the queue has `pauseGroup` and `resumeGroup`, and its store has not refused them (`UnsupportedError`) yet. */
  pause: boolean;
  /** Whether completions and dead letters are counted from the queue's events (same process) rather than sampled from stats. */
  events: boolean;
}

/** Payload bytes shown in a preview. */
export const PREVIEW_BYTES = 512;

type AnyFn = (...args: never[]) => unknown;
type Loose = Record<string, unknown>;

function method(obj: unknown, name: string): AnyFn | undefined {
  const f = (obj as Loose | null)?.[name];
  return typeof f === 'function' ? (f as AnyFn).bind(obj) : undefined;
}

function toRow(m: StoredMessage): DeadLetterRow {
  const h = m.headers ?? {};
  const attempts = h[HEADER_DLQ_ATTEMPTS] !== undefined ? Number(h[HEADER_DLQ_ATTEMPTS]) : NaN;
  return {
    id: m.id,
    preview: Buffer.from(m.payload.buffer, m.payload.byteOffset, Math.min(m.payload.byteLength, PREVIEW_BYTES)).toString('utf8'),
    bytes: m.payload.byteLength,
    headers: { ...h },
    sourceTopic: h[HEADER_DLQ_SOURCE_TOPIC] ?? null,
    group: h[HEADER_DLQ_GROUP] ?? null,
    lastError: h[HEADER_DLQ_ERROR] ?? null,
    attempts: Number.isFinite(attempts) ? attempts : null,
    publishedAt: m.publishedAt instanceof Date ? m.publishedAt.getTime() : Number(m.publishedAt),
  };
}

/**
 * Wraps `queue` for the dashboard. `onOutcome` (optional) is called with
 * `'completed'` or `'deadLettered'` for each event the queue emits, when it
 * emits them.
 */
export class QueueSource {
  readonly features: Features;
  readonly #q: Queue<unknown>;
  readonly #listGroups?: AnyFn;
  readonly #removeGroup?: AnyFn;
  readonly #redrive?: AnyFn;
  readonly #pauseGroup?: AnyFn;
  readonly #resumeGroup?: AnyFn;
  readonly #off: (() => void)[] = [];

  constructor(queue: Queue<unknown>, onOutcome?: (kind: 'completed' | 'deadLettered') => void) {
    this.#q = queue;
    this.#listGroups = method(queue, 'listGroups');
    this.#removeGroup = method(queue, 'removeGroup');
    this.#redrive = method(queue, 'redrive');
    this.#pauseGroup = method(queue, 'pauseGroup');
    this.#resumeGroup = method(queue, 'resumeGroup');
    const on = method(queue, 'on');
    const off = method(queue, 'off');
    let events = false;
    if (on && onOutcome) {
      for (const kind of ['completed', 'deadLettered'] as const) {
        const fn = () => onOutcome(kind);
        (on as (e: string, f: () => void) => void)(kind, fn);
        if (off) this.#off.push(() => (off as (e: string, f: () => void) => void)(kind, fn));
      }
      events = true;
    }
    this.features = {
      groups: !!this.#listGroups,
      deadLetters: !!this.#redrive,
      redrive: !!this.#redrive,
      removeGroup: !!this.#removeGroup,
      pause: !!this.#pauseGroup && !!this.#resumeGroup,
      events,
    };
  }

  /** Every (topic, group) the queue knows, sorted by topic then group. */
  async groups(): Promise<{ topic: string; group: string }[]> {
    if (!this.#listGroups) return [];
    const list = (await (this.#listGroups as () => Promise<unknown[]>)()) ?? [];
    const out = list.map((g) => {
      const o = g as Loose;
      return { topic: String(o.topic), group: String(o.group ?? o.name) };
    });
    return out.sort((a, b) => (a.topic === b.topic ? cmp(a.group, b.group) : cmp(a.topic, b.topic)));
  }

  /** Counts one group's deliveries. */
  async row(topic: string, group: string): Promise<GroupRow> {
    const s = (await this.#q.stats(topic, group)) as unknown as Loose;
    const age = s.oldestPendingAgeMs ?? s.oldestPendingMs;
    return {
      topic,
      group,
      pending: Number(s.pending),
      leased: Number(s.leased),
      dead: Number(s.dead),
      oldestPendingAgeMs: typeof age === 'number' && Number.isFinite(age) && Number(s.pending) > 0 ? age : null,
      paused: typeof s.paused === 'boolean' ? s.paused : null,
    };
  }

  /** Every group's row. */
  async rows(): Promise<GroupRow[]> {
    const gs = await this.groups();
    return Promise.all(gs.map((g) => this.row(g.topic, g.group)));
  }

  /**
   * A page of the dead-letter copies stored on `topic`, in publish order,
   * starting after cursor `after` (null: from the start), read with
   * `Queue.listMessages` (nothing is consumed or changed).
   */
  async deadLetters(topic: string, after: string | null, limit: number): Promise<DeadLetterPage> {
    const page = await this.#q.listMessages(topic, after === null ? { limit } : { after, limit });
    return { items: page.messages.map(toRow), next: page.next ?? null };
  }

  /**
   * Republishes dead letters on `topic` to their source topics: the ones
   * whose ID is in `ids`, or every one when `ids` is `'all'`. Resolves with
   * how many were redriven.
   */
  async redrive(topic: string, ids: string[] | 'all'): Promise<number> {
    if (!this.#redrive) throw new UnsupportedError('this queue cannot redrive dead letters');
    if (ids !== 'all' && ids.length === 0) throw new InvalidArgumentError('no dead letters chosen');
    const wanted = ids === 'all' ? undefined : new Set(ids);
    const opts = wanted ? { filter: (m: StoredMessage) => wanted.has(m.id), limit: wanted.size } : {};
    const res = (await (this.#redrive as (t: string, o: object) => Promise<unknown>)(topic, opts)) as { ids?: unknown[] } | number;
    return typeof res === 'number' ? res : (res.ids?.length ?? 0);
  }

  /** Removes `group` from `topic` with its deliveries; resolves whether there was such a group. */
  async removeGroup(topic: string, group: string): Promise<boolean> {
    if (!this.#removeGroup) throw new UnsupportedError('this queue cannot remove a group');
    return (await (this.#removeGroup as (t: string, g: string) => Promise<unknown>)(topic, group)) === true;
  }

  /**
   * Pauses (`paused` true) or resumes `group` of `topic` for every instance
   * (`Queue.pauseGroup`, `Queue.resumeGroup`). Resolves false when the group
   * is not registered. Once the store refuses with `UnsupportedError`,
   * `features.pause` turns false, so the page stops offering it.
   *
   * @throws UnsupportedError the queue or its store cannot pause a group.
   */
  async setPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    const verb = paused ? 'pause' : 'resume';
    const op = paused ? this.#pauseGroup : this.#resumeGroup;
    if (!op || !this.features.pause) throw new UnsupportedError(`cannot ${verb} group ${group}: this queue cannot pause a group`);
    try {
      return Boolean(await (op as (t: string, g: string) => Promise<unknown>)(topic, group));
    } catch (err) {
      if (!(err instanceof UnsupportedError)) throw err;
      this.features.pause = false;
      throw new UnsupportedError(`cannot ${verb} group ${group}: ${err.message}`, { cause: err });
    }
  }

  /** Stops listening to the queue's events (the queue itself is the caller's). */
  detach(): void {
    for (const f of this.#off.splice(0)) f();
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
