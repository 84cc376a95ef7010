/**
 * Whether a handler can see the `AbortSignal` a subscription passes as its
 * second argument.
 *
 * On Node 20 making an `AbortSignal` costs about 2 µs (its constructor
 * swaps the prototype of a fresh `EventTarget`): a third of the engine's
 * own instructions per delivery under callgrind, and garbage besides. A
 * handler written `async (delivery) => …` can never see a second argument,
 * so a subscription gives it none and makes no signal for it; its attempt
 * still aborts as before (`AbortController.abort` makes the signal then).
 *
 * The test is on the handler's source text, and errs towards passing the
 * signal: a handler is taken to ignore it only when its parameter list is
 * empty or one plain name (no default, no destructuring, no rest), and it is
 * an arrow function or its text never says `arguments` or `eval`. Anything
 * else (two parameters, `(...args) =>` wrappers, bound and native functions,
 * whose text hides their parameters) gets the signal.
 */

/** One plain identifier, or nothing: a parameter list with room for exactly the delivery. */
const ONE_PLAIN_NAME = /^\s*(?:[A-Za-z_$][\w$]*)?\s*$/;
/** A leading `name =>` or `async name =>`: an arrow function with one unparenthesised parameter. */
const BARE_ARROW = /^\s*(?:async\s+)?[A-Za-z_$][\w$]*\s*=>/;

/** Whether `handler` may read a second argument (the attempt's signal); see the module comment. */
export function takesSignal(handler: (...args: never[]) => unknown): boolean {
  if (handler.length >= 2) return true;
  const text = Function.prototype.toString.call(handler);
  if (/\[native code\]\s*\}\s*$/.test(text)) return true; // bound or built in: its parameters are not shown
  if (BARE_ARROW.test(text)) return false;
  const open = text.indexOf('(');
  const close = text.indexOf(')', open + 1);
  if (open < 0 || close < 0 || !ONE_PLAIN_NAME.test(text.slice(open + 1, close))) return true;
  const arrow = /^\s*=>/.test(text.slice(close + 1));
  return !arrow && /\b(?:arguments|eval)\b/.test(text);
}
