/**
 * How a child process that a crash test kills reports what resolved: each
 * line is in the pipe before the caller's next step starts, so a SIGKILL can
 * never drop the report of something that happened. `process.stdout.write`
 * to a pipe may queue the line in the process (and lose it with it), and a
 * plain `writeSync` fails with EAGAIN when the non-blocking pipe is full
 * under load; this retries until the whole line is written.
 */
import { writeSync } from 'node:fs';

export function say(line: string): void {
  const bytes = Buffer.from(`${line}\n`);
  for (let done = 0; done < bytes.length; ) {
    try {
      done += writeSync(1, bytes, done);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
    }
  }
}
