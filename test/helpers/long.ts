/**
 * How much a long-running test does. CI runs the short count; `npm run
 * test:long` sets FERRY_LONG=1 and runs the full one (more kills, cuts and
 * fuzz programs). Counts a variable names explicitly win over both.
 */
export const LONG = process.env.FERRY_LONG === '1';

/** `full` under FERRY_LONG=1, else `short`; a set `env` variable (a number) wins. */
export function runs(short: number, full: number, env?: string): number {
  const v = env ? process.env[env] : undefined;
  if (v !== undefined && v !== '') return Number(v);
  return LONG ? full : short;
}
