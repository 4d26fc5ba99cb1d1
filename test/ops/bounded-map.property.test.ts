/**
 * The bound of the per-process caches (verified tokens, webhook admissions, connectors):
 * checked against a model that keeps every key in the order it was last set.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { boundedMap } from '../../src/bounded-map.ts';
import { runs } from '../helpers/property.ts';

const op = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), key: fc.integer({ min: 0, max: 12 }), value: fc.integer() }),
  fc.record({ kind: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 12 }) }),
  fc.record({ kind: fc.constant('clear' as const) }),
);

test('a bounded map keeps the last `max` keys set, each with its last value', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 60 }), (max, ops) => {
      const map = boundedMap<number, number>(max);
      let model: Array<[number, number]> = [];
      for (const o of ops) {
        if (o.kind === 'set') {
          model = model.filter(([k]) => k !== o.key);
          model.push([o.key, o.value]);
          if (model.length > max) model.shift();
          map.set(o.key, o.value);
        } else if (o.kind === 'delete') {
          model = model.filter(([k]) => k !== o.key);
          map.delete(o.key);
        } else {
          model = [];
          map.clear();
        }
        assert.equal(map.size, model.length);
        assert.ok(map.size <= max);
      }
      for (let k = 0; k <= 12; k++) assert.equal(map.get(k), model.find(([m]) => m === k)?.[1]);
    }),
    { numRuns: runs(200) },
  );
});
