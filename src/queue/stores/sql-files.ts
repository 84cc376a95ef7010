/**
 * The `.sql` files of a SQL store, read from the folder of its module (the
 * build copies them beside the compiled code: scripts/copy-assets.mjs). One
 * statement per file, named by what it does; schema migrations are
 * `migrations/NNN_name.sql`, NNN the schema version the file brings a
 * database to. Each file is read once per process, when first asked for.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** One migration file: the schema version it brings a database to, its file name and its text. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** A migration's file name: its version, then words. */
const MIGRATION_FILE = /^\d+_[a-z0-9_]+\.sql$/;

/** The `.sql` files under one folder. */
export class SqlFiles {
  readonly #dir: URL;
  readonly #cache = new Map<string, string>();

  /** `dir`: the folder, as a URL ending in `/` (`new URL('./', import.meta.url)` for the module's own). */
  constructor(dir: URL) {
    this.#dir = dir;
  }

  /**
   * The text of the file at `rel` under the folder.
   * @throws Error (ENOENT) the file is missing: a build that did not copy the assets.
   */
  read(rel: string): string {
    let text = this.#cache.get(rel);
    if (text === undefined) {
      text = readFileSync(new URL(rel, this.#dir), 'utf8');
      this.#cache.set(rel, text);
    }
    return text;
  }

  /** The files of `migrations/`, oldest version first. */
  migrations(): Migration[] {
    return readdirSync(new URL('migrations/', this.#dir))
      .filter((f) => MIGRATION_FILE.test(f))
      .sort()
      .map((f) => ({ version: Number.parseInt(f, 10), name: f, sql: this.read(`migrations/${f}`) }));
  }
}
