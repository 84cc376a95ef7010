/**
 * The Redis server the tests use (`FERRY_TEST_REDIS_URL`, default the local
 * one), and why Redis tests skip: its reason when the server cannot be
 * reached, which under `CI=true` is an error instead (CI starts Redis).
 */
import { Redis } from 'ioredis';

export const REDIS_URL = process.env.FERRY_TEST_REDIS_URL || 'redis://127.0.0.1:6379';

async function unreachable(): Promise<string | undefined> {
  const c = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.ping();
    return undefined;
  } catch (err) {
    return `Redis at ${REDIS_URL} is unreachable (${(err as Error).message}); set FERRY_TEST_REDIS_URL`;
  } finally {
    c.disconnect();
  }
}

/** Why Redis tests skip, or undefined when Redis answers. */
export const REDIS_SKIP = await unreachable();
if (REDIS_SKIP && process.env.CI === 'true') throw new Error(`CI=true: ${REDIS_SKIP}`);
