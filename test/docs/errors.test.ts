/**
 * The docs say what the code throws. Every error class the user-facing docs
 * (README.md, docs/*.md) name is one ferry exports; no doc or TSDoc promises
 * a `RangeError` or `TypeError` for ferry's own validation; every error class
 * a doc names has a row below that either triggers the documented call and
 * checks `instanceof` and `code`, or points at the test that does; and each
 * row's claim still reads that way in its doc.
 *
 * docs/ERRORS.md has one section per code, no more and no fewer than
 * `FerryErrorCode` holds, each naming the class that carries the code; and
 * `isFerryError` knows an error of another copy of the module, which
 * `instanceof` does not.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as errors from '../../src/errors.js';
import type { FerryErrorClasses, FerryErrorCode } from '../../src/errors.js';
import { codecs, DiskQueue, packOffset } from '../../src/diskqueue/index.js';
import { createQueue, createStoreQueue, MemoryStore, type SubscribeOptions } from '../../src/queue/index.js';
import { MAX_RECORD_BYTES, Spool, UNBOUNDED } from '../../src/spool/index.js';
import { tempDir } from '../helpers/tmp.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const ERROR_NAME = /\b([A-Z][A-Za-z]*Error)\b/g;

/** Error class names in `text`, `Error` itself aside. */
const namesIn = (text: string) => new Set([...text.matchAll(ERROR_NAME)].map((m) => m[1]!).filter((n) => n !== 'Error'));

/** The comments of a TypeScript source (line and block), where TSDoc lives. */
const commentsOf = (src: string) => [...src.matchAll(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g)].map((m) => m[0]).join('\n');

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

type Row = {
  /** The doc that makes the claim. */
  doc: string;
  /** Text of the claim, which must still be in the doc (whitespace runs are matched loosely). */
  claim: string;
  /** The error class the claim promises. */
  error: keyof typeof errors;
} & (
  /** Runs the documented call; it must throw or reject with `error`. */
  | { trigger: () => unknown }
  /** A test elsewhere triggers it (that test must name the class). */
  | { coveredBy: string }
);

const enc = new TextEncoder();
const noop = async () => undefined;

async function withQueue<T>(fn: (q: ReturnType<typeof createStoreQueue>) => Promise<T>, cfg = {}): Promise<T> {
  const q = createStoreQueue(new MemoryStore(), cfg);
  try {
    return await fn(q);
  } finally {
    await q.close();
  }
}

async function withSpool<T>(opts: Parameters<typeof Spool.open>[1], fn: (s: Spool, dir: string) => Promise<T>): Promise<T> {
  const dir = tempDir();
  const s = await Spool.open(dir, opts);
  try {
    return await fn(s, dir);
  } finally {
    await s.close();
  }
}

const ROWS: Row[] = [
  // README.md
  { doc: 'README.md', claim: 'Every error is a `FerryError` subclass with a stable `code`', error: 'FerryError', trigger: () => { throw new errors.FullError(); } },
  { doc: 'README.md', claim: 'consuming read as one `CorruptError` per event', error: 'CorruptError', coveredBy: 'test/diskqueue/faults/damage.test.ts' },
  {
    doc: 'README.md', claim: 'Give at most one of `noSync` and `syncEvery` > 1, and `syncIntervalMs` only with one of them: anything else is an `InvalidArgumentError`', error: 'InvalidArgumentError',
    trigger: () => DiskQueue.open(join(tempDir(), 'q'), { noSync: true, syncEvery: 10 }),
  },

  // docs/QUEUE.md
  {
    doc: 'docs/QUEUE.md', claim: 'A dead-letter topic equal to the subscribed topic is refused with `DeadLetterLoopError`', error: 'DeadLetterLoopError',
    trigger: () => withQueue((q) => q.subscribe('orders', 'g', noop, { deadLetterTopic: 'orders' })),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'It may be at most `retentionHours` ahead (`ScheduleTooFarError`)', error: 'ScheduleTooFarError',
    trigger: () => withQueue((q) => q.publish({ topic: 't', payload: enc.encode('x'), deliverAt: new Date(Date.now() + 2 * 3_600_000) }), { retentionHours: 1 }),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'characters of `[A-Za-z0-9._-]` (`InvalidNameError`)', error: 'InvalidNameError',
    trigger: () => withQueue((q) => q.publish({ topic: 'bad topic', payload: enc.encode('x') })),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'free of NUL (`InvalidArgumentError`)', error: 'InvalidArgumentError',
    trigger: () => withQueue((q) => q.publish({ topic: 't', key: 'a\0b', payload: enc.encode('x') })),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'a misspelt option is refused with `InvalidArgumentError`', error: 'InvalidArgumentError',
    trigger: () => withQueue((q) => q.subscribe('t', 'g', noop, { concurency: 3 } as SubscribeOptions)),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'payloads at most `maxPayloadBytes` (`PayloadTooLargeError`)', error: 'PayloadTooLargeError',
    trigger: () => withQueue((q) => q.publish({ topic: 't', payload: new Uint8Array(5) }), { maxPayloadBytes: 4 }),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'An `enabled` that is not a boolean, a top-level key other than `enabled`, `type` and `config`, or an unknown setting in the `config` block is refused with `InvalidArgumentError`', error: 'InvalidArgumentError',
    trigger: () => createQueue({ type: 'memory', config: { retention_hours: 1 } }),
  },
  {
    doc: 'docs/QUEUE.md', claim: '`publish` rejects with `CodecError` (the codec\'s own', error: 'CodecError',
    trigger: () => withQueue((q) => q.publish({ topic: 't', payload: 'x' as unknown as Uint8Array }, { codec: { encode: () => { throw new Error('nope'); }, decode: (b: Uint8Array) => b } })),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'a file from a newer ferry is\nrefused with `IOError`', error: 'IOError',
    coveredBy: 'test/queue/sqlite-migration.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'which throws `NoLockerError` before anything is registered', error: 'NoLockerError',
    coveredBy: 'test/queue/clickhouse.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'a message with a non-zero `priority` rejects with `UnsupportedError`', error: 'UnsupportedError',
    coveredBy: 'test/queue/clickhouse-flow-control.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'rejects a waiting `acquire` with `LockedError`', error: 'LockedError',
    coveredBy: 'test/queue/lockers.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'deadline rejects with `ClosedError`', error: 'ClosedError',
    coveredBy: 'test/stores/engine-close-deadline.test.ts',
  },
  {
    doc: 'docs/OPERATIONS.md', claim: 'Until then an open by another user fails with\n  `IOError`', error: 'IOError',
    coveredBy: 'test/queue/postgres.test.ts',
  },
  {
    doc: 'docs/OPERATIONS.md', claim: 'A call past a limit rejects with an `IOError` whose `transient` is true', error: 'IOError',
    coveredBy: 'test/queue/postgres-timeouts.test.ts',
  },
  {
    doc: 'docs/OPERATIONS.md', claim: 'the call rejects at once with\n`ClosedError`', error: 'ClosedError',
    coveredBy: 'test/queue/postgres-timeouts.test.ts',
  },
  {
    doc: 'docs/OPERATIONS.md', claim: 'the store refuses to\nconsume without one (`NoLockerError`)', error: 'NoLockerError',
    coveredBy: 'test/queue/clickhouse.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'an unregistered type with `UnsupportedError`', error: 'UnsupportedError',
    trigger: () => createQueue({ type: 'kafka' }),
  },
  {
    doc: 'docs/QUEUE.md', claim: 'not one of the server\'s own (`pg_…`, `information_schema`)\n(`InvalidArgumentError` otherwise)', error: 'InvalidArgumentError',
    coveredBy: 'test/queue/postgres.test.ts',
  },
  {
    doc: 'docs/OPERATIONS.md', claim: 'Pause and\nResume are refused (`UnsupportedError`', error: 'UnsupportedError',
    coveredBy: 'test/queue/nats.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: '`@opentelemetry/api` not installed, building the queue throws `UnsupportedError`', error: 'UnsupportedError',
    coveredBy: 'test/queue/tracing.test.ts',
  },
  {
    doc: 'docs/QUEUE.md', claim: 'a malformed `tracing` value is refused with `InvalidArgumentError`', error: 'InvalidArgumentError',
    trigger: () => createStoreQueue(new MemoryStore(), { tracing: 'yes' } as never),
  },

  // docs/SPOOL.md
  {
    doc: 'docs/SPOOL.md', claim: '| `FullError` | the append would push the backlog past `maxBytes`', error: 'FullError',
    trigger: () => withSpool({ maxBytes: 100 }, async (s) => {
      await s.append(new Uint8Array(60));
      await s.append(new Uint8Array(60));
    }),
  },
  {
    doc: 'docs/SPOOL.md', claim: '| `ExceedsCapError` (extends `FullError`) | `data.length > maxBytes − 12`', error: 'ExceedsCapError',
    trigger: () => withSpool({ maxBytes: 100 }, (s) => s.append(new Uint8Array(89))),
  },
  {
    doc: 'docs/SPOOL.md', claim: '| `RecordTooLargeError` | `data.length > MAX_RECORD_BYTES`', error: 'RecordTooLargeError',
    // A view that claims to be one byte past the limit, so the test needs no 4 GiB buffer.
    trigger: () => withSpool({ maxBytes: UNBOUNDED }, (s) => s.append(Object.defineProperty(new Uint8Array(1), 'length', { value: MAX_RECORD_BYTES + 1 }))),
  },
  {
    doc: 'docs/SPOOL.md', claim: 'with `LockedError`', error: 'LockedError',
    trigger: () => withSpool({}, (_s, dir) => Spool.open(dir)),
  },
  {
    doc: 'docs/SPOOL.md', claim: 'if (err instanceof ClosedError) return;', error: 'ClosedError',
    trigger: async () => {
      const s = await Spool.open(tempDir());
      await s.close();
      await s.append(enc.encode('late'));
    },
  },
  { doc: 'docs/SPOOL.md', claim: '`sync()` rejects with `GroupLostError`', error: 'GroupLostError', coveredBy: 'test/spool/api.test.ts' },
  { doc: 'docs/SPOOL.md', claim: 'a `CorruptError` whose `reason` is `checksum`', error: 'CorruptError', coveredBy: 'test/spool/faults/crash-table.test.ts' },
  { doc: 'docs/SPOOL.md', claim: 'that one is an `IOError` with cause `ENOENT`', error: 'IOError', coveredBy: 'test/spool/faults/crash-table.test.ts' },

  // docs/DURABILITY.md
  { doc: 'docs/DURABILITY.md', claim: '| data fsync | rejects `IOError`', error: 'IOError', coveredBy: 'test/diskqueue/faults/write-path.test.ts' },
  { doc: 'docs/DURABILITY.md', claim: 'one `CorruptError` per event, ahead of any record', error: 'CorruptError', coveredBy: 'test/diskqueue/faults/damage.test.ts' },
  { doc: 'docs/DURABILITY.md', claim: 'the next `sync()` rejects `GroupLostError`', error: 'GroupLostError', coveredBy: 'test/spool/faults/crash-table.test.ts' },
  {
    doc: 'docs/DURABILITY.md', claim: 'the open is refused with `SegmentSizeMismatchError` and nothing is touched', error: 'SegmentSizeMismatchError',
    trigger: async () => {
      const dir = tempDir();
      const q = await DiskQueue.open(dir, { segmentSize: 4096 });
      await q.add(enc.encode('x'));
      await q.close();
      await DiskQueue.open(dir, { segmentSize: 8192 });
    },
  },
  {
    doc: 'docs/SPOOL.md', claim: '**Misspelt options are refused** with `InvalidArgumentError`', error: 'InvalidArgumentError',
    trigger: () => Spool.open(tempDir(), { maxbytes: 100 } as never),
  },
  { doc: 'docs/CLI.md', claim: 'The library opens refuse the other format\'s directory too\n(`WrongFormatError`)', error: 'WrongFormatError', coveredBy: 'test/storage/wrong-format.test.ts' },
  {
    doc: 'docs/DURABILITY.md', claim: 'the open is refused with `WrongFormatError`, which names them, and nothing is created', error: 'WrongFormatError',
    trigger: async () => {
      const dir = tempDir();
      const s = await Spool.open(dir);
      await s.close();
      await DiskQueue.open(dir);
    },
  },
  {
    doc: 'docs/SPOOL.md', claim: '`open` rejects with\n  `WrongFormatError`, naming the files, before it creates or writes anything', error: 'WrongFormatError',
    trigger: async () => {
      const dir = tempDir();
      const q = await DiskQueue.open(dir);
      await q.add(enc.encode('x'));
      await q.close();
      await Spool.open(dir);
    },
  },
  {
    doc: 'docs/DURABILITY.md', claim: 'A full queue (`maxBytes`, `maxSegments`) refuses with `FullError`', error: 'FullError',
    trigger: async () => {
      const q = await DiskQueue.open(tempDir(), { segmentSize: 4096, maxBytes: 4096 });
      try {
        for (let i = 0; i < 10; i++) await q.add(new Uint8Array(1000));
      } finally {
        await q.close();
      }
    },
  },
  {
    doc: 'docs/DURABILITY.md', claim: 'it stays at the head (`CodecError`) until `skip()` or `requeue()`', error: 'CodecError',
    trigger: async () => {
      const dir = tempDir();
      const raw = await DiskQueue.open(dir);
      await raw.add(enc.encode('{not json'));
      await raw.close();
      const q = await DiskQueue.open(dir, { codec: codecs.json });
      try {
        await q.reader().tryTake();
      } finally {
        await q.close();
      }
    },
  },
  {
    doc: 'docs/DURABILITY.md', claim: '`ClosedError`), and nothing touches the files after it resolves', error: 'ClosedError',
    trigger: async () => {
      const q = await DiskQueue.open(tempDir());
      await q.close();
      await q.add(enc.encode('late'));
    },
  },
];

/** docs/ERRORS.md's sections: the heading names a code and its class. */
const SECTION = /^## `(ERR_[A-Z_]+)` \(`(\w+)`\)$/gm;
const sections = [...read('docs/ERRORS.md').matchAll(SECTION)].map((m) => ({ heading: m[0], code: m[1]!, error: m[2]! as keyof typeof errors }));

/** Where a class no row above triggers is shown to be thrown. */
const ERRORS_MD_PROOF: Partial<Record<keyof typeof errors, Row>> = {
  CorruptError: { doc: 'docs/ERRORS.md', claim: '', error: 'CorruptError', coveredBy: 'test/spool/faults/crash-table.test.ts' },
  IOError: { doc: 'docs/ERRORS.md', claim: '', error: 'IOError', coveredBy: 'test/queue/postgres-timeouts.test.ts' },
  GroupLostError: { doc: 'docs/ERRORS.md', claim: '', error: 'GroupLostError', coveredBy: 'test/spool/api.test.ts' },
  NoLockerError: { doc: 'docs/ERRORS.md', claim: '', error: 'NoLockerError', coveredBy: 'test/queue/clickhouse.test.ts' },
  OffsetError: {
    doc: 'docs/ERRORS.md', claim: '', error: 'OffsetError',
    trigger: async () => {
      const q = await DiskQueue.open(tempDir());
      try {
        await q.add(enc.encode('x'));
        const r = q.reader();
        await r.reserve();
        await r.ack(packOffset(99, 64)); // no reservation there, and past what is committed
      } finally {
        await q.close();
      }
    },
  },
};

// Each section of docs/ERRORS.md claims its code is its class's: the first
// row above that triggers that class proves it again under this doc.
for (const s of sections) {
  const proof = ROWS.find((r) => r.error === s.error && 'trigger' in r) ?? ERRORS_MD_PROOF[s.error];
  assert.ok(proof, `no row proves docs/ERRORS.md's ${s.error}`);
  ROWS.push({ ...proof, doc: 'docs/ERRORS.md', claim: s.heading });
}
ROWS.push({ ...ROWS.find((r) => r.doc === 'README.md' && r.error === 'FerryError')!, doc: 'docs/ERRORS.md', claim: 'Every error ferry throws or rejects with is a `FerryError`' });

const loose = (s: string) => s.replace(/\s+/g, ' ');

describe('documented errors', () => {
  it('every error class a doc names is exported from src/errors.ts', () => {
    for (const doc of DOCS) {
      for (const name of namesIn(read(doc))) {
        assert.ok(name in errors, `${doc} names ${name}, which src/errors.ts does not export`);
        const cls = errors[name as keyof typeof errors] as unknown;
        assert.ok(cls === errors.FerryError || (typeof cls === 'function' && cls.prototype instanceof errors.FerryError), `${name} is a FerryError`);
      }
    }
  });

  it('no doc or TSDoc promises RangeError or TypeError; every error class a comment in src/ names exists', () => {
    const defined = new Set<string>(Object.keys(errors));
    const files = sources(join(root, 'src'));
    for (const f of files) for (const m of read(relative(root, f)).matchAll(/class (\w+Error)\b/g)) defined.add(m[1]!);
    for (const external of ['CommanderError', 'AbortError']) defined.add(external);
    for (const doc of DOCS) assert.doesNotMatch(read(doc), /\b(RangeError|TypeError)\b/, doc);
    for (const f of files) {
      const rel = relative(root, f);
      const comments = commentsOf(read(rel));
      assert.doesNotMatch(comments, /\b(RangeError|TypeError)\b/, rel);
      for (const name of namesIn(comments)) {
        // Bifrost's own identifiers are quoted as upstream names, not ferry classes.
        if (new RegExp(`Bifrost's \`${name}\``).test(comments)) continue;
        assert.ok(defined.has(name), `${rel} names ${name}, which no class in src/ defines`);
      }
    }
  });

  it('every error class a doc names has a row here for that doc', () => {
    for (const doc of DOCS) {
      const covered = new Set(ROWS.filter((r) => r.doc === doc).map((r) => r.error));
      for (const name of namesIn(read(doc))) assert.ok(covered.has(name as keyof typeof errors), `${doc}: no row for ${name}`);
    }
  });

  for (const row of ROWS) {
    it(`${row.doc}: ${row.error} — "${row.claim}"`, async () => {
      assert.ok(loose(read(row.doc)).includes(loose(row.claim)), `${row.doc} no longer says: ${row.claim}`);
      assert.ok(row.claim.includes(row.error), 'the claim names the error');
      const cls = errors[row.error] as unknown as new (...a: never[]) => errors.FerryError;
      if ('coveredBy' in row) {
        const test = read(row.coveredBy);
        assert.match(test, new RegExp(`\\b${row.error}\\b`), `${row.coveredBy} does not name ${row.error}`);
        return;
      }
      let thrown: unknown;
      try {
        await row.trigger();
      } catch (err) {
        thrown = err;
      }
      assert.ok(thrown instanceof cls, `expected ${row.error}, got ${String(thrown)}`);
      assert.ok(thrown instanceof errors.FerryError);
      assert.equal(typeof thrown.code, 'string');
      assert.match(thrown.code, /^ERR_[A-Z_]+$/);
      // The code is the class's own: a fresh instance of the class carries the same one.
      if (row.error !== 'FerryError') assert.equal(thrown.code, codeOf(row.error), `${row.error}'s code`);
    });
  }
});

/**
 * One error of each code, made by the classes of module `m` (this copy of
 * src/errors.ts, or another). The type makes the keys exactly
 * `FerryErrorCode`: a code added to the union without a sample here does not
 * compile.
 */
const SAMPLES: { [C in FerryErrorCode]: (m: typeof errors) => FerryErrorClasses[C] } = {
  ERR_FULL: (m) => new m.FullError(),
  ERR_EXCEEDS_CAP: (m) => new m.ExceedsCapError(),
  ERR_RECORD_TOO_LARGE: (m) => new m.RecordTooLargeError(),
  ERR_CLOSED: (m) => new m.ClosedError(),
  ERR_CORRUPT: (m) => new m.CorruptError({ reason: 'checksum' }),
  ERR_IO: (m) => new m.IOError('x'),
  ERR_LOCKED: (m) => new m.LockedError(),
  ERR_CODEC: (m) => new m.CodecError('x'),
  ERR_SEGMENT_SIZE_MISMATCH: (m) => new m.SegmentSizeMismatchError(4096, 8192),
  ERR_GROUP_LOST: (m) => new m.GroupLostError(),
  ERR_INVALID_NAME: (m) => new m.InvalidNameError('x'),
  ERR_PAYLOAD_TOO_LARGE: (m) => new m.PayloadTooLargeError('x'),
  ERR_SCHEDULE_TOO_FAR: (m) => new m.ScheduleTooFarError('x'),
  ERR_DEAD_LETTER_LOOP: (m) => new m.DeadLetterLoopError(),
  ERR_UNSUPPORTED: (m) => new m.UnsupportedError(),
  ERR_NO_LOCKER: (m) => new m.NoLockerError(),
  ERR_OFFSET: (m) => new m.OffsetError('x'),
  ERR_INVALID_ARGUMENT: (m) => new m.InvalidArgumentError('x'),
  ERR_WRONG_FORMAT: (m) => new m.WrongFormatError('x', 'spool', []),
};
const CODES = Object.keys(SAMPLES) as FerryErrorCode[];

/** The stable code of an error class: the code of its sample. */
function codeOf(name: keyof typeof errors): FerryErrorCode {
  const code = CODES.find((c) => SAMPLES[c](errors).constructor.name === name);
  assert.ok(code, `${name} has no code`);
  return code;
}

describe('docs/ERRORS.md and FerryErrorCode', () => {
  it('has one section for each code, and none for anything else', () => {
    const documented = sections.map((s) => s.code);
    assert.equal(new Set(documented).size, documented.length, 'a code has two sections');
    assert.deepEqual([...documented].sort(), [...CODES].sort());
  });

  it("each section names the class its code's errors are, and every error class has a code", () => {
    for (const s of sections) {
      const e = SAMPLES[s.code as FerryErrorCode](errors);
      assert.equal(e.code, s.code, `${s.code}'s sample`);
      assert.equal(e.constructor.name, s.error, `${s.code}'s class`);
      assert.ok(e instanceof (errors[s.error] as unknown as new (...a: never[]) => errors.FerryError));
      assert.ok(errors.isFerryError(e, s.code as FerryErrorCode));
    }
    const classes = Object.entries(errors).filter(([, v]) => typeof v === 'function' && v.prototype instanceof errors.FerryError).map(([k]) => k);
    assert.deepEqual(classes.sort(), sections.map((s) => s.error).sort());
  });

  it('isFerryError answers for the code asked only, and for nothing that merely looks like a ferry error', () => {
    const full = new errors.FullError();
    assert.ok(errors.isFerryError(full));
    assert.ok(errors.isFerryError(full, 'ERR_FULL'));
    assert.ok(!errors.isFerryError(full, 'ERR_IO'));
    // ExceedsCapError is a FullError to instanceof, and its own code to the guard.
    assert.ok(errors.isFerryError(new errors.ExceedsCapError(), 'ERR_EXCEEDS_CAP'));
    assert.ok(!errors.isFerryError(new errors.ExceedsCapError(), 'ERR_FULL'));
    for (const v of [undefined, null, 'ERR_FULL', 7, new Error('x'), { code: 'ERR_FULL', name: 'FullError', message: 'x' }]) {
      assert.ok(!errors.isFerryError(v), String(v));
    }
    // The brand is not one of the error's own fields.
    assert.deepEqual(Object.getOwnPropertySymbols(full), []);
    assert.ok(!Object.keys(full).some((k) => /brand/i.test(k)));
  });

  it('isFerryError knows an error of another copy of the module; instanceof does not', async () => {
    const url = new URL('../../src/errors.ts', import.meta.url);
    url.search = '?copy=2';
    const other = (await import(url.href)) as typeof errors;
    assert.notEqual(other.FerryError, errors.FerryError, 'the query string loads a second copy');
    for (const code of CODES) {
      const foreign = SAMPLES[code](other);
      assert.equal(foreign instanceof errors.FerryError, false, `${code}: instanceof does not cross copies`);
      assert.ok(errors.isFerryError(foreign), `${code}: the guard does`);
      assert.ok(errors.isFerryError(foreign, code), code);
      assert.ok(other.isFerryError(SAMPLES[code](errors), code), `${code}: and the other way`);
    }
    // asIOError passes another copy's error through instead of wrapping it.
    const closed = new other.ClosedError();
    assert.equal(errors.asIOError('reading', closed), closed);
  });
});
