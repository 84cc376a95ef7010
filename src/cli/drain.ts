/**
 * `ferry drain DIR`: delivers every record of the queue, to stdout or to a
 * command, and commits each one only after its delivery succeeded.
 *
 * The loop is reserve → deliver → commit, one batch at a time:
 * - stdout: a batch of records is framed into one buffer and written; the
 *   batch is committed once the write callback reports the bytes handed to the
 *   OS. A failed write (a closed pipe) commits nothing of that batch.
 * - `--exec CMD`: each record is the whole stdin of a fresh `sh -c CMD`, and
 *   is committed only when that process exits 0. With `--exec-batch N`, one
 *   process gets N framed records and all N are committed when it exits 0.
 *
 * A failed delivery stops the drain: its records were reserved but never
 * committed, so closing the queue leaves them at the head for the next drain.
 */
import { CorruptError, type DiskQueue, type Reader, type Reservation } from '../diskqueue/index.js';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, note, noteForeignSegments, openQueue, sleep, summaryLine } from './common.js';
import { DeliveryError, deliveryPlan, DEFAULT_POLL_MS, EXIT_INTERRUPTED, stopOnSignals, type DrainOptions } from './drain-delivery.js';
import { startProgress } from './progress.js';
import { isSpoolDir } from './spool-dir.js';
import { drainSpool } from './drain-spool.js';

/**
 * Reserves up to `count` records (and about `maxBytes` of payload). Damage
 * met on the way has already been stepped past by the queue: it is reported
 * through `onDamage` and the batch goes on.
 */
async function reserveBatch(
  r: Reader<Uint8Array>,
  count: number,
  maxBytes: number,
  onDamage: (err: CorruptError) => void,
): Promise<Reservation<Uint8Array>[]> {
  const out: Reservation<Uint8Array>[] = [];
  let bytes = 0;
  while (out.length < count && bytes < maxBytes) {
    let res: Reservation<Uint8Array> | undefined;
    try {
      res = await r.tryReserve();
    } catch (err) {
      if (!(err instanceof CorruptError)) throw err;
      onDamage(err);
      continue;
    }
    if (!res) break;
    out.push(res);
    bytes += res.value.length;
  }
  return out;
}

/** Runs `ferry drain`; resolves to the exit status. */
export async function drain(dir: string, o: DrainOptions): Promise<number> {
  if (o.execBatch !== undefined && o.exec === undefined) throw new CliError('--exec-batch needs --exec', EXIT_USAGE);
  // An empty command (an unset shell variable) would "deliver" every record to nowhere.
  if (o.exec !== undefined && o.exec.trim() === '') throw new CliError('--exec needs a command', EXIT_USAGE);
  if (await isSpoolDir(dir)) return drainSpool(dir, o);
  const started = performance.now();
  const { deliver, perDelivery, byteLimit } = deliveryPlan(o);

  const stop = stopOnSignals();
  const swallow = () => {}; // a closed stdout shows up in the write callback
  process.stdout.on('error', swallow);

  let damage = 0;
  let lostRecords = 0;
  const onDamage = (err: CorruptError) => {
    damage++;
    lostRecords += err.lostRecords ?? 0;
    note(`ferry: skipped damaged data: ${err.message}`);
  };

  let q: DiskQueue<Uint8Array> | undefined = await openQueue(dir, { create: false, lockTimeoutMs: o.lockTimeout });
  // Segments of an unknown version raise no event of their own: told and counted here, after each open.
  let foreign = noteForeignSegments(dir, q.stats());
  let delivered = 0;
  let bytes = 0;
  const max = o.max ?? Infinity;
  // A bar only makes sense beside output that does not share the terminal.
  const showBar = !o.quiet && !o.follow && (o.exec !== undefined || !process.stdout.isTTY);
  const progress = startProgress('drain', Math.min(max, q.stats().backlog), 'records', showBar);
  let failure: CliError | undefined;
  try {
    let reader = q.reader();
    while (!stop.signal.aborted && delivered < max) {
      const batch = await reserveBatch(reader, Math.min(perDelivery, max - delivered), byteLimit, onDamage);
      if (batch.length === 0) {
        if (!o.follow) break;
        // Idle: let go of the directory so a producer can open it, then look again.
        await q.close();
        q = undefined;
        await sleep(o.pollMs ?? DEFAULT_POLL_MS, stop.signal);
        if (stop.signal.aborted) break;
        try {
          q = await openQueue(dir, { create: false, lockTimeoutMs: Infinity, signal: stop.signal });
        } catch (err) {
          if (stop.signal.aborted) break;
          throw err;
        }
        foreign += noteForeignSegments(dir, q.stats());
        reader = q.reader();
        continue;
      }
      const values = batch.map((b) => b.value);
      try {
        await deliver(values);
      } catch (err) {
        if (!(err instanceof DeliveryError)) throw err;
        const held = batch.length === 1 ? 'the record stays queued' : `those ${batch.length} records stay queued`;
        failure = new CliError(`${err.message}; ${held}; ${delivered} records were delivered and committed before it`);
        break;
      }
      await reader.commit(batch[batch.length - 1]!.offset);
      delivered += batch.length;
      for (const v of values) bytes += v.length;
      progress.update(delivered);
    }
  } catch (err) {
    failure = err instanceof CliError ? err : new CliError(`drain failed: ${describe(err)}; ${delivered} records were delivered and committed before it`);
  } finally {
    progress.stop();
    await q?.close().catch((err) => {
      failure ??= new CliError(`closing the queue failed: ${describe(err)}`);
    });
    stop.dispose();
    process.stdout.off('error', swallow);
  }
  if (failure) throw failure;
  if (!o.quiet) note(summaryLine('drained', delivered, bytes, started));
  if (damage > 0 || foreign > 0) {
    const spans = damage > 0 ? `${damage} damaged span(s) were skipped (${lostRecords} records lost)` : '';
    const dropped = foreign > 0 ? `${foreign} segment(s) of an unknown format version were dropped` : '';
    throw new CliError(`${[spans, dropped].filter(Boolean).join(' and ')}; run ferry stats or ferry verify`, EXIT_FAILED);
  }
  return stop.signal.aborted && !o.follow ? EXIT_INTERRUPTED : 0;
}
