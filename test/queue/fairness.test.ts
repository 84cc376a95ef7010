import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { createQueue } from '../../src/queue/index.js';
import { tempDir } from '../helpers/tmp.js';

/** Publishes the loop may make before the subscription counts as starved. */
const CAP = 20_000;

// No clock in the assertion: the producer publishes until its own process's
// subscription has handled 20 messages. A subscription starved by the loop
// (publishes settling in microtasks only, so its timers never run) handles
// none, and the loop runs into the cap.
test('a tight publish loop on SQLite does not starve a subscription in the same process', async () => {
  const q = await createQueue({ enabled: true, type: 'sqlite', config: { path: join(tempDir(), 'q.db') } });
  assert.ok(q);
  try {
    let handled = 0;
    await q.subscribe('t', 'g', async () => void handled++, { pollIntervalMs: 10 });
    let published = 0;
    while (handled < 20 && published < CAP) {
      await q.publish({ topic: 't', payload: new Uint8Array([1]) });
      published++;
    }
    assert.ok(handled >= 20, `the subscription handled ${handled} while the producer published ${published}`);
  } finally {
    await q.close();
  }
});
