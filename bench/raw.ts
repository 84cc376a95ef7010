/**
 * Raw twins: plain loops of the system calls a queue makes, measured in the
 * same run as the queue figures they stand beside.
 */
import * as fs from 'node:fs';

/** A record of `size` bytes with a fixed pattern. */
export function payload(size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31) & 0xff;
  return b;
}

/**
 * Raw twin of an add under a batched policy: the same two writes per record,
 * the framed record at the tail of a preallocated file and a 64-byte header
 * at offset 0.
 */
export function rawAddRate(path: string, size: number, ms: number): number {
  const fd = fs.openSync(path, 'w+');
  const frame = payload(size + 10);
  const header = payload(64);
  const fileSize = 64 << 20;
  fs.ftruncateSync(fd, fileSize);
  let pos = 64;
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 256; i++) {
      fs.writeSync(fd, frame, 0, frame.length, pos);
      fs.writeSync(fd, header, 0, header.length, 0);
      pos += frame.length;
      if (pos + frame.length > fileSize) pos = 64;
    }
    n += 256;
    now = performance.now();
  }
  fs.closeSync(fd);
  fs.rmSync(path);
  return (n * 1000) / (now - start);
}

/** Raw twin: sequential pwrite of `size`-byte records into a preallocated file. */
export function rawWriteRate(path: string, size: number, ms: number): number {
  const fd = fs.openSync(path, 'w+');
  const buf = payload(size);
  const fileSize = 64 << 20;
  fs.ftruncateSync(fd, fileSize);
  let pos = 0;
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 256; i++) {
      fs.writeSync(fd, buf, 0, size, pos);
      pos += size;
      if (pos + size > fileSize) pos = 0;
    }
    n += 256;
    now = performance.now();
  }
  fs.closeSync(fd);
  fs.rmSync(path);
  return (n * 1000) / (now - start);
}

/** Raw twin: pwrite then fdatasync (on the thread pool) per record. */
export async function rawDurableRate(path: string, size: number, ms: number): Promise<number> {
  const fd = fs.openSync(path, 'w+');
  const buf = payload(size);
  fs.writeSync(fd, new Uint8Array(16 << 20), 0, 16 << 20, 0);
  fs.fdatasyncSync(fd);
  const sync = () => new Promise<void>((res, rej) => fs.fdatasync(fd, (e) => (e ? rej(e) : res())));
  let pos = 0;
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    fs.writeSync(fd, buf, 0, size, pos);
    pos = (pos + size) % (16 << 20);
    await sync();
    n++;
  }
  const rate = (n * 1000) / (performance.now() - start);
  fs.closeSync(fd);
  fs.rmSync(path);
  return rate;
}

