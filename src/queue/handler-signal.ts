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
 * Only an arrow function whose source starts with a parameter list of at
 * most one plain name is taken to ignore the signal. An arrow has no
 * `arguments` of its own, and reading `arguments` or `caller` through the
 * function object throws for it, even in sloppy code; a `function` or a
 * method can reach its arguments in ways its text need not show
 * (`f['argu' + 'ments']`, `g.caller` from a sloppy callee), so it always gets
 * the signal, as do bound and native functions, whose text hides their
 * parameters, and any source this pattern does not read plainly (a comment
 * or an escape in the head, a default, destructuring, a rest parameter).
 */

/**
 * `name =>`, `(name) =>` or `() =>`, `async` or not, at the very start of
 * the source: an arrow function that has at most one parameter, a plain name.
 */
const ONE_NAME_ARROW = /^(?:async\s*)?(?:\(\s*(?:[A-Za-z_$][\w$]*)?\s*\)|[A-Za-z_$][\w$]*)\s*=>/;

/** Whether `handler` may read a second argument (the attempt's signal); see the module comment. */
export function takesSignal(handler: (...args: never[]) => unknown): boolean {
  return handler.length >= 2 || !ONE_NAME_ARROW.test(Function.prototype.toString.call(handler));
}
