/**
 * Property: after random sequences of workflow-path writes (writeFacts), imports and
 * retention sweeps, with facts in and out of order, on the same instants, without entity
 * id, and duplicates refused by source key, every fact's superseded_at and
 * superseded_inserted_at (migration 0032, maintained by the writer) equal lead() over its
 * entity's history on each axis, the definition the series reads them by. Concurrent
 * writers of the same entities (PostgreSQL: several connections) end in the same state.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sql } from 'kysely';
import { appWithTenant } from '../helpers/app.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { importFacts, IMPORT_BATCH, resolveImportTarget } from '../../src/facts/import.ts';
import { sweepFactRetention } from '../../src/facts/retention.ts';
import { loadModel } from '../../src/facts/models.sql.ts';
import { createModel, recomputedCurrent, storedCurrent } from './helpers.ts';
import { runs } from '../helpers/property.ts';

const { t, tenant } = await appWithTenant();
const db = t.deps.db;
const scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
const DAY = 86_400_000;

const fact = fc.record({
  // undefined: no entity id (each such fact its own entity, never superseded).
  k: fc.constantFrom('a', 'b', 'c', undefined),
  // Ages on both sides of the 30-day retention, and the same instants again (ms 0 or 1).
  age: fc.constantFrom(1, 2, 20, 40),
  ms: fc.constantFrom(0, 1),
  s: fc.constantFrom('open', 'paid'),
  // An explicit source key repeats across facts: the later ones are refused as duplicates.
  key: fc.option(fc.constantFrom('x', 'y', 'z'), { nil: undefined }),
});
type Fact = typeof fact extends fc.Arbitrary<infer F> ? F : never;

const action = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), facts: fc.array(fact, { minLength: 1, maxLength: 5 }) }),
  fc.record({ kind: fc.constant('import' as const), facts: fc.array(fact, { minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant('sweep' as const) }),
);

function item(f: Fact, base: number) {
  return {
    observed_at: new Date(base - f.age * DAY + f.ms).toISOString(),
    data: { ...(f.k === undefined ? {} : { k: f.k }), s: f.s },
    ...(f.key === undefined ? {} : { source_key: f.key }),
  };
}

/** Facts of the model whose stored columns differ from lead() over the history. */
async function wrong(modelId: string): Promise<unknown[]> {
  const { rows } = await sql`
    select id, entity_id, superseded_at, so, superseded_inserted_at, si from (
      select f.id, f.entity_id, f.superseded_at, f.superseded_inserted_at,
        case when f.entity_id is null then null else lead(f.observed_at) over (partition by f.entity_id order by f.observed_at, f.inserted_at, f.id) end as so,
        case when f.entity_id is null then null else lead(f.inserted_at) over (partition by f.entity_id order by f.inserted_at, f.id) end as si
      from facts f where f.data_model_id = ${modelId}
    ) x
    where superseded_at is distinct from so or superseded_inserted_at is distinct from si`.execute(db);
  return rows;
}

const newModel = () =>
  createModel(
    db,
    tenant,
    [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 's', type: 'string' },
    ],
    { retentionDays: 30 },
  );

test('superseded columns equal lead() over the history after writes, imports and sweeps', async () => {
  let superseded = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 8 }), async (actions) => {
      const m = await newModel();
      const model = (await loadModel(db, tenant.workspaceId, m.slug))!;
      const base = Math.floor(Date.now() / 1000) * 1000;
      for (const a of actions) {
        if (a.kind === 'write') {
          await writeFacts(
            db,
            scope,
            model,
            a.facts.map((f) => item(f, base)),
          );
        } else if (a.kind === 'import') {
          const target = await resolveImportTarget(db, { workspaceId: tenant.workspaceId, dataModelSlug: m.slug });
          const lines = a.facts.map((f) => JSON.stringify(item(f, base)));
          await importFacts(db, target, lines, { batching: { ...IMPORT_BATCH[t.deps.engine], lines: 2 } });
        } else {
          await sweepFactRetention(db, { now: new Date(base), batch: 2 });
        }
        assert.deepEqual(await wrong(m.id), [], `after ${a.kind}`);
      }
      assert.deepEqual(await storedCurrent(db, m.id), await recomputedCurrent(db, m.id));
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts where data_model_id = ${m.id} and superseded_at is not null`.execute(db);
      superseded += rows[0]!.n;
    }),
    { numRuns: runs(40) },
  );
  // The property saw superseded facts at all (a writer that never set the columns would fail above only if some fact had a successor).
  assert.ok(superseded > 0);
});

test('concurrent writers of the same entities leave the superseded columns right', async () => {
  const m = await newModel();
  const model = (await loadModel(db, tenant.workspaceId, m.slug))!;
  const base = Math.floor(Date.now() / 1000) * 1000;
  const writers = 4;
  for (let round = 0; round < 10; round++) {
    await Promise.all(
      Array.from({ length: writers }, (_, w) =>
        writeFacts(
          db,
          scope,
          model,
          // Each writer in and out of order over the same two entities.
          Array.from({ length: 3 }, (_, j) => ({
            observed_at: new Date(base - (((round * 7 + w * 3 + j * 5) % 11) + 1) * 3_600_000).toISOString(),
            data: { k: (w + j) % 2 === 0 ? 'a' : 'b', s: `${round}-${w}-${j}` },
          })),
        ),
      ),
    );
  }
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts where data_model_id = ${m.id}`.execute(db);
  assert.equal(rows[0]!.n, 10 * writers * 3);
  assert.deepEqual(await wrong(m.id), []);
});
