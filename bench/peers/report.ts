/**
 * Turns the per-round samples into rows: median, range (min–max) and ratio
 * to ferry's median of the same row, with the load averages seen while the
 * row was measured. Prints them as a table, or as one JSON object per line.
 */
import type { Sample } from './common.js';

export interface Row {
  /** `peers.<row>.<system>`, unique per line. */
  name: string;
  row: string;
  system: string;
  unit: string;
  /** Median over the rounds. */
  value: number;
  min: number;
  max: number;
  /** Samples the median is taken over (one per round; jobqueue.publish has one per configuration and round). */
  samples: number;
  /** ferry's median on the same row. */
  baseline?: number;
  /** value / baseline. */
  ratio?: number;
  /** /proc/loadavg (1, 5, 15 min) after the row's last round. */
  load: [number, number, number];
  /** Lowest and highest 1-minute load seen across the row's rounds. */
  load1Range: [number, number];
  /** Medians of the extra figures. */
  extra?: Record<string, number>;
}

export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Which system each row is compared against. */
export const baselineOf = (row: string): string => (row.startsWith('embedded.') ? 'ferry sqlite' : 'ferry postgres');

/**
 * Which row of the baseline system a row is compared against: its own, but
 * a consuming path only one system has (`embedded.consume.<mode>`) against
 * the baseline's `embedded.consume`.
 */
export const baselineRowOf = (row: string): string => (row.startsWith('embedded.consume.') ? 'embedded.consume' : row);

const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-');

export function aggregate(samples: Sample[]): Row[] {
  const groups = new Map<string, Sample[]>();
  for (const s of samples) {
    const k = `${s.name}\u0000${s.system}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k)!.push(s);
  }
  const rows: Row[] = [];
  for (const list of groups.values()) {
    const first = list[0]!;
    const values = list.map((s) => s.value);
    const finite = values.filter((v) => Number.isFinite(v));
    const extraKeys = [...new Set(list.flatMap((s) => Object.keys(s.extra ?? {})))];
    const loads = list.map((s) => s.load[0]);
    rows.push({
      name: `peers.${first.name}.${slug(first.system)}`,
      row: first.name,
      system: first.system,
      unit: first.unit,
      value: median(values),
      min: finite.length ? Math.min(...finite) : NaN,
      max: finite.length ? Math.max(...finite) : NaN,
      samples: list.length,
      load: list[list.length - 1]!.load,
      load1Range: [Math.min(...loads), Math.max(...loads)],
      extra: extraKeys.length ? Object.fromEntries(extraKeys.map((k) => [k, median(list.map((s) => s.extra?.[k] ?? NaN))])) : undefined,
    });
  }
  for (const r of rows) {
    const base = rows.find((b) => b.row === baselineRowOf(r.row) && b.system === baselineOf(r.row));
    if (base && base !== r && Number.isFinite(base.value) && base.value > 0 && Number.isFinite(r.value)) {
      r.baseline = base.value;
      r.ratio = r.value / base.value;
    }
  }
  return rows;
}

export function fmt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '–';
  if (Math.abs(n) >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString('en-US');
  return n.toPrecision(3);
}

export function printRows(rows: Row[], json: boolean, out: (s: string) => void): void {
  if (json) {
    for (const r of rows) out(JSON.stringify(r) + '\n');
    return;
  }
  out(`${'row'.padEnd(30)} ${'system'.padEnd(22)} ${'median'.padStart(10)} ${'range'.padStart(21)} ${'unit'.padEnd(7)} ${'vs ferry'.padStart(8)}  ${'load1'.padStart(9)}  extra\n`);
  for (const r of rows) {
    const extra = r.extra ? Object.entries(r.extra).map(([k, v]) => `${k}=${fmt(v)}`).join(' ') : '';
    out(
      `${r.row.padEnd(30)} ${r.system.padEnd(22)} ${fmt(r.value).padStart(10)} ${`${fmt(r.min)}–${fmt(r.max)}`.padStart(21)} ${r.unit.padEnd(7)} ` +
        `${(r.ratio !== undefined ? r.ratio.toFixed(2) + '×' : '').padStart(8)}  ${`${r.load1Range[0].toFixed(1)}–${r.load1Range[1].toFixed(1)}`.padStart(9)}  ${extra}\n`,
    );
  }
}
