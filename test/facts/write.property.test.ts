/**
 * Property: for random field sets and random fact batches (equal timestamps, null entity
 * ids, duplicates, invalid items, random order and batching), writeFacts rejects exactly the
 * items a small reference validator rejects, stores each distinct fact once, and leaves
 * fact_current equal to a recomputation from the history.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { appWithTenant } from '../helpers/app.ts';
import type { FieldType } from '../../src/db/tables.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { createModel, factCount, recomputedCurrent, storedCurrent, type FieldSpec } from './helpers.ts';
import { runs } from '../helpers/property.ts';

const { t, tenant } = await appWithTenant();

// Several spellings of few instants, so equal observed_at values are common.
const VALID_TS = [
  '2025-01-01T00:00:00Z',
  '2025-01-01T02:00:00+02:00',
  '2024-12-31T23:00:00.000-01:00',
  '2025-01-02T00:00:00Z',
  '2025-01-02T00:00:00.000Z',
  '2025-01-03T10:00:00.5Z',
];
const INVALID_TS = ['2025-01-01', '2025-01-01T00:00:00', 'soon', '2025-13-01T00:00:00Z'];

// ---- the reference: written independently of src/facts/validate.ts ----

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const refDateTime = (v: unknown): number | undefined =>
  typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) && !Number.isNaN(Date.parse(v))
    ? Date.parse(v)
    : undefined;

function refTypeOk(type: FieldType | null, v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER;
    case 'float':
      return typeof v === 'number' && Number.isFinite(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'datetime':
      return refDateTime(v) !== undefined;
    case 'map':
      return isObject(v);
    case null:
      return true;
  }
}

function refValid(fields: FieldSpec[], item: Record<string, unknown>): boolean {
  if (Object.keys(item).some((k) => !['observed_at', 'data', 'source_key'].includes(k))) return false;
  if (refDateTime(item.observed_at) === undefined) return false;
  const sk = item.source_key;
  if (sk !== undefined && sk !== null && !(typeof sk === 'string' && sk.length >= 1 && sk.length <= 512)) return false;
  const data = item.data;
  if (!isObject(data)) return false;
  if (Object.keys(data).some((k) => !fields.some((f) => f.name === k))) return false;
  return fields.every((f) => {
    const v = data[f.name];
    if (v === undefined || v === null) return !f.is_required;
    return refTypeOk(f.type, v);
  });
}

const sortedJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    isObject(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  );

/** What makes two valid items the same fact: the given key, else the instant and the data with datetimes as instants. */
function refKey(fields: FieldSpec[], item: Record<string, unknown>): string {
  if (typeof item.source_key === 'string') return `given:${item.source_key}`;
  const data = { ...(item.data as Record<string, unknown>) };
  for (const f of fields) if (f.type === 'datetime' && typeof data[f.name] === 'string') data[f.name] = Date.parse(data[f.name] as string);
  return `derived:${sortedJson([refDateTime(item.observed_at), data])}`;
}

function refEntity(fields: FieldSpec[], item: Record<string, unknown>): string | null {
  const pk = fields.find((f) => f.is_primary_key);
  const v = pk ? (item.data as Record<string, unknown>)[pk.name] : undefined;
  return v === undefined || v === null ? null : String(v);
}

// ---- generators ----

const FIELD_TYPES: Array<FieldType | null> = ['string', 'integer', 'float', 'boolean', 'datetime', 'map', null];

const fieldsArb: fc.Arbitrary<FieldSpec[]> = fc
  .record({
    others: fc.uniqueArray(fc.record({ name: fc.constantFrom('a', 'b', 'c', 'd', 'e'), type: fc.constantFrom(...FIELD_TYPES), is_required: fc.boolean() }), {
      selector: (f) => f.name,
      maxLength: 4,
    }),
    pk: fc.option(fc.record({ type: fc.constantFrom<FieldType>('string', 'integer'), is_required: fc.boolean() }), { freq: 3 }),
  })
  .map(({ others, pk }) => [...(pk ? [{ name: 'k', type: pk.type, is_primary_key: true, is_required: pk.is_required }] : []), ...others]);

const goodValue = (f: FieldSpec): fc.Arbitrary<unknown> => {
  if (f.is_primary_key) return f.type === 'integer' ? fc.integer({ min: -2, max: 2 }) : fc.constantFrom('e1', 'e2', 'e3');
  switch (f.type) {
    case 'string':
      return fc.string({ maxLength: 4 });
    case 'integer':
      return fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER));
    case 'float':
      return fc.oneof(fc.constantFrom(0, 1.5, -2.25), fc.double({ noNaN: true, noDefaultInfinity: true }));
    case 'boolean':
      return fc.boolean();
    case 'datetime':
      return fc.constantFrom(...VALID_TS);
    case 'map':
      return fc.dictionary(fc.constantFrom('p', 'q'), fc.oneof(fc.integer({ min: 0, max: 2 }), fc.constant('s'), fc.constant(null)), { maxKeys: 2 });
    default:
      return fc.oneof(fc.integer({ min: 0, max: 2 }), fc.constant('v'), fc.constant(null), fc.constant([1, { z: 'y', a: true }]), fc.constant({ n: { m: 1 } }));
  }
};

const BAD_VALUES: Record<FieldType, unknown[]> = {
  string: [1, true, {}, []],
  integer: [1.5, '1', true, 2 ** 53],
  float: ['1.5', true, {}],
  boolean: ['true', 0],
  datetime: [...INVALID_TS, 5],
  map: [[], 'x', 1],
};

type Slot = { kind: 'absent' } | { kind: 'value'; v: unknown };

const slotArb = (f: FieldSpec): fc.Arbitrary<Slot> =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant<Slot>({ kind: 'absent' }) },
    { weight: 1, arbitrary: fc.constant<Slot>({ kind: 'value', v: null }) },
    { weight: 7, arbitrary: goodValue(f).map((v): Slot => ({ kind: 'value', v })) },
    { weight: 1, arbitrary: (f.type === null ? goodValue(f) : fc.constantFrom(...BAD_VALUES[f.type])).map((v): Slot => ({ kind: 'value', v })) },
  );

const itemArb = (fields: FieldSpec[]): fc.Arbitrary<Record<string, unknown>> =>
  fc
    .record({
      observed: fc.oneof(
        { weight: 12, arbitrary: fc.constantFrom<unknown>(...VALID_TS) },
        { weight: 1, arbitrary: fc.constantFrom<unknown>(...INVALID_TS, undefined) },
      ),
      slots: fc.tuple(...fields.map(slotArb)),
      extraData: fc.oneof({ weight: 15, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      extraMember: fc.oneof({ weight: 30, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      dataNotObject: fc.oneof({ weight: 30, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      sourceKey: fc.option(fc.constantFrom<unknown>('s1', 's2', 's3', '', 7), { freq: 3 }),
    })
    .map(({ observed, slots, extraData, extraMember, dataNotObject, sourceKey }) => {
      const data: Record<string, unknown> = {};
      fields.forEach((f, i) => {
        const s = (slots as Slot[])[i]!;
        if (s.kind === 'value') data[f.name] = s.v;
      });
      if (extraData) data.zz = 1;
      const item: Record<string, unknown> = { observed_at: observed, data: dataNotObject ? [data] : data };
      if (observed === undefined) delete item.observed_at;
      if (sourceKey !== null) item.source_key = sourceKey;
      if (extraMember) item.entity = 'x';
      return item;
    });

const scenarioArb = fieldsArb.chain((fields) =>
  fc
    .array(itemArb(fields), { minLength: 1, maxLength: 25 })
    // Identical retries: some items again, later, as they were.
    .chain((items) => fc.tuple(fc.constant(items), fc.subarray(items, { maxLength: Math.min(5, items.length) })))
    .chain(([items, retries]) => fc.shuffledSubarray([...items, ...retries], { minLength: items.length + retries.length }))
    .chain((all) =>
      fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }).map((sizes) => {
        const calls: Array<Array<Record<string, unknown>>> = [];
        let at = 0;
        for (let i = 0; at < all.length; i++) {
          const n = sizes[i % sizes.length]!;
          calls.push(all.slice(at, at + n));
          at += n;
        }
        return { fields, calls };
      }),
    ),
);

test('writeFacts agrees with the reference validator and keeps fact_current equal to history', async () => {
  const scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
  await fc.assert(
    fc.asyncProperty(scenarioArb, async ({ fields, calls }) => {
      const model = await createModel(t.deps.db, tenant, fields);
      const seen = new Set<string>();
      const entities = new Set<string>();
      let written = 0;
      for (const items of calls) {
        const r = await writeFacts(t.deps.db, scope, model, items as never);
        const expectedInvalid = items.flatMap((item, i) => (refValid(fields, item) ? [] : [i]));
        assert.deepEqual([...new Set(r.errors.map((e) => e.index))], expectedInvalid, 'rejected items');
        let expectedWritten = 0;
        for (const item of items) {
          if (!refValid(fields, item)) continue;
          const key = refKey(fields, item);
          if (seen.has(key)) continue;
          seen.add(key);
          expectedWritten++;
          const e = refEntity(fields, item);
          if (e !== null) entities.add(e);
        }
        assert.equal(r.written, expectedWritten, 'written');
        assert.equal(r.duplicates, items.length - expectedInvalid.length - expectedWritten, 'duplicates');
        assert.equal(r.ids.filter((x) => x !== null).length, r.written);
        written += r.written;
      }
      assert.equal(await factCount(t.deps.db, model.id), written);
      const stored = await storedCurrent(t.deps.db, model.id);
      assert.deepEqual(stored, await recomputedCurrent(t.deps.db, model.id));
      const storedEntities = new Set(stored.filter((s) => s.entity_id !== null).map((s) => s.entity_id));
      assert.deepEqual(storedEntities, entities, 'entity ids');
    }),
    { numRuns: runs(40) },
  );
});
