/**
 * The committed diskqueue v1 golden directory: how it is made and what it
 * holds. `FERRY_UPDATE_GOLDEN=1 node --import tsx test/diskqueue/golden/v1.ts`
 * rewrites it; nothing else does, so a change to the bytes shows up as a
 * failing test rather than silent drift.
 */
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DiskQueue } from '../../../src/diskqueue/index.js';

export const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), 'v1');
export const GOLDEN_SEGMENT_SIZE = 4096;

/** The records, in order: empty, ASCII, all 256 byte values, and enough to roll a segment. */
export function goldenRecords(): Uint8Array[] {
  const out: Uint8Array[] = [new Uint8Array(0), new TextEncoder().encode('hello, ferry')];
  out.push(Uint8Array.from({ length: 256 }, (_, i) => i));
  for (let i = 0; i < 30; i++) out.push(new Uint8Array(150).fill(i));
  return out;
}

/** Writes the golden queue into `dir`: all records added, the first two taken (committed). */
export async function writeGolden(dir: string): Promise<void> {
  const q = await DiskQueue.open(dir, { segmentSize: GOLDEN_SEGMENT_SIZE });
  await q.addBatch(goldenRecords());
  const r = q.reader();
  await r.tryTake();
  await r.tryTake();
  await q.close();
}

if (process.env.FERRY_UPDATE_GOLDEN === '1' && process.argv[1] === fileURLToPath(import.meta.url)) {
  const tmp = `${GOLDEN_DIR}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  await writeGolden(tmp);
  rmSync(GOLDEN_DIR, { recursive: true, force: true });
  cpSync(tmp, GOLDEN_DIR, { recursive: true });
  rmSync(tmp, { recursive: true, force: true });
  console.log(`wrote ${GOLDEN_DIR}`);
}
