/**
 * The consumer another process runs while a `ferry dashboard` watches the
 * queue: opens the SQLite queue at `db`, consumes `topic`/`group`, completes
 * every message whose payload starts with `ok` and dead-letters the rest to
 * `dlq`, and exits once the group has nothing pending or leased left.
 *
 *   node --import tsx test/dashboard/consumer-child.ts <db> <topic> <group> <dlq>
 */
import { createQueue, permanent } from '../../src/queue/index.js';

const [db, topic, group, dlq] = process.argv.slice(2) as [string, string, string, string];
const queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: db } }))!;
const sub = await queue.subscribe(
  topic,
  group,
  async (d) => {
    const text = Buffer.from(d.payload).toString('utf8');
    if (!text.startsWith('ok')) throw permanent(new Error(`refused ${text}`));
  },
  { deadLetterTopic: dlq, pollIntervalMs: 20 },
);
const deadline = Date.now() + 120_000;
for (;;) {
  const s = await queue.stats(topic, group);
  if (s.pending === 0 && s.leased === 0) break;
  if (Date.now() > deadline) throw new Error(`the consumer did not finish: ${JSON.stringify(s)}`);
  await new Promise((r) => setTimeout(r, 50));
}
await sub.close();
await queue.close();
process.stdout.write(`done\n`);
