/**
 * Child of open-files.test.ts, run under `ulimit -n 256`: opens a deep queue
 * with `maxOpenFiles: 32`, drains it with reserve and ack so every segment is
 * reclaimed, adds a segment's worth more, and prints what it saw as JSON.
 */
import { readdirSync } from 'node:fs';
import { DiskQueue } from '../../../src/diskqueue/index.js';

const dir = process.argv[2]!;
const opts = { segmentSize: 4096, maxSegments: 0, maxOpenFiles: 32 };
const q = await DiskQueue.open(dir, opts);
const opened = q.stats();
const r = q.reader();
let delivered = 0;
let bytes = 0;
for (;;) {
  const got = await r.tryReserve();
  if (!got) break;
  delivered++;
  bytes += got.value.length;
  await r.ack(got.offset);
}
const drained = q.stats();
for (let i = 0; i < 3; i++) await q.add(new Uint8Array(3000));
await q.close();
const again = await DiskQueue.open(dir, opts);
const reopened = again.stats();
await again.close();
const files = readdirSync(dir).filter((f) => f.startsWith('data.')).length;
process.stdout.write(JSON.stringify({ opened, drained, reopened, delivered, bytes, files }));
