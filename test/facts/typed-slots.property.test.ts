/**
 * Property: after random sequences of workflow-path writes (writeFacts), imports, retention
 * sweeps, field renames, retypes and is_indexed toggles, every typed slot a field reads
 * (ModelField.slot) holds exactly fieldValue's reading of `data`, on every row of facts and
 * fact_current; fact_current is still the latest fact per entity; and factQuery's pages and
 * counts are the same with and without typed storage.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sql } from 'kysely';
import { appWithTenant } from '../helpers/app.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { importFacts, IMPORT_BATCH, resolveImportTarget } from '../../src/facts/import.ts';
import { sweepFactRetention } from '../../src/facts/retention.ts';
import { loadModel, type DataModelWithFields } from '../../src/facts/models.sql.ts';
import { dataValue, fieldValue } from '../../src/facts/typed.sql.ts';
import { planFactQuery } from '../../src/facts/query/plan.ts';
import { countSql, pageSql } from '../../src/facts/query/page.sql.ts';
import type { FactQueryPlan } from '../../src/facts/query/plan-types.ts';
import { checkArguments } from '../../src/graphql/fact-query.ts';
import { createModel, daysAgo, recomputedCurrent, storedCurrent } from './helpers.ts';
import { runs } from '../helpers/property.ts';

const { t, tenant, api } = await appWithTenant();
const P = '/api/json/v1';
const scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };

/** The fields besides the key: name, type, and values a fact may hold for it (undefined: absent). */
const FIELDS = {
  s: { type: 'string', values: fc.constantFrom('open', 'paid', 'void', '', undefined, null) },
  n: { type: 'float', values: fc.constantFrom(0, 1.5, -2, 1e3, 7, undefined, null) },
  i: { type: 'integer', values: fc.constantFrom(0, 1, 42, -3, undefined) },
  b: { type: 'boolean', values: fc.constantFrom(true, false, undefined, null) },
  d: { type: 'datetime', values: fc.constantFrom('2026-03-01T10:00:00Z', '2026-03-01T11:00:00.123+01:00', '2025-12-31T23:59:59Z', undefined) },
} as const;
type Name = keyof typeof FIELDS;
const NAMES = Object.keys(FIELDS) as Name[];

const fact = fc.record({
  k: fc.constantFrom('a', 'b', 'c', 'd'),
  age: fc.constantFrom(1, 2, 20, 40),
  ...(Object.fromEntries(NAMES.map((n) => [n, FIELDS[n].values])) as { [K in Name]: fc.Arbitrary<unknown> }),
});
type Fact = typeof fact extends fc.Arbitrary<infer F> ? F : never;

const action = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), facts: fc.array(fact, { minLength: 1, maxLength: 4 }) }),
  fc.record({ kind: fc.constant('import' as const), facts: fc.array(fact, { minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant('sweep' as const) }),
  fc.record({ kind: fc.constant('rename' as const), field: fc.constantFrom(...NAMES) }),
  fc.record({ kind: fc.constant('retype' as const), field: fc.constantFrom('n', 'i') }),
  fc.record({ kind: fc.constant('index' as const), field: fc.constantFrom(...NAMES), on: fc.boolean() }),
);

function item(f: Fact, names: Record<Name, string>, n: number) {
  const data: Record<string, unknown> = { k: f.k };
  for (const name of NAMES) if (f[name] !== undefined) data[names[name]] = f[name];
  return { observed_at: daysAgo(f.age, n), data };
}

/** Rows of facts and fact_current of the model where a slot readers use differs from `data`. */
async function mismatches(model: DataModelWithFields): Promise<string[]> {
  const out: string[] = [];
  for (const field of model.fields.filter((f) => f.slot)) {
    for (const [table, alias] of [
      ['facts', 'f'],
      ['fact_current', 'c'],
    ] as const) {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} as ${sql.id(alias)}
        where ${sql.ref(`${alias}.data_model_id`)} = ${model.id}
          and (${fieldValue(alias, field)}) is distinct from (${dataValue(alias, field)})`.execute(t.deps.db);
      if (rows[0]!.n > 0) out.push(`${table}.${field.slot} (${field.name}): ${rows[0]!.n} rows`);
    }
  }
  return out;
}

async function read(p: FactQueryPlan): Promise<{ ids: string[]; count: number }> {
  const page = await pageSql(p, { withData: false, extra: 0 }).execute(t.deps.db);
  const count = await countSql(p).execute(t.deps.db);
  return { ids: (page.rows as { id: string }[]).map((r) => r.id), count: (count.rows[0] as { n: number }).n };
}

const CLAUSES: Record<string, unknown[]> = {
  string: [
    { op: 'eq', value: 'open' },
    { op: 'ne', value: 'open' },
    { op: 'in', value: ['paid', ''] },
    { op: 'nin', value: ['void'] },
    { op: 'starts_with', value: 'pa' },
    { op: 'contains', value: 'o' },
    { op: 'is_null', value: true },
  ],
  number: [
    { op: 'gte', value: 1 },
    { op: 'lt', value: 7 },
    { op: 'eq', value: 0 },
    { op: 'in', value: [1, 42] },
    { op: 'nin', value: [0] },
    { op: 'is_null', value: false },
  ],
  boolean: [
    { op: 'eq', value: true },
    { op: 'ne', value: false },
    { op: 'in', value: [false] },
  ],
  datetime: [
    { op: 'gt', value: '2026-01-01T00:00:00Z' },
    { op: 'eq', value: '2026-03-01T10:00:00Z' },
    { op: 'lte', value: '2026-03-01T10:00:00.123Z' },
  ],
};
const clausesOf = (type: string | null) => CLAUSES[type === 'integer' || type === 'float' ? 'number' : (type ?? '')] ?? [];

test('typed slots equal the JSON reading of data after writes, imports, sweeps, renames, retypes and index toggles; factQuery unchanged', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 8 }), fc.subarray(NAMES), async (actions, indexedAtStart) => {
      const m = await createModel(
        t.deps.db,
        tenant,
        [{ name: 'k', type: 'string', is_primary_key: true }, ...NAMES.map((n) => ({ name: n, type: FIELDS[n].type }))],
        { retentionDays: 30 },
      );
      const ids = new Map<string, string>(
        (await t.deps.db.selectFrom('data_model_fields').select(['id', 'name']).where('data_model_id', '=', m.id).execute()).map((f) => [f.name, f.id]),
      );
      const names = Object.fromEntries(NAMES.map((n) => [n, n])) as Record<Name, string>;
      const patch = async (n: Name, attributes: Record<string, unknown>) => {
        const id = ids.get(n)!;
        return api.patch(`${P}/data_model_fields/${id}`, { data: { type: 'data_model_field', id, attributes } });
      };
      for (const n of indexedAtStart) assert.equal((await patch(n, { is_indexed: true })).status, 200);
      let written = 0;
      for (const [step, a] of actions.entries()) {
        const model = (await loadModel(t.deps.db, tenant.workspaceId, m.slug))!;
        if (a.kind === 'write') {
          const r = await writeFacts(
            t.deps.db,
            scope,
            model,
            a.facts.map((f, j) => item(f, names, step * 10 + j)),
          );
          written += r.written;
        } else if (a.kind === 'import') {
          const target = await resolveImportTarget(t.deps.db, { workspaceId: tenant.workspaceId, dataModelSlug: m.slug });
          const lines = a.facts.map((f, j) => JSON.stringify(item(f, names, step * 10 + j)));
          const r = await importFacts(t.deps.db, target, lines, { batching: { ...IMPORT_BATCH[t.deps.engine], lines: 2 } });
          written += r.written;
        } else if (a.kind === 'sweep') {
          await sweepFactRetention(t.deps.db, { now: new Date(), batch: 2 });
        } else if (a.kind === 'rename') {
          const to = names[a.field] === a.field ? `${a.field}_x` : a.field;
          assert.equal((await patch(a.field, { name: to })).status, 200);
          names[a.field] = to;
        } else if (a.kind === 'retype') {
          const type = model.fields.find((f) => f.name === names[a.field])!.type === 'integer' ? 'float' : 'integer';
          const r = await patch(a.field, { type });
          // A model with facts keeps its types (data_model_fields/service.ts).
          assert.ok(r.status === 200 || (r.status === 409 && written > 0), r.text);
        } else {
          assert.equal((await patch(a.field, { is_indexed: a.on })).status, 200);
        }
        const now = (await loadModel(t.deps.db, tenant.workspaceId, m.slug))!;
        assert.deepEqual(await mismatches(now), [], `after ${a.kind}`);
      }
      assert.deepEqual(await storedCurrent(t.deps.db, m.id), await recomputedCurrent(t.deps.db, m.id));
      const model = (await loadModel(t.deps.db, tenant.workspaceId, m.slug))!;
      for (const f of model.fields.filter((x) => x.slot)) {
        for (const c of clausesOf(f.type)) {
          for (const mode of ['latest', 'timeline'] as const) {
            const args = checkArguments({ dataModelSlug: m.slug, mode, limit: 50, filters: JSON.stringify([{ field: f.name, ...(c as object) }]) }, new Date());
            const typed = await planFactQuery(t.deps.db, tenant.workspaceId, args);
            assert.ok(typed.filters.every((x) => x.slot === f.slot));
            const plain = { ...typed, filters: typed.filters.map((x) => ({ ...x, slot: undefined, indexed: false })) };
            assert.deepEqual(await read(typed), await read(plain), `${mode} ${f.name} ${JSON.stringify(c)}`);
          }
        }
      }
    }),
    { numRuns: runs(12) },
  );
});
