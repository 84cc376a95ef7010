/**
 * The damage table, laid out as Prometheus' WAL repair test is (a map of
 * named cases): one row per kind of damage, each changing
 * bytes at a computed position of a known store and stating, as numbers, what
 * survives and what the loss costs. `damage.test.ts` drains the queue over
 * each row; `verify.test.ts` runs `verifyQueue` over the same rows.
 *
 * The store: 185 records of 68 framed bytes (1 length byte, 59 payload bytes,
 * 8 checksum bytes), so exactly 60 fill a 4096-byte segment. Segment 1
 * (records 0–59) is fully committed and reclaimed; segment 2 holds 60–119
 * with 60–69 committed; segment 3 holds 120–179; segment 4, the tail, holds
 * 180–184. A clean drain therefore delivers records 70–184.
 */
import { encodeHeader, decodeHeader, HEADER_SIZE } from '../../../src/diskqueue/format.js';
import { FaultyFileSystem, openQ, segPath, range, val } from './helpers.js';

export const FRAME = 68;
export const PER_SEGMENT = 60;
export const TOTAL = 185;
export const COMMITTED = 70;

/** The payload of record i: 59 bytes. */
export const rec = (i: number) => val(i).padEnd(59, '.');

/** File position of record `j` (0-based within its segment). */
export const at = (j: number) => HEADER_SIZE + j * FRAME;

/** Segment of global record i, and its index in that segment. */
export const where = (i: number) => ({ seg: Math.floor(i / PER_SEGMENT) + 1, j: i % PER_SEGMENT });

/** Builds the store described above on a fresh file system. */
export async function buildStore(): Promise<FaultyFileSystem> {
  const fs = new FaultyFileSystem();
  const q = await openQ(fs);
  await q.addBatch(range(0, TOTAL).map(rec));
  const r = q.reader();
  let last: bigint | undefined;
  for (let i = 0; i < COMMITTED; i++) last = (await r.tryReserve())!.offset;
  await r.commit(last!);
  await q.close();
  return fs;
}

/** Rewrites a segment's header through `edit`, with a valid checksum (for geometry rows). */
function editHeader(fs: FaultyFileSystem, seg: number, edit: (h: ReturnType<typeof header>) => void): void {
  const file = fs.readFile(segPath(seg))!;
  const h = header(file);
  edit(h);
  file.set(encodeHeader(h), 0);
  fs.writeFile(segPath(seg), file);
}

function header(file: Uint8Array) {
  const res = decodeHeader(file.subarray(0, HEADER_SIZE));
  if (!res.ok) throw new Error('header is not valid');
  return res.header;
}

function mutate(fs: FaultyFileSystem, seg: number, fn: (file: Uint8Array) => Uint8Array): void {
  fs.writeFile(segPath(seg), fn(fs.readFile(segPath(seg))!));
}

const setBytes = (pos: number, bytes: number[]) => (f: Uint8Array) => (f.set(bytes, pos), f);
const xor = (pos: number) => (f: Uint8Array) => ((f[pos]! ^= 0x55), f);

export interface DamageRow {
  name: string;
  damage(fs: FaultyFileSystem): void;
  /** Global record indices lost, as half-open ranges. */
  lost: Array<[number, number]>;
  /** Committed records delivered again (a replay), as a half-open range. */
  replayed?: [number, number];
  /** CorruptErrors a full drain sees, and where. */
  events: Array<{ segment: number; position: number; reason: string }>;
  /** Counters after the drain. */
  lostRecords: number;
  lostSegments: number;
  foreignSegments?: number;
  /** lostBytes, when the row pins it. */
  lostBytes?: number;
  /** What `verifyQueue` calls each event, where it differs from the drain's reason. */
  verifyReasons?: string[];
}

const s3 = 3;
const j20 = at(20); // record 140
const rest3: [number, number] = [140, 180];

/** uvarint bytes for a length prefix. */
function uvarint(n: bigint): number[] {
  const out: number[] = [];
  while (n >= 0x80n) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

export const rows: DamageRow[] = [
  {
    name: 'payload byte flipped (middle segment)',
    damage: (fs) => mutate(fs, s3, xor(j20 + 30)),
    lost: [[140, 141]],
    events: [{ segment: 3, position: j20, reason: 'checksum' }],
    lostRecords: 1,
    lostSegments: 0,
    lostBytes: FRAME,
  },
  {
    name: 'checksum byte flipped',
    damage: (fs) => mutate(fs, s3, xor(j20 + FRAME - 1)),
    lost: [[140, 141]],
    events: [{ segment: 3, position: j20, reason: 'checksum' }],
    lostRecords: 1,
    lostSegments: 0,
  },
  {
    name: 'payload byte flipped in the head record (after the commit cursor)',
    damage: (fs) => mutate(fs, 2, xor(at(10) + 5)),
    lost: [[70, 71]],
    events: [{ segment: 2, position: at(10), reason: 'checksum' }],
    lostRecords: 1,
    lostSegments: 0,
  },
  {
    name: 'payload byte flipped in the last record of the tail',
    damage: (fs) => mutate(fs, 4, xor(at(4) + 10)),
    lost: [[184, 185]],
    events: [{ segment: 4, position: at(4), reason: 'checksum' }],
    lostRecords: 1,
    lostSegments: 0,
  },
  {
    name: 'length grown to land exactly on a later record boundary (127: two records)',
    damage: (fs) => mutate(fs, s3, setBytes(j20, uvarint(127n))),
    lost: [[140, 142]],
    events: [{ segment: 3, position: j20, reason: 'checksum' }],
    lostRecords: 2,
    lostSegments: 0,
    lostBytes: 2 * FRAME,
  },
  ...(
    [
      ['length 0', uvarint(0n)],
      ['length 2^31', uvarint(2n ** 31n)],
      ['length 2^63', uvarint(2n ** 63n)],
      ['length 2^64-1', uvarint(2n ** 64n - 1n)],
      ['length as a 10-byte varint (non-canonical 59)', [0xbb, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]],
      ['length with 11 continuation bytes', [...Array(11).fill(0x80), 0x01]],
      ['length one larger, still inside the segment', uvarint(60n)],
      ['length one smaller', uvarint(58n)],
    ] as Array<[string, number[]]>
  ).map(
    ([name, bytes]): DamageRow => ({
      name,
      damage: (fs) => mutate(fs, s3, setBytes(j20, bytes)),
      lost: [rest3],
      events: [{ segment: 3, position: j20, reason: 'length' }],
      lostRecords: 40,
      lostSegments: 0,
      lostBytes: 40 * FRAME,
    }),
  ),
  {
    name: 'torn header in the head segment (checksum bad, magic and version intact): the segment replays from its first record',
    damage: (fs) => mutate(fs, 2, xor(16)), // the write cursor; the commit cursor still lands on record 70's boundary
    lost: [],
    replayed: [60, 70], // a header that fails its checksum vouches for no field, the commit position included
    events: [{ segment: 2, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    // The commit field says 30 more records were consumed than were: it lands
    // on a record boundary, so only the stale checksum tells. Believing it
    // skipped records 70–99 with no event counting them.
    name: 'torn header whose commit cursor moved to a later record boundary (checksum stale): the segment replays, nothing is skipped',
    damage: (fs) => mutate(fs, 2, setBytes(8, [at(40) & 0xff, at(40) >> 8])),
    lost: [],
    replayed: [60, 70],
    events: [{ segment: 2, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
    lostBytes: 0,
  },
  {
    name: 'torn header in a middle segment (checksum field itself)',
    damage: (fs) => mutate(fs, s3, xor(60)),
    lost: [],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    name: 'torn header over a damaged record: the walk stops there',
    damage: (fs) => {
      mutate(fs, s3, xor(60));
      mutate(fs, s3, xor(j20 + 30));
    },
    lost: [rest3],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 40,
    lostSegments: 0,
  },
  {
    name: 'torn header over a damaged record inside the committed prefix',
    damage: (fs) => {
      mutate(fs, 2, xor(60));
      mutate(fs, 2, xor(at(5) + 30)); // record 65, already committed
    },
    replayed: [60, 65],
    lost: [[65, 120]],
    events: [{ segment: 2, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 50, // 70–119: the committed 65–69 were owed to no one
    lostSegments: 0,
    lostBytes: 50 * FRAME,
  },
  {
    name: 'torn header whose commit cursor lands mid-record: the segment and the rest replay',
    damage: (fs) => mutate(fs, 2, setBytes(8, [(at(10) + 1) & 0xff, (at(10) + 1) >> 8])),
    lost: [],
    replayed: [60, 70],
    events: [{ segment: 2, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    name: 'bad magic: the records vouch for themselves and are salvaged',
    damage: (fs) => mutate(fs, s3, xor(0)),
    lost: [],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
    lostBytes: 0,
    verifyReasons: ['header-magic'],
  },
  {
    name: 'bad magic over a damaged record: salvaged up to it, the rest is one event',
    damage: (fs) => {
      mutate(fs, s3, xor(0));
      mutate(fs, s3, xor(j20 + 30));
    },
    lost: [rest3],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 40, // estimated from the bytes behind the walk and the salvaged records' average size
    lostSegments: 0,
    lostBytes: 40 * FRAME,
    verifyReasons: ['header-magic'],
  },
  {
    name: 'segment missing from the middle (file removed while closed)',
    damage: (fs) => fs.remove(segPath(s3)),
    lost: [[120, 180]],
    events: [{ segment: 3, position: 0, reason: 'segment-missing' }],
    lostRecords: 60, // estimated: as many as segment 2 holds
    lostSegments: 1,
    lostBytes: 60 * FRAME,
  },
  {
    name: 'short header (file cut inside the header)',
    damage: (fs) => mutate(fs, s3, (f) => f.slice(0, 40)),
    lost: [[120, 180]],
    events: [{ segment: 3, position: 0, reason: 'segment-short' }],
    lostRecords: 60, // estimated: nothing in it vouches for itself
    lostSegments: 1,
    lostBytes: 60 * FRAME,
  },
  {
    name: 'unknown format version (a future writer: its checksum holds)',
    damage: (fs) => editHeader(fs, s3, (h) => (h.version = 2)),
    lost: [[120, 180]],
    events: [],
    lostRecords: 0,
    lostSegments: 0,
    foreignSegments: 1,
  },
  {
    name: 'version byte flipped (checksum no longer holds): a torn header, not a foreign segment',
    damage: (fs) => mutate(fs, s3, setBytes(40, [2])),
    lost: [],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    // What a power cut leaves when the tail's creation never reached the
    // disk: its records are kept and nothing is reported.
    name: 'header zeroed in the tail segment (records behind it): kept, as after a cut creation',
    damage: (fs) => mutate(fs, 4, setBytes(0, Array(HEADER_SIZE).fill(0))),
    lost: [],
    events: [],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    name: 'header zeroed in a middle segment (records behind it): salvaged, one event',
    damage: (fs) => mutate(fs, s3, setBytes(0, Array(HEADER_SIZE).fill(0))),
    lost: [],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
    lostBytes: 0,
    verifyReasons: ['header-zero'],
  },
  {
    name: 'zero-length last segment (creation cut short): removed silently',
    damage: (fs) => fs.writeFile(segPath(5), new Uint8Array(0)),
    lost: [],
    events: [],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    name: 'all-zero last segment (preallocated, header never landed): removed silently',
    damage: (fs) => fs.writeFile(segPath(5), new Uint8Array(HEADER_SIZE + 4096)),
    lost: [],
    events: [],
    lostRecords: 0,
    lostSegments: 0,
  },
  {
    name: 'zero-length segment in the middle',
    damage: (fs) => mutate(fs, s3, () => new Uint8Array(0)),
    lost: [[120, 180]],
    events: [{ segment: 3, position: 0, reason: 'segment-zero' }],
    lostRecords: 60,
    lostSegments: 1,
  },
  {
    name: 'all-zero segment in the middle',
    damage: (fs) => mutate(fs, s3, (f) => new Uint8Array(f.length)),
    lost: [[120, 180]],
    events: [{ segment: 3, position: 0, reason: 'segment-zero' }],
    lostRecords: 60,
    lostSegments: 1,
  },
  {
    name: 'file shorter than its write cursor (cut inside record 30)',
    damage: (fs) => mutate(fs, s3, (f) => f.slice(0, at(30) + 20)),
    lost: [[150, 180]],
    events: [{ segment: 3, position: at(30), reason: 'truncated' }],
    lostRecords: 30,
    lostSegments: 0,
    lostBytes: 30 * FRAME,
  },
  {
    name: 'file cut inside the committed prefix',
    damage: (fs) => mutate(fs, 2, (f) => f.slice(0, at(5) + 3)),
    lost: [[70, 120]],
    events: [{ segment: 2, position: at(5), reason: 'truncated' }],
    lostRecords: 50,
    lostSegments: 0,
    lostBytes: 50 * FRAME,
  },
  {
    name: 'tail file shorter than its write cursor (cut at a record boundary)',
    damage: (fs) => mutate(fs, 4, (f) => f.slice(0, at(2))),
    lost: [[182, 185]],
    events: [{ segment: 4, position: at(2), reason: 'truncated' }],
    lostRecords: 3,
    lostSegments: 0,
    lostBytes: 3 * FRAME,
  },
  {
    name: 'header claims a capacity that is not the store geometry (valid checksum): salvaged',
    damage: (fs) => editHeader(fs, s3, (h) => (h.capacity = 8192)),
    lost: [],
    events: [{ segment: 3, position: 0, reason: 'header-rebuilt' }],
    lostRecords: 0,
    lostSegments: 0,
    verifyReasons: ['header-insane'],
  },
];

/** What a clean drain of the damaged store delivers for `row`, in order. */
export function expectedValues(row: DamageRow): string[] {
  const lost = (i: number) => row.lost.some(([a, b]) => i >= a && i < b);
  const first = row.replayed ? row.replayed[0] : COMMITTED;
  return range(first, TOTAL).filter((i) => !lost(i)).map(rec);
}

export { where as recordAt };
