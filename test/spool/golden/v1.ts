/**
 * The committed spool v1 golden directory: how it is made and what it holds.
 * `FERRY_UPDATE_GOLDEN=1 node --import tsx test/spool/golden/v1.ts` rewrites
 * it; nothing else does, so a change to the bytes fails a test instead of
 * drifting.
 */
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Spool } from '../../../src/spool/index.js';

export const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), 'v1');
/** Small enough that the records span three segments. */
export const GOLDEN_SEGMENT_BYTES = 512;

/** The records, in order: empty, ASCII, all 256 byte values, then eight of 100 bytes. */
export function goldenRecords(): Uint8Array[] {
  const out: Uint8Array[] = [new Uint8Array(0), new TextEncoder().encode('hello, spool')];
  out.push(Uint8Array.from({ length: 256 }, (_, i) => i));
  for (let i = 0; i < 8; i++) out.push(new Uint8Array(100).fill(0xa0 + i));
  return out;
}

/** Writes the golden spool into `dir`: every record appended, the first two popped and committed. */
export async function writeGolden(dir: string): Promise<void> {
  const s = await Spool.open(dir, { segmentBytes: GOLDEN_SEGMENT_BYTES });
  for (const r of goldenRecords()) await s.append(r);
  for (let i = 0; i < 2; i++) await (await s.pop())!.commit();
  await s.close();
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
