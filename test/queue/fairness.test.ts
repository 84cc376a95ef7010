import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { createQueue } from '../../src/queue/index.js';
import { tempDir } from '../helpers/tmp.js';

test('a tight publish loop on SQLite does not starve a subscription in the same process', async () => {
  const q = await createQueue({ enabled: true, type: 'sqlite', config: { path: join(tempDir(), 'q.db') } });
  assert.ok(q);
  let handled = 0;
  const sub = await q.subscribe('t', 'g', async () => void handled++, { pollIntervalMs: 10 });
  let published = 0;
  const start = Date.now();
  while (Date.now() - start < 1000) {
    await q.publish({ topic: 't', payload: new Uint8Array([1]) });
    published++;
  }
  const handledWhilePublishing = handled;
  await sub.close();
  await q.close();
  assert.ok(published > 50, `published ${published}`);
  // Starved, the subscription handled a handful at most before the loop ended.
  assert.ok(handledWhilePublishing >= 20, `handled ${handledWhilePublishing} of ${published} while the producer ran`);
});
