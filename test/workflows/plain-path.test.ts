/**
 * Plain paths read in the process (src/expressions/plain-path.ts) give what JSONata gives, or
 * are left to the pool: never another value.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import jsonata from 'jsonata';
import { plainPath } from '../../src/expressions/plain-path.ts';

const input = {
  payload: { customer: 'c-1', n: 0, off: false, none: null, items: [{ sku: 'A' }, { sku: 'B' }], one: [7], nested: { deep: { x: 1 } }, text: 'abc' },
  steps: { call: { status: 201, body: { id: 'ord_1' } } },
  run: { id: 'r', attempt: 1 },
  trigger: { key: null },
};

const expressions = [
  'payload',
  'payload.customer',
  'payload.n',
  'payload.off',
  'payload.none',
  'payload.items',
  'payload.items.sku',
  'payload.one',
  'payload.nested.deep',
  'payload.nested.deep.x',
  'payload.missing',
  'payload.missing.more',
  'payload.text.length',
  'steps.call.body.id',
  'trigger.key',
  'run',
  'true',
  'null',
  'payload and steps',
  'payload.customer & "x"',
  '$',
  'payload.`customer`',
  'payload[0]',
];

it('a plain path reads what JSONata reads; what it cannot tell is left to JSONata', async () => {
  let decided = 0;
  for (const e of expressions) {
    const read = plainPath(e, input);
    if (read === undefined) continue;
    decided++;
    const expected = await jsonata(e).evaluate(structuredClone(input));
    assert.deepEqual(read.value, expected === undefined ? undefined : JSON.parse(JSON.stringify(expected)), e);
  }
  assert.ok(decided >= 10, `decided ${decided}`);
  for (const e of ['payload.items', 'payload.items.sku', 'payload.one', 'true', 'null', 'payload and steps', '$', 'payload[0]'])
    assert.equal(plainPath(e, input), undefined, e);
});
