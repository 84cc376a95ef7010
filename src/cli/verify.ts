/**
 * `ferry verify DIR`: a read-only check of every segment header and record
 * checksum (`verifyQueue`). Exit 0 when clean, 1 when damage was found, 2
 * when the directory could not be read or is held by a running queue.
 */
import { FerryError, LockedError, verifyQueue, type VerifyReport } from '../diskqueue/index.js';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, formatBytes, note, requireDirectory } from './common.js';
import { startProgress, type Progress } from './progress.js';
import { isSpoolDir } from './spool-dir.js';
import { verifySpool, type SpoolVerifyReport } from '../spool/index.js';

/** Options of `ferry verify`. */
export interface VerifyCommandOptions {
  json?: boolean;
}

/** Runs `ferry verify`; resolves to the exit status. */
export async function verify(dir: string, o: VerifyCommandOptions): Promise<number> {
  await requireDirectory(dir);
  if (await isSpoolDir(dir)) return verifySpoolDir(dir, o);
  let progress: Progress | undefined;
  let report: VerifyReport;
  try {
    report = await verifyQueue(dir, {
      onProgress(done, total) {
        progress ??= startProgress('verify', total, 'bytes');
        progress.update(done);
      },
    });
  } catch (err) {
    if (err instanceof LockedError) throw new CliError(`${dir} is locked: another process has this queue open`, EXIT_USAGE);
    if (err instanceof FerryError) throw new CliError(`cannot verify ${dir}: ${describe(err)}`, EXIT_USAGE);
    throw err;
  } finally {
    progress?.stop();
  }
  process.stdout.write(o.json ? `${JSON.stringify(report)}\n` : humanReport(report));
  if (!report.ok) {
    const lost = report.damage.reduce((n, d) => n + (d.lostRecords ?? 0), 0);
    // A segment of an unknown format version says nothing of its records.
    const uncounted = report.damage.filter((d) => d.lostRecords === undefined).length;
    const more = uncounted > 0 ? `, plus those of ${uncounted} span(s) whose records cannot be counted` : '';
    note(`ferry: ${dir} is damaged: ${report.damage.length} damaged span(s), about ${lost} records lost${more}; the next open repairs it and reports each span once`);
  }
  return report.ok ? 0 : EXIT_FAILED;
}

function humanReport(r: VerifyReport): string {
  const lines = [
    `${r.ok ? 'ok' : 'DAMAGED'}: ${r.segments} segments, ${r.records} intact records (${formatBytes(r.bytes)}), ${r.committedRecords} committed`,
  ];
  for (const d of r.damage) {
    const cost: string[] = [];
    if (d.lostRecords !== undefined) cost.push(`${d.lostRecords} records`);
    if (d.lostBytes !== undefined) cost.push(`${d.lostBytes} bytes`);
    const where = d.lastSegment !== undefined && d.lastSegment > d.segment ? `segments ${d.segment}-${d.lastSegment}` : `segment ${d.segment}`;
    lines.push(`  ${where} at byte ${d.position}: ${d.reason}${cost.length ? ` (loses ${cost.join(', ')})` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

function verifySpoolDir(dir: string, o: VerifyCommandOptions): number {
  let r: SpoolVerifyReport;
  try {
    r = verifySpool(dir);
  } catch (err) {
    if (err instanceof LockedError) throw new CliError(`${dir} is locked: another process has this spool open`, EXIT_USAGE);
    throw new CliError(`cannot verify ${dir}: ${describe(err)}`, EXIT_USAGE);
  }
  if (o.json) {
    process.stdout.write(`${JSON.stringify({ format: 'spool', ...r })}\n`);
  } else {
    const cursor = r.cursor
      ? `cursor at segment ${r.cursor.seq} byte ${r.cursor.offset}`
      : r.cursorFile === 'empty'
        ? 'nothing committed yet'
        : `no valid cursor (${r.cursorFile}; delivery restarts at the oldest segment)`;
    const lines = [`${r.ok ? 'ok' : 'DAMAGED'}: spool, ${r.segments} segments, ${r.records} intact records (${formatBytes(r.bytes)}), ${r.consumed} of them consumed, ${cursor}`];
    for (const d of r.damage) lines.push(`  segment ${d.segment} at byte ${d.position}: ${d.reason} (loses ${d.lostBytes} bytes)`);
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  return r.ok ? 0 : EXIT_FAILED;
}
