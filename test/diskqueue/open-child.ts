/**
 * Child of permissions.test.ts: opens the directory in argv[2] with
 * DiskQueue.open and with Spool.open, and prints what each threw, one JSON
 * line each, so the parent can run it as another user.
 */
import { DiskQueue } from '../../src/diskqueue/index.js';
import { Spool } from '../../src/spool/index.js';

async function main(): Promise<void> {
  const dir = process.argv[2]!;
  for (const [format, open] of [
    ['diskqueue', () => DiskQueue.open(dir)],
    ['spool', () => Spool.open(dir)],
  ] as const) {
    try {
      await (await open()).close();
      process.stdout.write(`${JSON.stringify({ format, opened: true })}\n`);
    } catch (e) {
      const err = e as Error & { code?: string };
      process.stdout.write(`${JSON.stringify({ format, name: err.name, code: err.code, message: err.message })}\n`);
    }
  }
}

void main();
