/**
 * xxhash64 (seed 0) over bytes, from the `xxhash-wasm` package. Both disk
 * formats checksum with it (docs/FORMAT.md). The WebAssembly module is
 * instantiated once, when this module is first imported.
 */
import xxhash from 'xxhash-wasm';

const api = await xxhash();

/** xxhash64 of `bytes` with seed 0, as an unsigned 64-bit bigint. */
export function xxh64(bytes: Uint8Array): bigint {
  return api.h64Raw(bytes, 0n);
}

