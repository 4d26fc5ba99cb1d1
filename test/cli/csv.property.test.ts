/**
 * The CSV writer against an RFC 4180 reader written apart (csv-parse.ts): any records of any
 * strings (quotes, commas, CR, LF, empty, unicode) or missing values read back as written;
 * and a fact's row reads back as its values (strings as they are, the rest as JSON).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { csvHeader, csvRecord, csvRow } from '../../src/cli/csv.ts';
import { parseCsv } from './csv-parse.ts';

/** Strings made mostly of the characters CSV treats apart. */
const awkward = fc.oneof(
  fc.string({ unit: fc.constantFrom('"', ',', '\r', '\n', ' ', 'a', 'é', '☃', '\t') }),
  fc.string({ unit: 'grapheme' }),
  fc.constant(''),
);
const cell = fc.option(awkward, { nil: null });

test('any records read back as they were written', () => {
  fc.assert(
    fc.property(fc.array(fc.array(cell, { minLength: 1, maxLength: 8 }), { maxLength: 10 }), (records) => {
      // A record of one missing value is an empty line, which RFC 4180 cannot tell from no record.
      const written = records.filter((r) => !(r.length === 1 && r[0] === null));
      assert.deepEqual(parseCsv(written.map(csvRecord).join('')), written);
    }),
    { numRuns: 2000 },
  );
});

test("a fact's row reads back as its values, in the header's order", () => {
  const value = fc.oneof(
    awkward,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.dictionary(awkward, awkward),
  );
  fc.assert(
    fc.property(fc.uniqueArray(fc.string({ minLength: 1 }), { maxLength: 6 }), fc.dictionary(fc.string(), value), awkward, (fields, data, entity) => {
      const fact = { id: 'f-1', dataModelId: 'm', entityId: entity, observedAt: '2026-07-01T00:00:00.000Z', insertedAt: '2026-07-01T00:00:01.000Z', data };
      const header = csvHeader(fields);
      assert.equal(new Set(header).size, header.length, 'no two columns share a name');
      const [row] = parseCsv(csvRow(fact, fields));
      const expected = fields.map((f) => {
        const v = Object.hasOwn(data, f) ? data[f] : null;
        return v === null || v === undefined ? null : typeof v === 'string' ? v : JSON.stringify(v);
      });
      assert.deepEqual(row, ['f-1', entity, fact.observedAt, fact.insertedAt, ...expected]);
    }),
    { numRuns: 1000 },
  );
});
