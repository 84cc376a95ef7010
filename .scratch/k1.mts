import { createStoreQueue } from '/work/wt-keys/src/queue/engine.js';
import { MemoryStore } from '/work/wt-keys/src/queue/stores/memory.js';
import { SqliteStore } from '/work/wt-keys/src/queue/stores/sqlite.js';
for (const mk of [async () => new MemoryStore(), async () => SqliteStore.open({ path: ':memory:' })]) {
  const q = createStoreQueue(await mk());
  let n = 0; let done!: () => void; const p = new Promise<void>((r) => (done = r));
  const N = 200;
  await q.subscribe('t', 'g', async () => { if (++n === N) done(); });
  const t0 = performance.now();
  await q.publish(...Array.from({ length: N }, () => ({ topic: 't', key: 'k', payload: new Uint8Array(1) })));
  await Promise.race([p, new Promise((r) => setTimeout(r, 10000))]);
  console.log(n, performance.now() - t0);
  await q.close();
}
