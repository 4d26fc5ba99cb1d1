/**
 * Property: a latest read filtered by ranges on an indexed number field (the typed
 * expression of its index on fact_current) returns the same page and count as the same
 * read with the field unindexed (the jsonpath form) and as a reference computed here, for
 * random values (numbers, a string or boolean stored while the field was untyped, missing
 * members) and random range clauses. test/jsonapi/fields.test.ts shows the index used.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { appWithTenant } from '../helpers/app.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { createFieldIndex } from '../../src/facts/field-index.sql.ts';
import { loadModel } from '../../src/facts/models.sql.ts';
import { planFactQuery } from '../../src/facts/query/plan.ts';
import { countSql, pageSql } from '../../src/facts/query/page.sql.ts';
import type { FactQueryPlan } from '../../src/facts/query/plan-types.ts';
import { checkArguments } from '../../src/graphql/fact-query.ts';
import { createModel } from './helpers.ts';
import { runs } from '../helpers/property.ts';

const { t, tenant } = await appWithTenant();

const OPS = ['gt', 'gte', 'lt', 'lte'] as const;
const stored = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom(0.5, -2.25, 1e-3), fc.constantFrom('3', true, null, undefined));
const clause = fc.record({ op: fc.constantFrom(...OPS), value: fc.oneof(fc.integer({ min: -6, max: 6 }), fc.constantFrom(0.5, -2.25)) });

async function read(p: FactQueryPlan): Promise<{ ids: string[]; count: number }> {
  const page = await pageSql(p, { withData: false, extra: 0 }).execute(t.deps.db);
  const count = await countSql(p).execute(t.deps.db);
  return { ids: (page.rows as { id: string }[]).map((r) => r.id), count: (count.rows[0] as { n: number }).n };
}

test('ranges on an indexed number field: same page and count as unindexed', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(stored, { minLength: 1, maxLength: 30 }), fc.array(clause, { minLength: 1, maxLength: 2 }), async (values, clauses) => {
      // The model first gets its facts with `n` untyped (any JSON), then `n` becomes an
      // indexed float field, as a field added to a model that has facts.
      const m = await createModel(t.deps.db, tenant, [
        { name: 'k', type: 'string', is_primary_key: true },
        { name: 'n', type: null },
      ]);
      const model = (await loadModel(t.deps.db, tenant.workspaceId, m.slug))!;
      const items = values.map((v, i) => ({
        observed_at: `2026-01-01T00:00:${String(i).padStart(2, '0')}Z`,
        data: v === undefined ? { k: `e${i}` } : { k: `e${i}`, n: v },
      }));
      const w = await writeFacts(t.deps.db, tenant, { id: model.id, fields: model.fields }, items);
      assert.equal(w.errors.length, 0);
      const field = await t.deps.db
        .updateTable('data_model_fields')
        .set({ type: 'float', is_indexed: true })
        .where('data_model_id', '=', m.id)
        .where('name', '=', 'n')
        .returningAll()
        .executeTakeFirstOrThrow();
      await createFieldIndex(t.deps.db, 'plain', field);
      const args = checkArguments({ dataModelSlug: m.slug, limit: 50, filters: JSON.stringify(clauses.map((c) => ({ field: 'n', ...c }))) }, new Date());
      const indexed = await planFactQuery(t.deps.db, tenant.workspaceId, args);
      assert.ok(indexed.filters.every((c) => c.indexed === true));
      const plain = { ...indexed, filters: indexed.filters.map((c) => ({ ...c, indexed: false })) };
      const a = await read(indexed);
      const b = await read(plain);
      assert.deepEqual(a, b);
      // And the reference, computed here from what was written.
      const keep = (v: unknown) =>
        typeof v === 'number' &&
        clauses.every((c) => (c.op === 'gt' ? v > c.value : c.op === 'gte' ? v >= c.value : c.op === 'lt' ? v < c.value : v <= c.value));
      assert.equal(a.count, values.filter(keep).length);
    }),
    { numRuns: runs(40) },
  );
});
