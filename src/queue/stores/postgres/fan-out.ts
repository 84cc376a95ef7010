/**
 * What the Postgres store's append needs to run as one statement: the
 * groups of each topic it publishes to, remembered with the topic's
 * `groups_version` (migration 8), and append.sql's parameters built from
 * them. A remembered version that is no longer the topic's makes append.sql
 * store nothing; the store then reads the groups again under the topics'
 * locks and forgets what it remembered (see `PostgresStore.append`).
 */
import { deliveryId } from '../../delivery-id.js';
import type { StoredMessage } from '../../types.js';
import { arrayLiteral } from './sql.js';

/** Topics remembered at most; past it the longest-remembered is forgotten (it costs one transaction to read again). */
const MAX_TOPICS = 10_000;

/** A topic's consumer groups as read at one `groups_version`. */
export interface TopicGroups {
  /** `groups_version` of the topic's row when `groups` was read (a bigint, as text). */
  version: string;
  groups: string[];
}

/** A row of groups-of.sql. */
export interface GroupsOfRow {
  topic: string;
  version: string;
  grp: string | null;
}

/** The groups of the topics one store has published to. */
export class TopicGroupsCache {
  readonly #known = new Map<string, TopicGroups>();

  /** What is remembered of every topic of `topics`, or undefined when any is unknown. */
  lookup(topics: readonly string[]): Map<string, TopicGroups> | undefined {
    const out = new Map<string, TopicGroups>();
    for (const t of topics) {
      const g = this.#known.get(t);
      if (g === undefined) return undefined;
      out.set(t, g);
    }
    return out;
  }

  /** Remembers the groups read by groups-of.sql; returns them by topic. */
  remember(rows: readonly GroupsOfRow[]): Map<string, TopicGroups> {
    const read = new Map<string, TopicGroups>();
    for (const r of rows) {
      let g = read.get(r.topic);
      if (!g) read.set(r.topic, (g = { version: r.version, groups: [] }));
      if (r.grp !== null) g.groups.push(r.grp);
    }
    for (const [t, g] of read) {
      this.#known.delete(t);
      if (this.#known.size >= MAX_TOPICS) this.#known.delete(this.#known.keys().next().value!);
      this.#known.set(t, g);
    }
    return read;
  }

  /** Forgets `topics` (their groups changed, or may have). */
  forget(topics: Iterable<string>): void {
    for (const t of topics) this.#known.delete(t);
  }
}

/**
 * append.sql's parameters for `msgs` fanned out to `groups` (every topic of
 * `msgs` present), notifying on `channel`. `topics` are the messages'
 * distinct topics. A message ID repeated in `msgs` is fanned out once (the
 * statement stores its first copy).
 */
export function appendValues(msgs: readonly StoredMessage[], topics: readonly string[], groups: Map<string, TopicGroups>, channel: string): unknown[] {
  const fanMsg: string[] = [];
  const fanGroup: string[] = [];
  const fanId: string[] = [];
  const seen = new Set<string>();
  for (const m of msgs) {
    if (seen.has(m.id)) continue;
    seen.add(m.id);
    for (const g of groups.get(m.topic)!.groups) {
      fanMsg.push(m.id);
      fanGroup.push(g);
      fanId.push(deliveryId(m.id, g));
    }
  }
  const offsets: number[] = [];
  let at = 0;
  for (const m of msgs) {
    offsets.push(at);
    at += m.payload.byteLength;
  }
  // Arrays as literals of our own (arrayLiteral says why).
  return [
    arrayLiteral(msgs.map((m) => m.id)),
    arrayLiteral(msgs.map((m) => m.topic)),
    arrayLiteral(msgs.map((m) => m.key)),
    Buffer.concat(msgs.map((m) => m.payload)),
    arrayLiteral(msgs.map((m) => (m.headers === undefined ? null : JSON.stringify(m.headers)))),
    arrayLiteral(msgs.map((m) => m.publishedAt)),
    arrayLiteral(msgs.map((m) => m.deliverAt)),
    arrayLiteral(fanMsg),
    arrayLiteral(fanGroup),
    arrayLiteral(fanId),
    arrayLiteral(topics.filter((t) => groups.get(t)!.groups.length > 0)),
    channel,
    arrayLiteral(offsets),
    arrayLiteral(msgs.map((m) => m.payload.byteLength)),
    arrayLiteral(msgs.map((m) => m.priority ?? 0)),
    arrayLiteral(topics),
    arrayLiteral(topics.map((t) => groups.get(t)!.version)),
  ];
}
