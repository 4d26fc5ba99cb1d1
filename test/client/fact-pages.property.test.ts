/**
 * The SDK's factPages against a real server, for random facts: every matching fact comes out
 * exactly once, whatever the page size, however many facts share an instant (one write's
 * facts share their inserted_at), across timeline windows longer than factQuery's 366 days,
 * in both modes and on both axes. What "matching" means is computed here from the stored
 * rows, apart from factQuery's SQL.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import { createClient, type TributaryClient } from '../../packages/client/src/index.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel } from '../facts/helpers.ts';
import { ROOT } from '../helpers/cli.ts';

let t: TestApp;
let tenant: Tenant;
let client: TributaryClient;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  client = createClient({ baseUrl: t.url, clientId: tenant.clientId, clientSecret: tenant.clientSecret });
});
after(() => t.close());

/** Few instants, so that facts share them, spread over more than two years; one far back. */
const INSTANTS = [
  '1999-12-31T23:59:59.999Z',
  '2024-01-01T00:00:00.000Z',
  '2024-01-01T00:00:00.001Z',
  '2024-07-01T10:00:00.000Z',
  '2025-01-01T00:00:00.000Z',
  '2025-01-02T00:00:00.000Z',
  '2026-03-01T00:00:00.000Z',
];

interface Row {
  id: string;
  entity_id: string;
  observed_at: string;
  inserted_at: string;
}

/** The newest of each entity's rows on the axis (ties by inserted_at, then id), as factQuery defines "latest". */
function latestOf(rows: Row[], axis: 'observed_at' | 'inserted_at'): Row[] {
  const key = (r: Row) => (axis === 'observed_at' ? [r.observed_at, r.inserted_at, r.id] : [r.inserted_at, r.id]).join('|');
  const best = new Map<string, Row>();
  for (const r of rows) {
    const b = best.get(r.entity_id);
    if (!b || key(r) > key(b)) best.set(r.entity_id, r);
  }
  return [...best.values()];
}

test('every matching fact once, for any page size, ties, windows, mode and axis', { timeout: 600_000 }, async () => {
  const instant = fc.constantFrom(...INSTANTS);
  await fc.assert(
    fc.asyncProperty(
      // Writes of facts: each write's facts share an inserted_at.
      fc.array(fc.array(fc.record({ at: instant, entity: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f') }), { minLength: 1, maxLength: 12 }), {
        minLength: 1,
        maxLength: 4,
      }),
      fc.constantFrom('latest' as const, 'timeline' as const),
      fc.constantFrom('observed_at' as const, 'inserted_at' as const),
      fc.integer({ min: 1, max: 4 }),
      fc.option(instant, { nil: undefined }),
      fc.option(instant, { nil: undefined }),
      async (writes, mode, axis, pageSize, sinceObserved, untilObserved) => {
        const model = await createModel(t.deps.db, tenant, [
          { name: 'k', type: 'string', is_primary_key: true },
          { name: 'i', type: 'integer' },
        ]);
        let i = 0;
        for (const w of writes) {
          const r = await writeFacts(
            t.deps.db,
            tenant,
            model,
            w.map((f) => ({ observed_at: f.at, data: { k: f.entity, i: i++ } })),
          );
          assert.equal(r.written, w.length);
        }
        const { rows } = await sql<{ id: string; entity_id: string; observed_at: Date; inserted_at: Date }>`
          select id, entity_id, observed_at, inserted_at from facts where data_model_id = ${model.id}`.execute(t.deps.db);
        const all: Row[] = rows.map((r) => ({ ...r, observed_at: r.observed_at.toISOString(), inserted_at: r.inserted_at.toISOString() }));
        // On inserted_at the bounds are taken from the stored instants, so that they fall between writes.
        const inserted = [...new Set(all.map((r) => r.inserted_at))].sort();
        const pick = (v: string | undefined) => (v === undefined ? undefined : axis === 'observed_at' ? v : inserted[INSTANTS.indexOf(v) % inserted.length]);
        let since = pick(sinceObserved);
        let until = pick(untilObserved);
        if (since !== undefined && until !== undefined && since > until) [since, until] = [until, since];
        const on = (r: Row) => (axis === 'observed_at' ? r.observed_at : r.inserted_at);

        let expected: Row[];
        if (mode === 'timeline') {
          expected = all.filter((r) => (since === undefined || on(r) >= since) && (until === undefined || on(r) < until));
        } else {
          expected = latestOf(
            all.filter((r) => until === undefined || on(r) <= until),
            axis,
          ).filter((r) => since === undefined || on(r) >= since);
        }

        const got: string[] = [];
        let pages = 0;
        for await (const page of client.factPages({
          dataModelSlug: model.slug,
          mode,
          timeAxis: axis,
          pageSize,
          ...(since !== undefined ? { since } : {}),
          ...(until !== undefined ? { until } : {}),
        })) {
          assert.ok(page.length >= 1 && page.length <= pageSize);
          // A cursor that stops moving would page forever.
          assert.ok(++pages <= expected.length, `page ${pages} of at most ${expected.length} facts`);
          got.push(...page.map((f) => f.id));
        }
        assert.deepEqual(got.slice().sort(), expected.map((r) => r.id).sort());
      },
    ),
    { numRuns: 40 },
  );
});

test('factAggregate through the SDK: typed groups whose counts and sums are those of the facts facts() reads', async () => {
  const model = await createModel(t.deps.db, tenant, [
    { name: 'k', type: 'string', is_primary_key: true },
    { name: 'status', type: 'string' },
    { name: 'amount', type: 'integer' },
  ]);
  const items = Array.from({ length: 40 }, (_, i) => ({
    observed_at: new Date(Date.parse('2026-01-01T00:00:00Z') + i * 3_600_000).toISOString(),
    data: { k: `o${i % 15}`, status: ['open', 'paid', 'shipped'][i % 3]!, ...(i % 4 === 0 ? {} : { amount: i }) },
  }));
  assert.equal((await writeFacts(t.deps.db, tenant, model, items)).written, 40);
  const { factAggregate } = await client.factAggregate(
    `query ($dataModelSlug: String!, $mode: String, $since: DateTime, $groupBy: [String!], $measures: [FactMeasureInput!]) {
      factAggregate(dataModelSlug: $dataModelSlug, mode: $mode, since: $since, groupBy: $groupBy, measures: $measures) {
        groupBy measures groupsCut groups { keys { field string number boolean dateTime json } bucket values { name value } }
      }
    }`,
    {
      dataModelSlug: model.slug,
      mode: 'timeline',
      since: '2025-12-31T00:00:00Z',
      groupBy: ['status'],
      measures: [{ op: 'count' }, { op: 'sum', field: 'amount' }],
    },
  );
  assert.ok(factAggregate);
  assert.deepEqual([factAggregate.groupBy, factAggregate.measures, factAggregate.groupsCut], [['status'], ['count', 'sum_amount'], false]);
  const expected = new Map<string, [number, number]>();
  for await (const f of client.facts({ dataModelSlug: model.slug, mode: 'timeline' })) {
    const [n, sum] = expected.get(String(f.data.status)) ?? [0, 0];
    expected.set(String(f.data.status), [n + 1, sum + (typeof f.data.amount === 'number' ? f.data.amount : 0)]);
  }
  const got = new Map(factAggregate.groups.map((g) => [g.keys[0]!.string!, g.values.map((v) => v.value ?? 0) as [number, number]]));
  assert.deepEqual(got, expected);
  assert.ok(factAggregate.groups.every((g) => g.bucket === null && g.keys[0]!.number === null && g.keys[0]!.json === null));

  // The README's query, with its variables' shape, answers the same groups (latest mode: one fact per entity).
  const readme = fs.readFileSync(path.join(ROOT, 'packages', 'client', 'README.md'), 'utf8');
  const query = /## Aggregates[\s\S]*?`(query Open[\s\S]*?)`/.exec(readme)?.[1];
  assert.ok(query, 'the README shows a factAggregate query');
  const latest = await client.factAggregate(query, {
    dataModelSlug: model.slug,
    groupBy: ['status'],
    measures: [{ op: 'count' }, { op: 'sum', field: 'amount' }],
  });
  const entities = new Map<string, number>();
  for await (const f of client.facts({ dataModelSlug: model.slug })) entities.set(String(f.data.status), (entities.get(String(f.data.status)) ?? 0) + 1);
  assert.deepEqual(new Map(latest.factAggregate!.groups.map((g) => [g.keys[0]!.string!, g.values[0]!.value])), entities);
});
