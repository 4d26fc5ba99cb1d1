/**
 * The per-type document writer (resourceText, documentText, serializeList) writes the very
 * bytes JSON.stringify gave for the resource objects and documents it replaced: over every
 * public type, random column values (text with escapes, numbers, booleans, JSON, arrays,
 * dates, null and missing), random sparse fieldsets and linkage.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RESOURCE_TYPES } from '../../src/resources/types.ts';
import { API_PREFIX, documentText, resourceObject, resourceText, serializeList, type BuiltDocument } from '../../src/http/jsonapi/document.ts';
import { runs } from '../helpers/property.ts';

const types = [...RESOURCE_TYPES.values()];
const value = fc.oneof(
  fc.string(),
  fc.constantFrom('', 'a"b', 'line\nbreak', '\u2028', 'é', '</script>'),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true }),
  fc.jsonValue({ maxDepth: 2 }),
  fc.array(fc.string(), { maxLength: 3 }),
);
const uuid = fc.uuid();

const caseArb = fc.constantFrom(...types).chain((type) => {
  const columns = new Set<string>([...Object.values(type.attributes).map((a) => a.column)]);
  for (const rel of Object.values(type.relationships)) if (rel.column) columns.add(rel.column);
  const names = [...Object.keys(type.attributes), ...Object.keys(type.relationships)];
  return fc.record({
    type: fc.constant(type),
    rows: fc.array(
      fc
        .record({ id: uuid, values: fc.array(fc.option(value, { nil: undefined }), { minLength: columns.size, maxLength: columns.size }) })
        .map(({ id, values }) => {
          const row: Record<string, unknown> = { id };
          [...columns].forEach((c, i) => (row[c] = values[i]));
          return row;
        }),
      { minLength: 1, maxLength: 4 },
    ),
    fields: fc.option(
      fc.subarray(names).map((f) => new Set(f)),
      { nil: undefined },
    ),
    linked: fc.subarray(Object.keys(type.relationships)),
    links: fc.option(fc.dictionary(fc.constantFrom('self', 'next', 'prev'), fc.option(fc.string(), { nil: null })), { nil: undefined }),
    meta: fc.option(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), { nil: undefined }),
    max: fc.integer({ min: 50, max: 4000 }),
  });
});

/** serializeList as it was, on the document object: the budget arithmetic the text version must keep. */
function referenceSerializeList(doc: Record<string, unknown>, maxBytes: number): unknown {
  const { jsonapi, data, included, ...rest } = doc;
  let bytes = Buffer.byteLength(JSON.stringify({ jsonapi, ...rest }));
  const take = (items: unknown[], always: number): string[] | number => {
    const out: string[] = [];
    for (const item of items) {
      const text = JSON.stringify(item);
      bytes += Buffer.byteLength(text) + 1;
      if (bytes > maxBytes && out.length >= always) return out.length;
      out.push(text);
    }
    return out;
  };
  const dataTexts = take(data as unknown[], 1);
  if (typeof dataTexts === 'number') return { over: 'data', fit: dataTexts };
  const includedTexts = included === undefined ? undefined : take(included as unknown[], 0);
  if (typeof includedTexts === 'number') return { over: 'included' };
  const members = [`"jsonapi":${JSON.stringify(jsonapi)}`, `"data":[${dataTexts.join(',')}]`];
  if (includedTexts !== undefined) members.push(`"included":[${includedTexts.join(',')}]`);
  for (const [k, v] of Object.entries(rest)) members.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
  return { text: `{${members.join(',')}}` };
}

test('resourceText and documentText write what JSON.stringify wrote for the objects', () => {
  const now = new Date('2026-07-05T12:00:00Z');
  fc.assert(
    fc.property(caseArb, ({ type, rows, fields, linked, links, meta, max }) => {
      const linkage = new Map<string, unknown>();
      for (const r of rows) {
        for (const name of linked) {
          const rel = type.relationships[name]!;
          linkage.set(`${type.type}:${String(r.id)}:${name}`, rel.kind === 'one' ? null : [{ type: rel.type, id: String(r.id) }]);
        }
      }
      const objects: unknown[] = [];
      const texts: string[] = [];
      for (const r of rows) {
        let expected: string | Error;
        try {
          expected = JSON.stringify(resourceObject(type, r, fields, linkage as any, now));
        } catch (err) {
          expected = err as Error;
        }
        if (expected instanceof Error) {
          // A presenter that refuses the row refuses it both ways.
          assert.throws(() => resourceText(type, r, fields, linkage as any, now));
          return;
        }
        const text = resourceText(type, r, fields, linkage as any, now);
        assert.equal(text, expected);
        objects.push(JSON.parse(expected));
        texts.push(text);
      }
      const single: BuiltDocument = { built: true, data: texts[0]!, ...(links ? { links } : {}), ...(meta ? { meta } : {}) };
      const ref = (data: unknown) => JSON.stringify({ jsonapi: { version: '1.1' }, data, ...(links ? { links } : {}), ...(meta ? { meta } : {}) });
      assert.equal(documentText(single), ref(objects[0]));
      const list: BuiltDocument = { ...single, data: texts };
      const docObject = { jsonapi: { version: '1.1' }, data: objects, ...(links ? { links } : {}), ...(meta ? { meta } : {}) };
      assert.deepEqual(serializeList(list, max), referenceSerializeList(docObject, max));
      // With included resources (a compound document), members in the same order.
      const compound: BuiltDocument = { built: true, data: texts, included: texts.slice(1), ...(links ? { links } : {}), ...(meta ? { meta } : {}) };
      const compoundObject = { jsonapi: { version: '1.1' }, data: objects, included: objects.slice(1), ...(links ? { links } : {}), ...(meta ? { meta } : {}) };
      assert.deepEqual(serializeList(compound, max), referenceSerializeList(compoundObject, max));
      assert.equal(documentText(compound), JSON.stringify(compoundObject));
    }),
    { numRuns: runs(300) },
  );
});

test('a resource of a known type and row, written out', () => {
  const type = RESOURCE_TYPES.get('data_model')!;
  const row = { id: '0190a7a0-0000-7000-8000-000000000001', name: 'Invoices "A"', slug: 'invoices', description: null, retention_days: 365 };
  const text = resourceText(type, row, new Set(['name', 'slug']), undefined, new Date());
  assert.equal(
    text,
    `{"type":"data_model","id":"${row.id}","attributes":{"name":"Invoices \\"A\\"","slug":"invoices"},"links":{"self":"${API_PREFIX}/data_models/${row.id}"}}`,
  );
});
