/**
 * The in-memory file system of the fault tests with an `unlinkAsync` that
 * waits until the test releases (or fails) each unlink, so a test decides
 * when, and in which order, unlinks on the thread pool complete.
 */
import { FaultyFileSystem } from '../../src/storage/faulty.js';

/** The in-memory file system with an `unlinkAsync` that waits until the test releases it. */
export class HeldUnlinks extends FaultyFileSystem {
  readonly held: Array<{ path: string; release(): void; fail(code: string): void }> = [];

  override unlinkAsync = (path: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      this.held.push({
        path,
        release: () => {
          try {
            this.unlink(path);
            resolve();
          } catch (err) {
            reject(err);
          }
        },
        fail: (code) => reject(Object.assign(new Error(`${code}: unlink ${path}`), { code })),
      });
    });
}

/** Whether `p` has settled after the I/O and timers queued so far have run. */
export async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

