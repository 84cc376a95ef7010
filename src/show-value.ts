/**
 * How an error message prints a value a caller passed: as the value it is,
 * so `"1024"` (a string) reads apart from `1024` (a number), and `1n`, `null`,
 * arrays and objects are told apart too. Long renderings are cut. @internal
 */
export function shown(v: unknown): string {
  let s: string;
  if (typeof v === 'string') s = JSON.stringify(v);
  else if (typeof v === 'bigint') s = `${v}n`;
  else if (typeof v === 'function') s = 'a function';
  else if (typeof v === 'symbol') s = v.toString();
  else if (v === undefined || typeof v === 'number' || typeof v === 'boolean' || v === null) s = String(v);
  else {
    try {
      s = JSON.stringify(v) ?? String(v);
    } catch {
      s = Object.prototype.toString.call(v);
    }
  }
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
