/** createQueue, registerQueueType and registeredQueueTypes. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { InvalidArgumentError, UnsupportedError } from '../../src/errors.js';
import { createQueue, createStoreQueue, MemoryStore, registeredQueueTypes, registerQueueType } from '../../src/queue/index.js';
import type { Queue, QueueDependencies } from '../../src/queue/index.js';

describe('queue registry', () => {
  it('returns undefined when the config is absent or says enabled: false', async () => {
    assert.equal(await createQueue(undefined), undefined);
    assert.equal(await createQueue(null), undefined);
    assert.equal(await createQueue({ enabled: false, type: 'memory' }), undefined);
    assert.equal(await createQueue(JSON.parse('{"enabled":false,"type":"kafka"}')), undefined);
  });

  it('builds the queue when enabled is omitted; refuses a non-boolean enabled and unknown top-level keys', async () => {
    for (const cfg of [{ type: 'memory' }, JSON.parse('{"type":"memory"}'), { enabled: undefined, type: 'memory' }]) {
      const q = await createQueue(cfg);
      assert.ok(q, JSON.stringify(cfg));
      assert.deepEqual(await q.publish({ topic: 't', id: 'a', payload: new Uint8Array(1) }), ['a']);
      await q.close();
    }
    const invalid = (e: unknown) => e instanceof InvalidArgumentError && e.code === 'ERR_INVALID_ARGUMENT';
    await assert.rejects(createQueue(JSON.parse('{"enabled":"false","type":"memory"}')), invalid);
    await assert.rejects(createQueue(JSON.parse('{"enabled":1,"type":"memory"}')), invalid);
    await assert.rejects(createQueue(JSON.parse('{"enable":true,"type":"memory"}')), (e: unknown) => invalid(e) && /unknown queue config key "enable"/.test((e as Error).message));
    await assert.rejects(createQueue(JSON.parse('[]')), invalid);
  });

  it('builds memory and sqlite queues from JSON-shaped config', async () => {
    const mem = await createQueue(JSON.parse('{"enabled":true,"type":"memory","config":{"maxPayloadBytes":4}}'));
    assert.ok(mem);
    await assert.rejects(mem.publish({ topic: 't', payload: new Uint8Array(5) }), /more than 4/);
    await mem.close();

    const dir = mkdtempSync(join(tmpdir(), 'ferry-registry-'));
    try {
      const cfg = { enabled: true, type: 'sqlite', config: { path: join(dir, 'q.db'), retentionHours: 1, ackedRetentionHours: 1, janitorIntervalMs: 60_000 } };
      const q = (await createQueue(JSON.parse(JSON.stringify(cfg))))!;
      let got = '';
      await q.subscribe('t', 'g', async (d) => void (got = new TextDecoder().decode(d.payload)), { pollIntervalMs: 20 });
      await q.publish({ topic: 't', payload: new TextEncoder().encode('hello') });
      for (let i = 0; i < 200 && got === ''; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(got, 'hello');
      await q.ping();
      await q.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses unknown types, unknown settings and a sqlite config without a path', async () => {
    await assert.rejects(createQueue({ enabled: true, type: 'kafka' }), UnsupportedError);
    await assert.rejects(createQueue({ enabled: true, type: 'memory', config: { retention_hours: 5 } }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'memory', config: { retentionHours: '5' } }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'memory', config: [] }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'memory', config: { retentionHours: 0 } }), InvalidArgumentError);
    await assert.rejects(createQueue({ enabled: true, type: 'sqlite', config: {} }), /path is required/);
  });

  it('registers new types, refusing empty names, missing factories and duplicates; lists them sorted', async () => {
    let seenDeps: QueueDependencies | undefined;
    let seenConfig: unknown;
    registerQueueType('aaa-test', (config, deps): Queue => {
      seenConfig = config;
      seenDeps = deps;
      return createStoreQueue(new MemoryStore());
    });
    assert.throws(() => registerQueueType('', () => createStoreQueue(new MemoryStore())), InvalidArgumentError);
    assert.throws(() => registerQueueType('zzz-test', undefined as never), InvalidArgumentError);
    assert.throws(() => registerQueueType('aaa-test', () => createStoreQueue(new MemoryStore())), /already registered/);
    assert.throws(() => registerQueueType('memory', () => createStoreQueue(new MemoryStore())), /already registered/);
    const types = registeredQueueTypes();
    assert.deepEqual(types, [...types].sort());
    assert.ok(types.includes('aaa-test') && types.includes('memory') && types.includes('sqlite'));
    assert.ok(!types.includes('zzz-test') && !types.includes(''));
    const onError = () => undefined;
    const q = await createQueue({ enabled: true, type: 'aaa-test', config: { raw: true } }, { onError, pool: 'p' });
    assert.ok(q);
    assert.deepEqual(seenConfig, { raw: true });
    assert.equal(seenDeps!.pool, 'p');
    await q.close();
  });
});
