/**
 * deliveryOf builds the same delivery an object spread of the message would
 * (`{ ...message, payload, deliveryId, group, attempt }`), for every
 * combination of the message's optional fields.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deliveryOf } from '../../src/queue/delivery-of.js';
import type { StoredMessage } from '../../src/queue/types.js';

test('deliveryOf equals the spread of the message plus the delivery fields, for every shape of message', () => {
  const optional = { key: 'k', headers: { h: 'v' }, deliverAt: new Date(2_000), priority: 3 } as const;
  const names = Object.keys(optional) as Array<keyof typeof optional>;
  for (let mask = 0; mask < 1 << names.length; mask++) {
    const m: StoredMessage = { id: `m${mask}`, topic: 't', payload: new Uint8Array([mask]), publishedAt: new Date(1_000) };
    names.forEach((n, i) => {
      if (mask & (1 << i)) (m as unknown as Record<string, unknown>)[n] = optional[n];
    });
    const decoded = { decoded: mask };
    const d = deliveryOf(m, decoded, `d${mask}`, 'g', 2);
    assert.deepStrictEqual(d, { ...m, payload: decoded, deliveryId: `d${mask}`, group: 'g', attempt: 2 });
    assert.equal(d.payload, decoded, 'the decoded payload itself, not a copy');
    assert.equal(d.headers, m.headers, 'headers are shared, as a spread shares them');
  }
});
