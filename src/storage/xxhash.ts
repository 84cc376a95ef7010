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

/** xxhash64 of `bytes` with seed 0, as a signed 64-bit bigint (compare with `DataView.getBigInt64`). */
export function xxh64Signed(bytes: Uint8Array): bigint {
  return BigInt.asIntN(64, api.h64Raw(bytes, 0n));
}
