/** What `Spool.pop` hands out: the payload and the commit that retires it. */
export class Popped {
  /** @internal Made by `Spool.pop`. */
  constructor(
    /** The record's bytes (a fresh copy the caller owns). */
    readonly data: Uint8Array,
    /**
     * Retires this record so it is not delivered again. Idempotent; a no-op
     * once the head has moved past it (committed, skipped as damaged, cut by a
     * rollback) and after close. Resolves once the cursor was written (and, under
     * `commitSync`, fdatasynced); a cursor that cannot be written does not
     * reject, it shows in `spool.cursorError`.
     */
    readonly commit: () => Promise<void>,
    /** @internal */ readonly seq: number,
    /** @internal */ readonly offset: number,
    /** @internal */ readonly next: number,
    /** @internal */ readonly epoch: number,
    /** @internal The segment the record was read from (compared by identity on commit). */
    readonly segment: object,
  ) {}
}
