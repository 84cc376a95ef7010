/**
 * xxhash64 (seed 0) over bytes, from the `xxhash-wasm` package. Both disk
 * formats checksum with it (docs/FORMAT.md). The WebAssembly module is
 * instantiated once, when this module is first imported.
 *
 * The package's `h64Raw` grows-checks the module's memory through its
 * `buffer` getter, copies the input in, and masks the signed result into an
 * unsigned bigint: on a 256-byte record that costs more than the hash. The
 * read paths hash every record, so this module keeps the instance the
 * package creates (seen through `WebAssembly.instantiate` while it loads)
 * and calls its `xxh64(ptr, len, seed)` export on its memory directly; the
 * signed form ({@link xxh64Signed}) compares with a stored checksum read as
 * a signed 64-bit integer without a mask. Should the package ever stop
 * exposing those exports, everything falls back to `h64Raw`.
 */
import xxhash from 'xxhash-wasm';

type RawXxh64 = (ptr: number, len: number, seed: bigint) => bigint;
/** The little of the WebAssembly API used here (the project's TypeScript libs do not declare it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface Wasm {
  instantiate(...args: unknown[]): Promise<{ instance: { exports: Record<string, unknown> } }>;
  Memory: abstract new (...args: never[]) => WasmMemory;
}
const wasm = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;

let exported: Record<string, unknown> | undefined;
const instantiate = wasm.instantiate;
const api = await (async () => {
  wasm.instantiate = async function (this: unknown, ...args: unknown[]) {
    const made = await instantiate.apply(this, args);
    exported ??= made.instance.exports;
    return made;
  };
  try {
    return await xxhash();
  } finally {
    wasm.instantiate = instantiate;
  }
})();

const raw = typeof exported?.xxh64 === 'function' && exported.mem instanceof wasm.Memory ? (exported.xxh64 as RawXxh64) : undefined;
const memory = raw ? (exported!.mem as WasmMemory) : undefined;
let heap = memory ? new Uint8Array(memory.buffer) : new Uint8Array(0);

/** Copies `bytes` to the start of the module's memory, growing it when needed. */
function load(bytes: Uint8Array): void {
  if (heap.length < bytes.length) {
    memory!.grow(Math.ceil((bytes.length - memory!.buffer.byteLength) / 65536));
    heap = new Uint8Array(memory!.buffer);
  }
  heap.set(bytes);
}

/** xxhash64 of `bytes` with seed 0, as an unsigned 64-bit bigint. */
export function xxh64(bytes: Uint8Array): bigint {
  if (!raw) return api.h64Raw(bytes, 0n);
  load(bytes);
  return BigInt.asUintN(64, raw(0, bytes.length, 0n));
}

/** xxhash64 of `bytes` with seed 0, as a signed 64-bit bigint (compare with `DataView.getBigInt64`). */
export function xxh64Signed(bytes: Uint8Array): bigint {
  if (!raw) return BigInt.asIntN(64, api.h64Raw(bytes, 0n));
  load(bytes);
  return raw(0, bytes.length, 0n);
}

/** @internal Whether the module's own export is called directly (false: the `h64Raw` fallback). */
export const direct = raw !== undefined;
