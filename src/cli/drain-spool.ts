/**
 * `ferry drain` on a spool directory: pop a batch, deliver it (stdout or
 * `--exec`), then commit it with one cursor write. A failed delivery
 * stops the drain and commits nothing of its batch: those records are the
 * head of the spool for the next drain. Damage met on the way was dropped and
 * counted by the spool; it is reported and the drain goes on.
 */
import { isFerryError } from '../errors.js';
import type { Spool } from '../spool/index.js';
import { CliError, EXIT_FAILED, describe, note, sleep, summaryLine } from './common.js';
import { DeliveryError, deliveryPlan, DEFAULT_POLL_MS, EXIT_INTERRUPTED, stopOnSignals, type DrainOptions } from './drain-delivery.js';
import { cursorUnwritable, cursorWriteFailed, noteOpenLosses, openSpool } from './spool-dir.js';

/** Runs `ferry drain` on the spool in `dir`; resolves to the exit status. */
export async function drainSpool(dir: string, o: DrainOptions): Promise<number> {
  const started = performance.now();
  const { deliver, perDelivery, byteLimit } = deliveryPlan(o);
  const stop = stopOnSignals();
  const swallow = () => {};
  process.stdout.on('error', swallow);

  let spool: Spool | undefined;
  const max = o.max ?? Infinity;
  let delivered = 0;
  let bytes = 0;
  let damage = 0;
  let failure: CliError | undefined;
  let cursorError: unknown;
  try {
    spool = await openSpool(dir, o.lockTimeout);
    if (spool.cursorError) throw cursorUnwritable(dir, spool.cursorError);
    damage += noteOpenLosses(dir, spool, true);
    while (!stop.signal.aborted && delivered < max) {
      let batch;
      try {
        batch = await spool.popBatch(Math.min(perDelivery, max - delivered), byteLimit);
      } catch (err) {
        if (!isFerryError(err) || err.code === 'ERR_CLOSED') throw err;
        damage++;
        note(`ferry: skipped damaged data: ${describe(err)}`);
        continue;
      }
      if (batch.length === 0) {
        if (!o.follow) break;
        // Commits that never reached the cursor: a reopen would deliver them again, and again. Stop and say so.
        if (spool.cursorError) break;
        // Idle: let go of the directory so a producer can open it, then look again.
        await spool.close();
        spool = undefined;
        await sleep(o.pollMs ?? DEFAULT_POLL_MS, stop.signal);
        if (stop.signal.aborted) break;
        try {
          spool = await openSpool(dir, Infinity, stop.signal);
        } catch (err) {
          if (stop.signal.aborted) break;
          throw err;
        }
        if (spool.cursorError) throw cursorUnwritable(dir, spool.cursorError, delivered);
        damage += noteOpenLosses(dir, spool, true);
        continue;
      }
      const values = batch.map((p) => p.data);
      try {
        await deliver(values);
      } catch (err) {
        if (!(err instanceof DeliveryError)) throw err;
        failure = new CliError(`${err.message}; ${batch.length === 1 ? 'the record stays' : `those ${batch.length} records stay`} queued; ${delivered} records were delivered and committed before it`);
        break;
      }
      await spool.commitBatch(batch); // one cursor write for the batch
      delivered += batch.length;
      for (const v of values) bytes += v.length;
    }
  } catch (err) {
    failure ??= err instanceof CliError ? err : new CliError(`drain failed: ${describe(err)}; ${delivered} records were delivered and committed before it`);
  } finally {
    // Read before close: commits that advanced only in memory are delivered again by the next run.
    cursorError = spool?.cursorError;
    await spool?.close().catch((err) => {
      failure ??= new CliError(`closing the spool failed: ${describe(err)}`);
    });
    stop.dispose();
    process.stdout.off('error', swallow);
  }
  if (failure) throw failure;
  if (!o.quiet) note(summaryLine('drained', delivered, bytes, started));
  if (damage > 0) throw new CliError(`${damage} damaged span(s) were skipped; run ferry stats or ferry verify`, EXIT_FAILED);
  if (cursorError) throw cursorWriteFailed(dir, cursorError);
  return stop.signal.aborted && !o.follow ? EXIT_INTERRUPTED : 0;
}
