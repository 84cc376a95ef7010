/**
 * `takesSignal` (handler-signal.ts): a handler that cannot see a second
 * argument is given no signal; every other one is. Read off the handler's
 * source, so the table covers the ways a handler is written, and a queue
 * shows the signal arrives where it must.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { takesSignal } from '../../src/queue/handler-signal.js';
import { createStoreQueue, MemoryStore } from '../../src/queue/index.js';
import type { Delivery } from '../../src/queue/index.js';
import { waitFor } from '../stores/helpers.js';

type AnyFn = (...args: never[]) => unknown;

describe('takesSignal', () => {
  it('no signal for an arrow function with at most one parameter, a plain name', () => {
    const none: Array<[string, AnyFn]> = [
      ['async arrow', async (d: unknown) => void d],
      ['plain arrow', (d: unknown) => d],
      ['no parameters', async () => undefined],
      // An arrow's `arguments` is its enclosing function's, never its own.
      ['arrow naming arguments', function outer() { return (d: unknown) => [d, arguments]; }()],
    ];
    for (const [what, fn] of none) assert.equal(takesSignal(fn), false, what);
    // Written out too, as a bundler might leave them (`d=>…`, `async d=>…`, `async(d)=>…`).
    for (const source of ['d => d', 'async d=>{}', 'async(d)=>{}', '( d )=>d']) {
      assert.equal(takesSignal(new Function(`return ${source}`)() as AnyFn), false, source);
    }
  });

  it('a signal for every other handler: functions and methods, two parameters, defaults, destructuring, rest, bound and native ones, odd heads', () => {
    const fromSource = (source: string) => new Function(`return ${source}`)() as AnyFn;
    const some: Array<[string, AnyFn]> = [
      ['two parameters', async (d: unknown, s: AbortSignal) => void [d, s]],
      ['a default on the second', fromSource('async (d, s = undefined) => {}')],
      ['a default on the only one', fromSource('async (d = {}) => {}')],
      ['destructured', async ({ id }: { id: string }) => void id],
      ['rest', async (...args: unknown[]) => void args],
      // A function or method can reach its arguments in ways its text need not show.
      ['async function', async function (d: unknown) { return d; }],
      ['named function', async function handle(d: unknown) { return d; }],
      ['method', { async handle(d: unknown) { return d; } }.handle],
      ['reads arguments', function (d: unknown) { return [d, arguments[1]]; }],
      ['sloppy f.arguments', fromSource("function h(d) { return h['argu' + 'ments'][1]; }")],
      ['a parenthesis in a comment first', fromSource('function /*()*/ h(d, ...rest) { return rest[0]; }')],
      ['a computed key with an arrow in it', fromSource("({ [(x) => 'k'](d, ...rest) { return rest[0]; } })[\"(x) => 'k'\"]")],
      ['a comment in the parameters', fromSource('async (d /* , signal */) => {}')],
      ['an escape in the parameter', fromSource('async (\\u0064) => {}')],
      ['bound', (async (d: unknown) => void d).bind(null)],
      ['native', Object as unknown as AnyFn],
    ];
    for (const [what, fn] of some) assert.equal(takesSignal(fn), true, what);
  });

  it('through a queue: each kind of handler gets the signal it can see, and one that cannot see it still runs', async () => {
    const q = createStoreQueue(new MemoryStore(), { onError: (err) => assert.fail(String(err)) });
    const seen = new Map<string, unknown>();
    try {
      const kinds: Array<[string, (d: Delivery) => Promise<void>]> = [
        ['two', async (d: Delivery, s?: AbortSignal) => void seen.set(d.topic, s)],
        ['rest', async (...args: unknown[]) => void seen.set((args[0] as Delivery).topic, args[1])],
        ['arguments', async function (d: Delivery) { seen.set(d.topic, arguments[1]); }],
        ['one', async (d: Delivery) => void seen.set(d.topic, 'ran')],
      ];
      for (const [topic, handler] of kinds) await q.subscribe(topic, 'g', handler as (d: Delivery) => Promise<void>, { startFrom: 'earliest' });
      for (const [topic] of kinds) await q.publish({ topic, payload: new Uint8Array([1]) });
      await waitFor(() => seen.size === kinds.length, 10_000, 'every handler');
      for (const topic of ['two', 'rest', 'arguments']) assert.ok(seen.get(topic) instanceof AbortSignal, `${topic} got an AbortSignal`);
      assert.equal(seen.get('one'), 'ran');
    } finally {
      await q.close();
    }
  });
});
