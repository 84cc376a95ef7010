/**
 * The `listMessages` cursor of ferry's own stores: the decimal sequence
 * number of the last message of a page (every store numbers a topic's
 * messages in publish order).
 */
import { InvalidArgumentError } from '../../errors.js';

/** The sequence number `after` names; 0 (before the first) when absent. Throws `InvalidArgumentError` for a cursor no page handed out. */
export function parseSeqCursor(after: string | undefined): number {
  if (after === undefined) return 0;
  if (!/^[0-9]{1,15}$/.test(after)) throw new InvalidArgumentError(`after must be the next cursor of a previous page, got ${JSON.stringify(after)}`);
  return Number(after);
}
