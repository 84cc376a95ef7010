/** The distributed-locker SPI and its three implementations. `pg` and `ioredis` load only when a locker opens a connection. */
export type { AcquireOptions, DistributedLocker, HeldLock } from './types.js';
export { ProcessLocker } from './process.js';
export { PostgresLocker } from './postgres.js';
export type { PostgresLockerOptions } from './postgres.js';
export { RedisLocker } from './redis.js';
export type { RedisLockerOptions } from './redis.js';
