/**
 * What the adapters need from a queue, and the scrape-time snapshot of the
 * observed groups' stats that every gauge of one scrape shares.
 */
import { InvalidArgumentError } from '../errors.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import type { QueueEventEmitter } from '../queue/events.js';
import { validateName } from '../queue/names.js';
import type { QueueStats } from '../queue/types.js';

/** A queue as the metrics adapters see it: its events and its `stats`. Any `Queue` fits. */
export interface MetricsSource extends QueueEventEmitter {
  stats(topic: string, group: string): Promise<QueueStats>;
}

/** A (topic, consumer group) pair whose gauges are reported. */
export interface ObservedGroup {
  topic: string;
  group: string;
}

/** The pairs to report gauges for: a fixed list, or a function asked at every scrape. */
export type ObservedGroups = readonly ObservedGroup[] | (() => readonly ObservedGroup[] | Promise<readonly ObservedGroup[]>);

/** One pair's stats at a scrape; `stats` is undefined when reading them failed (the queue closed, the store is down). */
export interface GroupSnapshot {
  topic: string;
  group: string;
  stats: QueueStats | undefined;
}

/** Throws `InvalidArgumentError` unless `source` has `stats`, `on` and `off`. */
export function checkSource(source: unknown): MetricsSource {
  const s = source as Partial<MetricsSource> | null;
  if (typeof s !== 'object' || s === null || typeof s.stats !== 'function' || typeof s.on !== 'function' || typeof s.off !== 'function') {
    throw new InvalidArgumentError('metrics: the queue must have stats, on and off');
  }
  return s as MetricsSource;
}

/**
 * Reads the stats of every observed pair once per scrape: calls that arrive
 * while a read is in flight share it, so the four gauges of one scrape cost
 * one `stats` call per pair. A pair whose read fails is reported without
 * gauges, never as a failed scrape.
 */
export function snapshotter(source: MetricsSource, groups: ObservedGroups): () => Promise<GroupSnapshot[]> {
  // A list given as such is checked now: a bad one would otherwise fail every
  // scrape of the whole registry, not only this queue's part of it.
  if (typeof groups !== 'function') checkGroups(groups);
  let inflight: Promise<GroupSnapshot[]> | undefined;
  // A scrape whose `groups` function throws fails alone: the next one asks again.
  const read = async (): Promise<GroupSnapshot[]> => {
    const list = await (typeof groups === 'function' ? groups() : groups);
    checkGroups(list);
    return Promise.all(
      list.map(async ({ topic, group }) => ({ topic, group, stats: await source.stats(topic, group).catch(() => undefined) })),
    );
  };
  return () => {
    if (inflight) return inflight;
    const p = read().finally(() => {
      if (inflight === p) inflight = undefined;
    });
    inflight = p;
    return p;
  };
}

/** Default buckets of the handler-duration histogram, seconds: 1 ms to 60 s. */
export const DEFAULT_DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The histogram's buckets: `buckets`, or the default. Throws `InvalidArgumentError` unless they are finite numbers in increasing order. */
export function checkBuckets(where: string, buckets: unknown = DEFAULT_DURATION_BUCKETS): number[] {
  if (!Array.isArray(buckets) || buckets.length === 0 || !buckets.every((b: unknown, i) => typeof b === 'number' && Number.isFinite(b) && (i === 0 || b > (buckets[i - 1] as number)))) {
    throw new InvalidArgumentError(`${where}: buckets must be a non-empty list of finite numbers in increasing order (seconds)`);
  }
  return buckets as number[];
}

/** Throws `InvalidArgumentError` unless `list` is an array of `{ topic, group }` with string names. */
const GROUP_KEYS = knownKeys<ObservedGroup>({ topic: true, group: true });

function checkGroups(list: unknown): asserts list is readonly ObservedGroup[] {
  const ok = Array.isArray(list) && list.every((g: unknown) => typeof g === 'object' && g !== null && typeof (g as ObservedGroup).topic === 'string' && typeof (g as ObservedGroup).group === 'string');
  if (!ok) throw new InvalidArgumentError('metrics groups must be an array of { topic, group }, or a function returning one');
  // A name no queue accepts would only ever read as a pair without gauges; a key beside them would be ignored.
  for (const g of list) rejectUnknownKeys('metrics groups entry key', g, GROUP_KEYS);
  for (const { topic, group } of list) {
    validateName('metrics groups: topic', topic);
    validateName('metrics groups: group', group);
  }
}

/** Handler time of an event in seconds, or undefined when the handler did not run. */
export function seconds(ms: number | undefined): number | undefined {
  return ms === undefined ? undefined : ms / 1000;
}
