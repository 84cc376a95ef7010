/**
 * Preallocation behind the seam: fallocate(2) through ferry's small native
 * helper (native/fallocate.c, built on install), or, where it is missing or
 * the file system refuses it, writing zeros. Either way every block of the
 * range is reserved on return, so a full disk fails here with ENOSPC.
 */
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import * as fs from 'node:fs';

interface Native {
  allocate(fd: number, offset: number, length: number): number;
}

const require = createRequire(import.meta.url);

function loadNative(): Native | undefined {
  // src/storage or dist/storage: the build output sits two levels up.
  for (const p of ['../../build/Release/ferry_native.node', '../../../build/Release/ferry_native.node']) {
    try {
      return require(p) as Native;
    } catch {
      // try the next location, then fall back to zero-filling
    }
  }
  return undefined;
}

const native = loadNative();
const errnoNames = new Map<number, string>(Object.entries(constants.errno).map(([name, n]) => [n, name]));
const ZERO_CHUNK = 1 << 20;
let zeros: Uint8Array | undefined;

/** Whether the native fallocate helper is loaded (else preallocation writes zeros). */
export const hasNativeFallocate = native !== undefined;

function zeroFill(fd: number, from: number, to: number): void {
  zeros ??= new Uint8Array(ZERO_CHUNK);
  for (let pos = from; pos < to; ) {
    const n = fs.writeSync(fd, zeros, 0, Math.min(ZERO_CHUNK, to - pos), pos);
    if (n <= 0) throw Object.assign(new Error('short write while preallocating'), { code: 'EIO' });
    pos += n;
  }
}

/** Reserves bytes `[0, length)` of the file behind `fd`; throws the system error (e.g. ENOSPC). */
export function preallocate(fd: number, length: number): void {
  const size = fs.fstatSync(fd).size;
  if (length <= size) return;
  if (native) {
    const err = native.allocate(fd, 0, length);
    if (err === 0) return;
    const code = errnoNames.get(err) ?? `E${err}`;
    if (code !== 'EOPNOTSUPP' && code !== 'ENOSYS' && code !== 'ENOTSUP') {
      throw Object.assign(new Error(`${code}: fallocate failed`), { code, errno: -err, syscall: 'fallocate' });
    }
  }
  zeroFill(fd, size, length);
}
