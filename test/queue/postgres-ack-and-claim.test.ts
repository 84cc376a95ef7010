/**
 * The Postgres store's `ackAndClaim` (acks and the next claim in one
 * statement, or one transaction under maxInFlight or a rate limit): the
 * claim sees the lane its acks free and the leases they end, a stale ack is
 * reported as not held, a lease that ran out is not taken by the call that
 * acks it, a failed call writes nothing, concurrent callers never share a
 * delivery and keep each lane in order.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ClaimRequest, Claimed } from '../../src/queue/index.js';
import { MAX_MESSAGE_TIME, MIN_MESSAGE_TIME } from '../../src/queue/index.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, counts, deferred, ids, msg, sleep } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

/**
 * Makes `s`'s first `ack` wait until its next `claim` has completed, so that a
 * side-by-side `ackAndClaim` runs its claim first; returns a count of acks.
 */
function claimBeforeAck(s: PostgresStore): () => number {
  const claimDone = deferred();
  const claim = s.claim.bind(s);
  s.claim = async (...args) => {
    try {
      return await claim(...args);
    } finally {
      claimDone.resolve();
    }
  };
  const ack = s.ack.bind(s);
  let acks = 0;
  s.ack = async (...args) => {
    if (acks++ === 0) await claimDone.promise;
    return ack(...args);
  };
  return () => acks;
}

/**
 * Runs one caller per entry at once on topic t, group g: each claims, then
 * acks what it holds and claims again in one call (or, with `plain`, in an
 * ack and then a claim), until 30 rounds in a row bring nothing. Returns each key's message IDs in the order they were
 * claimed, and how many acks were written (every ack must be: each caller
 * acks only what it holds).
 */
async function ackAndClaimUntilIdle(
  callers: Array<[PostgresStore, Partial<ClaimRequest>, plain?: 'plain']>,
): Promise<{ order: Map<string, string[]>; acked: number }> {
  const order = new Map<string, string[]>();
  let acked = 0;
  const caller = async (s: PostgresStore, extra: Partial<ClaimRequest>, plain: boolean) => {
    let holding: Claimed[] = await s.claim(claimReq('t', 'g', extra));
    for (let idle = 0; idle < 30; ) {
      for (const c of holding) order.set(c.message.key!, [...(order.get(c.message.key!) ?? []), c.message.id]);
      const r = plain
        ? { acked: await s.ack(holding), claimed: await s.claim(claimReq('t', 'g', extra)) }
        : await s.ackAndClaim(holding, claimReq('t', 'g', extra));
      acked += r.acked.length;
      assert.equal(r.acked.length, holding.length);
      holding = r.claimed;
      if (holding.length === 0) {
        idle++;
        await sleep(2);
      } else idle = 0;
    }
  };
  await Promise.all(callers.map(([s, extra, plain]) => caller(s, extra, plain === 'plain')));
  return { order, acked };
}

describe('postgres ackAndClaim', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const opened: PostgresStore[] = [];
  const open = async (schema?: string) => {
    if (schema === undefined) schemas.push((schema = testSchema('aac')));
    const s = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    opened.push(s);
    return s;
  };
  after(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });

  it('acks first, so the claim in the same call takes the next message of the lane the ack freed', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    const m = [msg('t', { key: 'k' }), msg('t', { key: 'k' }), msg('t', { key: 'k' })];
    await s.append(m);
    const [first] = await s.claim(claimReq('t', 'g'));
    assert.deepEqual(ids([first!]), [m[0]!.id]);
    const r = await s.ackAndClaim([first!], claimReq('t', 'g'));
    assert.deepEqual(r.acked, [first!.deliveryId]);
    assert.deepEqual(ids(r.claimed), [m[1]!.id]);
    const r2 = await s.ackAndClaim(r.claimed, claimReq('t', 'g'));
    assert.deepEqual(ids(r2.claimed), [m[2]!.id]);
    const r3 = await s.ackAndClaim(r2.claimed, claimReq('t', 'g'));
    assert.deepEqual(r3, { acked: [r2.claimed[0]!.deliveryId], claimed: [] });
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  it('hands out payloads byte for byte: every byte value, none, and one long enough for many base64 lines', async () => {
    // The claim statements send payloads as base64, whose lines break every 76 characters.
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    const payloads = [Uint8Array.from({ length: 256 }, (_, i) => i), new Uint8Array(0), Uint8Array.from({ length: 5000 }, (_, i) => (i * 7) & 0xff)];
    const m = payloads.map((payload) => msg('t', { key: 'k', payload }));
    await s.append(m);
    let held = await s.claim(claimReq('t', 'g'));
    const got: number[][] = [];
    while (held.length > 0) {
      for (const c of held) got.push([...c.message.payload]);
      held = (await s.ackAndClaim(held, claimReq('t', 'g'))).claimed;
    }
    assert.deepEqual(got, payloads.map((p) => [...p]));
  });

  it('hands out publishedAt and deliverAt to the millisecond, before 1970 too and at the edges of the years 1 to 9999, through claim, ackAndClaim and listMessages', async () => {
    // The claim statements send times as epoch milliseconds.
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    const times: Array<[published: number, deliverAt: number | undefined]> = [
      [Date.UTC(2026, 11, 6, 12, 1, 2, 345), undefined],
      [-1_500, -999],
      [Date.UTC(1999, 0, 1, 0, 0, 0, 1), Date.UTC(2000, 1, 29, 23, 59, 59, 999)],
      [MIN_MESSAGE_TIME, MIN_MESSAGE_TIME],
      [MAX_MESSAGE_TIME, undefined],
    ];
    const m = times.map(([p, d]) => msg('t', { key: 'k', publishedAt: new Date(p), ...(d === undefined ? {} : { deliverAt: new Date(d) }) }));
    await s.append(m);
    const seen = (c: Claimed) => [c.message.publishedAt.getTime(), c.message.deliverAt?.getTime()];
    let held = await s.claim(claimReq('t', 'g'));
    const got: Array<Array<number | undefined>> = [];
    while (held.length > 0) {
      for (const c of held) got.push(seen(c));
      held = (await s.ackAndClaim(held, claimReq('t', 'g'))).claimed;
    }
    assert.deepEqual(got, times);
    const listed = (await s.listMessages('t', { limit: 10 })).messages.map((x) => [x.publishedAt.getTime(), x.deliverAt?.getTime()]);
    assert.deepEqual(listed, times);
  });

  it('the claim beside the acks takes the rows they free and the other heads together in claim order', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    // b1 and b2 in one batch (b2 flagged behind b1), then c1, then x1 at a
    // higher priority.
    const [b1, b2] = [msg('t', { key: 'b' }), msg('t', { key: 'b' })];
    const c1 = msg('t', { key: 'c' });
    await s.append([b1!, b2!]);
    await s.append([c1]);
    const first = await s.claim(claimReq('t', 'g', { max: 1 }));
    assert.deepEqual(ids(first), [b1!.id]);
    // b2, freed, comes before c1, the walk's first row: both are taken.
    const r = await s.ackAndClaim(first, claimReq('t', 'g', { max: 2 }));
    assert.deepEqual(ids(r.claimed), [b2!.id, c1.id]);
    // Freed rows behind a head of higher priority leave room for it.
    const [d1, d2] = [msg('t', { key: 'd' }), msg('t', { key: 'd' })];
    await s.append([d1!, d2!]);
    const d = await s.ackAndClaim(r.claimed, claimReq('t', 'g', { max: 1 }));
    assert.deepEqual(ids(d.claimed), [d1!.id]);
    const x1 = msg('t', { key: 'x', priority: 1 });
    await s.append([x1]);
    const x = await s.ackAndClaim(d.claimed, claimReq('t', 'g', { max: 1 }));
    assert.deepEqual(ids(x.claimed), [x1.id], 'x1 outranks d2, which d1\'s ack freed');
    const last = await s.ackAndClaim(x.claimed, claimReq('t', 'g', { max: 2 }));
    assert.deepEqual(ids(last.claimed), [d2!.id]);
    assert.deepEqual((await s.ack(last.claimed)).length, 1);
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  it('reports an ack that is no longer held as not acked, and acks and claims the rest', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t'), msg('t')]);
    const [a, b] = await s.claim(claimReq('t', 'g', { max: 2 }));
    await s.release([b!]);
    const r = await s.ackAndClaim([a!, b!], claimReq('t', 'g'));
    assert.deepEqual(r.acked, [a!.deliveryId]);
    assert.equal(r.claimed.length, 2);
    assert.equal(r.claimed[0]!.deliveryId, b!.deliveryId);
    assert.notEqual(r.claimed[0]!.claimToken, b!.claimToken);
  });

  it('an ack under a token the store did not hand out is not held, and the claim in the same statement still takes a delivery whose lease ran out', async () => {
    const schema = testSchema('aac');
    schemas.push(schema);
    const s = await open(schema);
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t', { id: 'lost' }), msg('t', { id: 'k1', key: 'k' })]);
    const [lost, k1] = await s.claim(claimReq('t', 'g'));
    assert.deepEqual(ids([lost!, k1!]), ['lost', 'k1']);
    await adminPool.query(`UPDATE "${schema}".deliveries SET lease_until = now() - interval '1 second' WHERE delivery_id = $1`, [lost!.deliveryId]);
    // A keyed ack: the one-statement path (ack-and-claim.sql), its seqs parameter holding a NULL for the forged token.
    for (const claimToken of ['forged', `${k1!.claimToken.split('/')[0]}/not-a-uuid`]) {
      const r = await s.ackAndClaim([{ ...k1!, claimToken }], claimReq('t', 'g', { max: 1 }));
      assert.deepEqual(r.acked, []);
      if (claimToken === 'forged') {
        assert.deepEqual([ids(r.claimed), r.claimed[0]?.recovered], [['lost'], true], 'the expired lease is claimed back');
        assert.equal((await s.ack(r.claimed)).length, 1);
      } else assert.deepEqual(r.claimed, []);
    }
    assert.deepEqual(await s.ack([k1!]), [k1!.deliveryId], 'the real claim still holds k1');
  });

  it('acks a delivery whose lease ran out without claiming it back in the same call', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t')]);
    const [a] = await s.claim(claimReq('t', 'g', { leaseMs: 1 }));
    await sleep(20);
    const r = await s.ackAndClaim([a!], claimReq('t', 'g'));
    assert.deepEqual(r, { acked: [a!.deliveryId], claimed: [] });
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  it('an ack whose lease ran out, taken back by the claim beside it before the ack lands, is acked under the new claim, not handed out again', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t')]);
    const [a] = await s.claim(claimReq('t', 'g', { leaseMs: 1 }));
    await sleep(20);
    // The claim completes first: it recovers the lapsed delivery, and the ack beside it then finds it no longer held.
    const acks = claimBeforeAck(s);
    const r = await s.ackAndClaim([a!], claimReq('t', 'g'));
    assert.deepEqual(r, { acked: [a!.deliveryId], claimed: [] });
    assert.equal(acks(), 2, 'the first ack missed; the second acked it under the new claim');
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  it('an ack whose delivery someone else claimed after it lapsed stays missed, even when the claim beside it takes the delivery back', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t')]);
    const [first] = await s.claim(claimReq('t', 'g', { leaseMs: 1 }));
    await sleep(20);
    const [second] = await s.claim(claimReq('t', 'g', { leaseMs: 1 }));
    assert.equal(second!.attempt, 2);
    await sleep(20);
    claimBeforeAck(s);
    // As if the ack had gone first: the second claim held it then, so the first ack misses, and the claim hands it out again.
    const r = await s.ackAndClaim([first!], claimReq('t', 'g'));
    assert.deepEqual(r.acked, []);
    assert.deepEqual(r.claimed.map((c) => [c.deliveryId, c.attempt]), [[first!.deliveryId, 3]]);
  });

  it('honours maxInFlight after the acks: the leases they end make room in the same call', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t'), msg('t')]);
    const held = await s.claim(claimReq('t', 'g', { max: 2, maxInFlight: 2 }));
    assert.equal(held.length, 2);
    assert.equal((await s.claim(claimReq('t', 'g', { maxInFlight: 2 }))).length, 0);
    const r = await s.ackAndClaim([held[0]!], claimReq('t', 'g', { maxInFlight: 2 }));
    assert.deepEqual(r.acked, [held[0]!.deliveryId]);
    assert.equal(r.claimed.length, 1);
  });

  it('unkeyed acks without maxInFlight go beside the claim: a failed claim leaves the acks written and reported, with nothing claimed', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t'), msg('t')]);
    const [a] = await s.claim(claimReq('t', 'g', { max: 1 }));
    assert.deepEqual(await s.ackAndClaim([a!], claimReq('t', 'g', { leaseMs: 1e300 })), { acked: [a!.deliveryId], claimed: [] });
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
  });

  it('is atomic when the claim depends on the acks (keyed, or maxInFlight): when the claim part fails, the acks are not written either', async () => {
    const s = await open();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t', { key: 'k' }), msg('t', { key: 'j' })]);
    const [a] = await s.claim(claimReq('t', 'g', { max: 1 }));
    // A lease too long for an interval fails the claim part inside the statement or the transaction.
    await assert.rejects(s.ackAndClaim([a!], claimReq('t', 'g', { leaseMs: 1e300 })));
    await assert.rejects(s.ackAndClaim([a!], claimReq('t', 'g', { leaseMs: 1e300, maxInFlight: 5 })));
    assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 0 });
    assert.deepEqual(await s.ack([a!]), [a!.deliveryId]);
  });

  it('concurrent callers on two stores of one schema ack each delivery once, never share a claim, and keep each lane in order', async () => {
    const s1 = await open();
    const s2 = await open(s1.schema);
    await s1.ensureGroup('t', 'g', 'latest');
    const keys = ['a', 'b', 'c', 'd'];
    const published = Array.from({ length: 80 }, (_, i) => msg('t', { key: keys[i % keys.length]! }));
    await s1.append(published);
    const { order, acked } = await ackAndClaimUntilIdle([
      [s1, { max: 2 }],
      [s2, { max: 2 }],
      [s1, { max: 2, maxInFlight: 8 }],
      [s2, { max: 2, maxInFlight: 8 }],
    ]);
    assert.equal(acked, published.length);
    for (const k of keys) assert.deepEqual(order.get(k), published.filter((m) => m.key === k).map((m) => m.id));
    assert.deepEqual(counts(await s1.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });

  it('concurrent callers on a backlog published key by key, in batches (flagged lanes), acking with their claims or alone, ack each delivery once and take each lane in order', async () => {
    const s1 = await open();
    const s2 = await open(s1.schema);
    await s1.ensureGroup('t', 'g', 'latest');
    // Six keys of twelve, key by key, in batches of eight: most rows are
    // flagged behind an earlier row of their batch, a batch's first row of a
    // key behind a row of the batch before is not; two keys carry a higher
    // priority, so freed rows and the walk's heads interleave in claim order.
    const published = ['a', 'b', 'c', 'd', 'e', 'f'].flatMap((key) =>
      Array.from({ length: 12 }, () => msg('t', { key, priority: key === 'c' || key === 'f' ? 1 : 0 })),
    );
    for (let i = 0; i < published.length; i += 8) await s1.append(published.slice(i, i + 8));
    const { order, acked } = await ackAndClaimUntilIdle([
      [s1, { max: 1 }],
      [s2, { max: 3 }],
      [s1, { max: 4 }],
      [s2, { max: 2 }],
      [s1, { max: 2 }, 'plain'],
      [s2, { max: 3 }, 'plain'],
    ]);
    assert.equal(acked, published.length);
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f']) assert.deepEqual(order.get(key), published.filter((m) => m.key === key).map((m) => m.id));
    assert.deepEqual(counts(await s1.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
  });
});
