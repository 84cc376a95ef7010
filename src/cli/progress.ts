/**
 * Progress bars for long commands. A bar is drawn on stderr only when stderr
 * is a terminal: piped or redirected stderr gets no control characters, only
 * the summary line.
 */
import cliProgress from 'cli-progress';
import { formatBytes } from './common.js';

/** A running progress display; its methods are no-ops when no bar is shown. */
export interface Progress {
  /** Sets the amount done (same unit as the total). */
  update(done: number): void;
  /** Removes the bar. Call before printing the summary. */
  stop(): void;
}

const NONE: Progress = { update() {}, stop() {} };

/**
 * Starts a bar labelled `label` over `total` units. `unit` decides how
 * amounts are printed. Returns a silent Progress when stderr is not a
 * terminal, when `enabled` is false, or when there is nothing to count.
 */
export function startProgress(label: string, total: number, unit: 'bytes' | 'records', enabled = true): Progress {
  if (!enabled || !process.stderr.isTTY || !(total > 0)) return NONE;
  const show = (n: number) => (unit === 'bytes' ? formatBytes(n) : String(n));
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `${label} [{bar}] {percentage}% | {done} / {all} | eta {eta_formatted}`,
      hideCursor: true,
      clearOnComplete: true,
      fps: 10,
      etaBuffer: 50,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, { done: show(0), all: show(total) });
  return {
    update(done) {
      bar.update(Math.min(done, total), { done: show(done), all: show(total) });
    },
    stop() {
      bar.stop();
    },
  };
}
