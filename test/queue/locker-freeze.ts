/**
 * What a distributed locker does on a network that stops answering (a
 * frozen `TcpProxy`), the same for every locker: calls reject with a
 * transient `IOError` instead of waiting for good, the lease taken before
 * the freeze still stands (another locker cannot take the key), and after
 * the thaw it is given back and the next grant has a larger fence.
 */
import assert from 'node:assert/strict';
import { IOError } from '../../src/errors.js';
import type { DistributedLocker } from '../../src/queue/lockers/types.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { within as withinHang } from '../stores/helpers.js';

/** Hang catcher: generous, only there so a hang fails instead of stalling the run. */
export const HANG_MS = 60_000;
export const within = <T>(p: Promise<T>, what: string): Promise<T> => withinHang(p, what, HANG_MS);

export function isTransientIOError(err: unknown): boolean {
  assert.ok(err instanceof IOError, `expected an IOError, got ${String(err)}`);
  assert.equal(err.transient, true, err.message);
  return true;
}

/** `locker` goes through `proxy`; `direct` shares its backend without it. */
export async function leaseOutlivesFreeze(proxy: TcpProxy, locker: DistributedLocker, direct: DistributedLocker): Promise<void> {
  const held = await locker.acquire('held', 600_000);
  proxy.freeze();
  await within(assert.rejects(locker.acquire('other', 600_000), isTransientIOError), 'acquire');
  await within(assert.rejects(held.release(), isTransientIOError), 'release');
  await within(assert.rejects(Promise.all([locker.acquire('a', 1000), locker.acquire('b', 1000)]), isTransientIOError), 'two acquires at once');

  // Another locker cannot take the key: the lease stands through the freeze.
  const ctl = new AbortController();
  const waiting = direct.acquire('held', 1000, { signal: ctl.signal });
  setTimeout(() => ctl.abort(), 300);
  await assert.rejects(waiting, { code: 'ERR_LOCKED' });

  proxy.thaw();
  await within(held.release(), 'release after the thaw');
  const next = await within(direct.acquire('held', 1000), 'acquire after the release');
  assert.ok(next.fence > held.fence, 'a later grant has a larger fence');
  await next.release();
}
