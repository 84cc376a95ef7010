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
  it('no signal for a handler whose parameters are at most one plain name, unless it can read `arguments`', () => {
    const none: Array<[string, AnyFn]> = [
      ['async arrow', async (d: unknown) => void d],
      ['plain arrow', (d: unknown) => d],
      ['no parameters', async () => undefined],
      ['async function', async function (d: unknown) { return d; }],
      ['named function', async function handle(d: unknown) { return d; }],
      ['method', { async handle(d: unknown) { return d; } }.handle],
      // An arrow's `arguments` is its enclosing function's, never its own.
      ['arrow naming arguments', function outer() { return (d: unknown) => [d, arguments]; }()],
    ];
    for (const [what, fn] of none) assert.equal(takesSignal(fn), false, what);
    // Written out too, as a bundler might leave them (`d=>…`, `async d=>…`).
    assert.equal(takesSignal(new Function('return d => d')() as AnyFn), false, 'd => d from source');
    assert.equal(takesSignal(new Function('return async d=>{}')() as AnyFn), false, 'async d=>{} from source');
  });

  it('a signal for every other handler: two parameters, defaults, destructuring, rest, `arguments`, eval, bound and native functions', () => {
    const some: Array<[string, AnyFn]> = [
      ['two parameters', async (d: unknown, s: AbortSignal) => void [d, s]],
      ['a default on the second', new Function('return async (d, s = undefined) => {}')() as AnyFn],
      ['a default on the only one', new Function('return async (d = {}) => {}')() as AnyFn],
      ['destructured', async ({ id }: { id: string }) => void id],
      ['rest', async (...args: unknown[]) => void args],
      ['reads arguments', function (d: unknown) { return [d, arguments[1]]; }],
      ['reads arguments through eval', new Function('d', 'return eval("argu" + "ments")[1]') as AnyFn],
      ['a comment in the parameters', new Function('return async function (d /* , signal */) {}')() as AnyFn],
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
