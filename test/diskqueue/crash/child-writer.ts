/**
 * The writer a crash test kills. It opens the queue in `dir`, prints `ready`,
 * then adds `x<i>` for i = start, start + 1, … and prints `A <i>` once each
 * add has resolved. With `commitEvery` > 0 it also consumes: after every
 * `commitEvery` adds it reserves up to that many records, printing `R <i>` for
 * each, then commits the last one and prints `C <i>` once the commit has
 * resolved. Each line is in the pipe before the next call starts, so the
 * parent never misses a line for a call that resolved.
 *
 *   node --import tsx test/diskqueue/crash/child-writer.ts <dir> <perop|every10> <start> <commitEvery>
 */
import { say } from '../../helpers/say.js';
import { DiskQueue, codecs } from '../../../src/diskqueue/index.js';

const [dir, policy, startArg, commitEveryArg] = process.argv.slice(2);
const start = Number(startArg);
const commitEvery = Number(commitEveryArg);

const q = await DiskQueue.open<string>(dir!, {
  codec: codecs.utf8,
  segmentSize: 64 * 1024,
  maxSegments: 0,
  ...(policy === 'every10' ? { syncEvery: 10 } : {}),
});
const r = q.reader();
say('ready');

for (let i = start; ; i++) {
  await q.add(`x${i}`);
  say(`A ${i}`);
  if (commitEvery > 0 && (i - start + 1) % commitEvery === 0) {
    let last: { value: string; offset: bigint } | undefined;
    for (let k = 0; k < commitEvery; k++) {
      const got = await r.tryReserve();
      if (!got) break;
      say(`R ${got.value.slice(1)}`);
      last = got;
    }
    if (last) {
      await r.commit(last.offset);
      say(`C ${last.value.slice(1)}`);
    }
  }
}
