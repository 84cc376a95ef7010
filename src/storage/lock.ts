/**
 * One queue per directory: an exclusive, non-blocking `flock` on a descriptor
 * of the directory itself (no lock file), the same lock the Go libraries take,
 * so a Go process and a ferry process exclude each other. The kernel drops it
 * when the holding process dies, so a killed holder never leaves it stale.
 */
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import { LockedError, IOError } from '../errors.js';

const require = createRequire(import.meta.url);
const fsExt = require('fs-ext') as { flockSync(fd: number, flags: string): void };

/** A held directory lock. */
export interface DirectoryLock {
  release(): void;
}

/**
 * Locks `dir`.
 *
 * @throws LockedError another descriptor holds it.
 * @throws IOError the directory cannot be opened (its message names the errno, e.g. `EACCES`) or locked.
 */
export function lockDirectory(dir: string): DirectoryLock {
  let fd: number;
  try {
    fd = fs.openSync(dir, fs.constants.O_RDONLY);
  } catch (err) {
    throw new IOError(`cannot open ${dir} to lock it: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  try {
    fsExt.flockSync(fd, 'exnb');
  } catch (err) {
    fs.closeSync(fd);
    const code = (err as { code?: string }).code;
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') throw new LockedError(`${dir} is locked by another queue`, { cause: err });
    throw new IOError(`cannot lock ${dir}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      fs.closeSync(fd); // closing the last descriptor drops the flock
    },
  };
}
