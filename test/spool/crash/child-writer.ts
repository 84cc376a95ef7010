/**
 * The spool writer a crash test kills. It opens the spool in `dir`, prints
 * `ready`, then loops: appends `x<i>` (per record with `append`, or in
 * groups of 10 with `appendNoSync` + `sync` under `group`) and prints `A <i>`
 * once each is durable; every 7 records it pops and commits up to 7, printing
 * `C <i>` after each commit resolved (under `batch`, appending per record, it
 * takes the 7 with one `popBatch` and commits them with one `commitBatch`,
 * printing their lines once it resolved). Each line is one synchronous write.
 *
 *   node --import tsx test/spool/crash/child-writer.ts <dir> <single|group|batch> <start>
 */
import { say } from '../../helpers/say.js';
import { Spool } from '../../../src/spool/index.js';

const [dir, mode, startArg] = process.argv.slice(2);
const s = await Spool.open(dir!, { segmentBytes: 4096, commitSync: true });
const enc = (i: number) => new TextEncoder().encode(`x${i}`);
say('ready');

for (let i = Number(startArg); ; ) {
  if (mode === 'group') {
    for (let k = 0; k < 10; k++) await s.appendNoSync(enc(i + k));
    await s.sync();
    say(Array.from({ length: 10 }, (_, k) => `A ${i + k}`).join('\n'));
    i += 10;
  } else {
    await s.append(enc(i));
    say(`A ${i}`);
    i++;
  }
  if (i % 7 < (mode === 'group' ? 10 : 1)) {
    if (mode === 'batch') {
      const batch = await s.popBatch(7);
      await s.commitBatch(batch);
      if (batch.length) say(batch.map((p) => `C ${new TextDecoder().decode(p.data).slice(1)}`).join('\n'));
      continue;
    }
    for (let k = 0; k < 7; k++) {
      const p = await s.pop();
      if (!p) break;
      await p.commit();
      say(`C ${new TextDecoder().decode(p.data).slice(1)}`);
    }
  }
}
