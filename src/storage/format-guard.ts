/**
 * Which format a directory's files belong to, so that neither open takes the
 * other's directory for an empty one of its own (and then writes into it).
 *
 * The rule: a file is the other format's when its name is one that format
 * writes. A DiskQueue writes `data.` + digits (the Go diskqueue's segment
 * names; any width counts here, not only the canonical one); a spool writes
 * digits + `.seg` and `cursor`. Anything else (a README, a `.gitkeep`, a
 * backup the operator left) belongs to neither and is ignored by both, as
 * the Go libraries ignore it: neither keeps a lock file (the lock is a flock
 * on the directory itself), so there is no lock file to tell apart.
 */
import type { FileSystem } from './fs.js';
import { IOError, WrongFormatError } from '../errors.js';

export type DirFormat = 'diskqueue' | 'spool';

const DISKQUEUE_FILE = /^data\.\d+$/;
const SPOOL_FILE = /^(\d+\.seg|cursor)$/;

/** The names in a listing that are `format`'s files. */
export function filesOf(format: DirFormat, names: readonly string[]): string[] {
  const re = format === 'diskqueue' ? DISKQUEUE_FILE : SPOOL_FILE;
  return names.filter((n) => re.test(n)).sort();
}

/** What is wrong with directory `dir` of files `names` when it holds both a DiskQueue's files and a spool's (which to read would be a guess, and a wrong one hides records); undefined when it does not. */
export function mixedFormats(dir: string, names: string[]): string | undefined {
  const spool = filesOf('spool', names);
  const dq = filesOf('diskqueue', names);
  if (spool.length === 0 || dq.length === 0) return undefined;
  const few = (f: string[]) => f.slice(0, 3).join(', ') + (f.length > 3 ? ', …' : '');
  return `${dir} holds both a DiskQueue (${few(dq)}) and a spool (${few(spool)}); refusing to guess which to read. Move one format's files to a directory of their own.`;
}

const LABEL: Record<DirFormat, { name: string; open: string }> = {
  diskqueue: { name: 'a DiskQueue', open: 'DiskQueue.open' },
  spool: { name: 'a spool', open: 'Spool.open' },
};

/**
 * Throws {@link WrongFormatError} when `dir` holds files of the format other
 * than `own`; call it with the directory locked and before creating anything.
 *
 * @throws WrongFormatError the other format's files are there.
 * @throws IOError the directory could not be listed.
 */
export function refuseOtherFormat(fs: FileSystem, dir: string, own: DirFormat): void {
  let names: string[];
  try {
    names = fs.readdir(dir);
  } catch (err) {
    throw new IOError(`cannot list ${dir}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  const other: DirFormat = own === 'diskqueue' ? 'spool' : 'diskqueue';
  const found = filesOf(other, names);
  if (found.length === 0) return;
  const shown = found.slice(0, 3).join(', ') + (found.length > 3 ? `, … (${found.length} files)` : '');
  throw new WrongFormatError(
    `${dir} holds ${LABEL[other].name} (${shown}), not ${LABEL[own].name}: ${LABEL[own].open} refuses it and wrote nothing; open it with ${LABEL[other].open}, or use another directory`,
    other,
    found.slice(0, 10),
  );
}
