/**
 * Child of permissions.test.ts: opens the directory in argv[2] with
 * DiskQueue.open and with Spool.open, and prints what each threw, one JSON
 * line each, so the parent can run it as another user. With `--as-nobody`
 * (the parent is root, whom no mode refuses) it drops to uid and gid 65534
 * after its modules are loaded, so it needs no read access to the sources.
 */
import { DiskQueue } from '../../src/diskqueue/index.js';
import { Spool } from '../../src/spool/index.js';

async function main(): Promise<void> {
  const dir = process.argv[2]!;
  if (process.argv[3] === '--as-nobody') {
    process.setgid!(65534);
    process.setuid!(65534);
  }
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
