/** Where a popped record's commit goes: the spool that handed it out. */
export interface CommitTarget {
  commit(segment: object, at: number, next: number, epoch: number): Promise<void>;
}

/** What `Spool.pop` hands out: the payload and the commit that retires it. */
export class Popped {
  private commitFn: (() => Promise<void>) | undefined;

  /** @internal Made by `Spool.pop`. */
  constructor(
    /** The record's bytes (a fresh copy the caller owns). */
    readonly data: Uint8Array,
    private readonly target: CommitTarget,
    /** @internal */ readonly seq: number,
    /** @internal */ readonly offset: number,
    /** @internal */ readonly next: number,
    /** @internal */ readonly epoch: number,
    /** @internal The segment the record was read from (compared by identity on commit). */
    readonly segment: object,
  ) {}

  /**
   * Retires this record so it is not delivered again. Idempotent; a no-op
   * once the head has moved past it (committed, skipped as damaged, cut by a
   * rollback) and after close. Resolves once the cursor was written (and, under
   * `commitSync`, fdatasynced); a cursor that cannot be written does not
   * reject, it shows in `spool.cursorError`. A function of its own (it may be
   * passed around unbound), made on first use: a batch committed with
   * `commitBatch` never needs one.
   */
  get commit(): () => Promise<void> {
    return (this.commitFn ??= () => this.target.commit(this.segment, this.offset, this.next, this.epoch));
  }
}
