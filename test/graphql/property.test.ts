/**
 * factQuery against the in-memory reference (reference.ts): random data models, facts with
 * equal timestamps, out-of-order inserts and null entity ids, and random
 * filter/join/sort/page arguments. Every case seeds fresh models and asks several queries
 * through graphql-request; the page, its counters and every row must equal the reference.
 * As-of queries (latest with until) are also run on each of their SQL forms, whichever the
 * service would pick: both sources, and the walked page with windows too small to hold it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { FieldType } from '../../src/db/tables.ts';
import { uuidv7 } from '../../src/ids.ts';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, FACT_FIELDS, gql, gqlClient, insertFacts, uniqueSlug, type ApiFact } from './helpers.ts';
import { referenceQuery, type RefArgs, type RefClause, type RefFact, type RefModel, type RefPage } from './reference.ts';
import type { Principal } from '../../src/auth/principal.ts';
import { checkArguments } from '../../src/graphql/fact-query.ts';
import { planFactQuery } from '../../src/facts/query/plan.ts';
import { countSql, pageSql, selectPage } from '../../src/facts/query/page.sql.ts';
import type { AsOfSource } from '../../src/facts/query/plan-types.ts';
import { runs } from '../helpers/property.ts';

const RUNS = runs(60);
const QUERIES_PER_CASE = 3;

const HOUR = 3_600_000;
const DAY = 86_400_000;
// Ten days back, at midnight: the default 90-day window holds every recent fact, and
// nothing sits near a window boundary that the server's "now" could move across.
const BASE = Math.floor(Date.now() / DAY) * DAY - 10 * DAY;

let t: TestApp;
let tenant: Tenant;
let client: ReturnType<typeof gqlClient>;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await seedTenant(t.deps);
  client = gqlClient(t, await tokenFor(t, tenant));
});
after(async () => {
  await t?.close();
});

const TYPES: (FieldType | null)[] = ['string', 'integer', 'float', 'boolean', 'datetime', 'map', null];
const ENTITIES = ['e1', 'e2', 'e10', 'E3', 'é'];

const values: Record<string, fc.Arbitrary<unknown>> = {
  string: fc.constantFrom('', 'a', 'ab', 'b', 'ba', 'abc', 'Ä'),
  integer: fc.integer({ min: -3, max: 3 }),
  float: fc.constantFrom(-1.5, 0, 0.25, 1, 2.75),
  boolean: fc.boolean(),
  datetime: fc.constantFrom(
    '2026-01-01T00:00:00.000Z',
    '2026-01-01T00:00:00Z',
    '2026-01-01T01:00:00.000Z',
    '2026-01-02T00:00:00.000Z',
    '2025-12-31T23:59:59.999Z',
  ),
  map: fc.constantFrom({}, { a: 1 }, { a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }, { x: { y: null } }),
};
const valueOf = (type: FieldType | null): fc.Arbitrary<unknown> =>
  type === null ? fc.oneof(values.string!, values.integer!, values.boolean!, values.map!, fc.constant([1, 'a'])) : values[type]!;
// Filter values may be written with an offset: the service converts them to UTC.
const filterValueOf = (type: FieldType | null): fc.Arbitrary<unknown> =>
  type === 'datetime' ? fc.oneof(values.datetime!, fc.constantFrom('2026-01-01T02:00:00+01:00', '2025-12-31T19:00:00-05:00')) : valueOf(type);

interface FieldGen {
  name: string;
  type: FieldType | null;
  /** An indexed field (filters compare its index's expression): same answers as the reference. */
  is_indexed: boolean;
}

const INDEXABLE: ReadonlySet<FieldType | null> = new Set<FieldType | null>(['integer', 'float']);

const fieldsArb: fc.Arbitrary<FieldGen[]> = fc
  .uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { minLength: 1, maxLength: 4 })
  .chain((names) =>
    fc.tuple(
      ...names.map((n) =>
        fc.tuple(fc.constantFrom(...TYPES), fc.boolean()).map(([type, indexed]) => ({ name: n, type, is_indexed: indexed && INDEXABLE.has(type) })),
      ),
    ),
  );

function factsArb(fields: FieldGen[]): fc.Arbitrary<Omit<RefFact, 'id'>[]> {
  const data = fc.tuple(
    ...fields.map((f) =>
      fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constant(null) }, { weight: 7, arbitrary: valueOf(f.type) }),
    ),
  );
  const when = (recent: number[], unit: number) =>
    fc.oneof(
      { weight: 9, arbitrary: fc.constantFrom(...recent).map((k) => BASE + k * unit) },
      { weight: 1, arbitrary: fc.constantFrom(BASE - 100 * DAY, BASE - 380 * DAY) },
    );
  return fc.array(
    fc
      .record({
        entity_id: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...ENTITIES) }, { weight: 1, arbitrary: fc.constant(null) }),
        observed_at: when([0, 1, 2, 3, 4], HOUR),
        inserted_at: when([0, 1, 2, 3], 60_000),
        values: data,
      })
      .map((r) => {
        const d: Record<string, unknown> = {};
        fields.forEach((f, i) => {
          if (r.values[i] !== undefined) d[f.name] = r.values[i];
        });
        if (r.entity_id !== null) d.k = r.entity_id;
        return { entity_id: r.entity_id, observed_at: r.observed_at, inserted_at: r.inserted_at, data: d };
      }),
    { maxLength: 25 },
  );
}

function clauseArb(fields: FieldGen[]): fc.Arbitrary<RefClause> {
  return fc.constantFrom(...fields).chain((f) => {
    const ops = ['eq', 'ne', 'in', 'nin', 'is_null'];
    if (f.type === 'integer' || f.type === 'float' || f.type === 'datetime') ops.push('gt', 'gte', 'lt', 'lte');
    if (f.type === 'string') ops.push('contains', 'starts_with');
    return fc.constantFrom(...ops).chain((op) => {
      const value: fc.Arbitrary<unknown> =
        op === 'is_null'
          ? fc.boolean()
          : op === 'in' || op === 'nin'
            ? fc.array(filterValueOf(f.type), { maxLength: 3 })
            : op === 'contains' || op === 'starts_with'
              ? values.string!
              : filterValueOf(f.type);
      return value.map((v) => ({ field: f.name, op, value: v }));
    });
  });
}

const instant = fc.oneof(
  fc.constantFrom(-1, 0, 1, 2, 3, 4, 5).map((h) => BASE + h * HOUR),
  fc.constantFrom(BASE + 60_000, BASE + 2 * 60_000, BASE - 200 * DAY, BASE - 400 * DAY, BASE + DAY),
);

interface QueryGen {
  args: Omit<RefArgs, 'join'>;
  join: { type: 'left' | 'inner'; filters: RefClause[] } | undefined;
  /** Which way to write since/until: UTC with Z or with an offset. */
  offsetForm: boolean;
  withCount: boolean;
}

function queryArb(fields: FieldGen[], joinFields: FieldGen[]): fc.Arbitrary<QueryGen> {
  return fc
    .record({
      mode: fc.constantFrom('latest', 'timeline') as fc.Arbitrary<'latest' | 'timeline'>,
      axis: fc.constantFrom('observed_at', 'inserted_at') as fc.Arbitrary<'observed_at' | 'inserted_at'>,
      since: fc.option(instant, { nil: undefined }),
      until: fc.option(instant, { nil: undefined }),
      filters: fc.array(clauseArb(fields), { maxLength: 3 }),
      sort: fc.constantFrom('observed_at', 'inserted_at', 'entity_id') as fc.Arbitrary<RefArgs['sort']>,
      direction: fc.constantFrom('asc', 'desc') as fc.Arbitrary<'asc' | 'desc'>,
      limit: fc.integer({ min: 1, max: 8 }),
      offset: fc.integer({ min: 0, max: 10 }),
      join: fc.option(
        fc.record({ type: fc.constantFrom('left', 'inner') as fc.Arbitrary<'left' | 'inner'>, filters: fc.array(clauseArb(joinFields), { maxLength: 2 }) }),
        { nil: undefined },
      ),
      offsetForm: fc.boolean(),
      withCount: fc.boolean(),
    })
    .map(({ join, offsetForm, withCount, mode, sort, ...rest }) => ({
      // Mostly valid combinations: the invalid ones are each covered by a named test.
      args: { ...rest, mode, sort: mode === 'latest' ? 'observed_at' : sort },
      join: mode === 'latest' ? join : undefined,
      offsetForm,
      withCount,
    }));
}

const caseArb = fc.tuple(fieldsArb, fieldsArb).chain(([fields, joinFields]) =>
  fc.record({
    fields: fc.constant(fields),
    joinFields: fc.constant(joinFields),
    facts: factsArb(fields),
    joinFacts: factsArb(joinFields),
    queries: fc.array(queryArb(fields, joinFields), { minLength: QUERIES_PER_CASE, maxLength: QUERIES_PER_CASE }),
  }),
);

function withOffset(ms: number, offsetForm: boolean): string {
  if (!offsetForm) return new Date(ms).toISOString();
  // The same instant written in UTC+05:30.
  const local = new Date(ms + 330 * 60_000).toISOString().replace('Z', '+05:30');
  return local;
}

async function seed(fields: FieldGen[], facts: Omit<RefFact, 'id'>[]): Promise<RefModel> {
  const specs = [{ name: 'k', type: 'string' as const, is_primary_key: true }, ...fields];
  const model = await createModel(t.deps, tenant, uniqueSlug('p'), specs);
  // Ids made in a shuffled order, so "greater id" is not the insertion order or the time order.
  const withIds = facts.map((f) => ({ ...f, id: uuidv7(BASE + Math.floor(Math.random() * 1000)) }));
  await insertFacts(
    t.deps,
    model,
    withIds.map((f) => ({ id: f.id, entity_id: f.entity_id, observed_at: new Date(f.observed_at), inserted_at: new Date(f.inserted_at), data: f.data })),
  );
  return { slug: model.slug, fields: specs.map((f) => ({ name: f.name, type: f.type })), facts: withIds };
}

const QUERY = `query P($slug: String!, $mode: String, $axis: String, $since: DateTime, $until: DateTime, $filters: String, $sort: String,
  $dir: String, $limit: Int, $offset: Int, $join: String, $joinType: String, $joinFilters: String, $count: Boolean!) {
  factQuery(dataModelSlug: $slug, mode: $mode, timeAxis: $axis, since: $since, until: $until, filters: $filters, sort: $sort,
    sortDirection: $dir, limit: $limit, offset: $offset, joinDataModelSlug: $join, joinType: $joinType, joinFilters: $joinFilters) {
    count @include(if: $count)
    lastPage @include(if: $count)
    hasNextPage hasPreviousPage pageNumber limit
    results { ${FACT_FIELDS} }
  }
}`;

const ASOF_SOURCES: AsOfSource[] = ['history', 'current'];
/** Walk windows just past the page (which the page may or may not fill, so the walk answers or falls back) and a roomy one. */
const WALK_WINDOWS_PAST_PAGE = [1, 2, 4, 1000];

/** Every SQL form of an as-of query gives the reference's page and count, whichever the service picks. */
async function checkAsOfForms(vars: Record<string, unknown>, now: number, expected: RefPage, context: () => string): Promise<void> {
  const principal = { workspaceId: tenant.workspaceId } as Principal;
  const args: Record<string, unknown> = { ...vars, dataModelSlug: vars.slug, timeAxis: vars.axis, sortDirection: vars.dir, joinDataModelSlug: vars.join };
  for (const k of ['since', 'until'] as const) if (typeof vars[k] === 'string') args[k] = new Date(vars[k]);
  const plan = await planFactQuery(t.deps.db, principal.workspaceId, checkArguments(args, new Date(now)));
  const opts = { withData: true, extra: 1 };
  const ids = (rows: { id: string }[]) => rows.slice(0, plan.limit).map((r) => r.id);
  const want = expected.rows.map((r) => r.id);
  for (const asOf of ASOF_SOURCES) {
    const { rows } = await pageSql({ ...plan, asOf }, opts).execute(t.deps.db);
    assert.deepEqual(ids(rows as { id: string }[]), want, `${asOf} page ${context()}`);
    assert.equal(rows.length > plan.limit, expected.hasNextPage, `${asOf} next ${context()}`);
    const { rows: n } = await countSql({ ...plan, asOf }).execute(t.deps.db);
    assert.equal((n[0] as { n: number }).n, expected.count, `${asOf} count ${context()}`);
  }
  for (const window of WALK_WINDOWS_PAST_PAGE.map((k) => plan.offset + plan.limit + k)) {
    const rows = await selectPage(t.deps.db, plan, opts, window);
    assert.deepEqual(ids(rows), want, `window ${window} ${context()}`);
    assert.equal(rows.length > plan.limit, expected.hasNextPage, `window ${window} next ${context()}`);
  }
}

test(`factQuery equals the reference on ${RUNS} random cases`, { timeout: 600_000 }, async () => {
  let checked = 0;
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const model = await seed(c.fields, c.facts);
      const joinModel = await seed(c.joinFields, c.joinFacts);
      for (const q of c.queries) {
        const now = Date.now();
        const refArgs: RefArgs = { ...q.args, join: q.join ? { model: joinModel, type: q.join.type, filters: q.join.filters } : undefined };
        const expected = referenceQuery(model, refArgs, now);
        const vars = {
          slug: model.slug,
          mode: q.args.mode,
          axis: q.args.axis,
          since: q.args.since === undefined ? null : withOffset(q.args.since, q.offsetForm),
          until: q.args.until === undefined ? null : withOffset(q.args.until, q.offsetForm),
          filters: q.args.filters.length > 0 ? JSON.stringify(q.args.filters) : null,
          sort: q.args.sort,
          dir: q.args.direction,
          limit: q.args.limit,
          offset: q.args.offset,
          join: q.join ? joinModel.slug : null,
          joinType: q.join?.type ?? null,
          joinFilters: q.join && q.join.filters.length > 0 ? JSON.stringify(q.join.filters) : null,
          count: q.withCount,
        };
        const r = await gql<{ factQuery: any }>(client, QUERY, vars);
        const context = () => JSON.stringify({ vars, facts: model.facts, joinFacts: joinModel.facts, response: r });
        assert.equal(r.status, 200, context());
        if (expected === 'invalid') {
          assert.equal(r.errors?.[0]?.extensions?.code, 'graphql_validation', context());
          continue;
        }
        assert.equal(r.errors, undefined, context());
        const page = r.data!.factQuery;
        const got = (page.results as ApiFact[]).map((f) => ({
          id: f.id,
          entity_id: f.entityId,
          observed_at: Date.parse(f.observedAt),
          inserted_at: Date.parse(f.insertedAt),
          data: JSON.parse(f.data),
        }));
        assert.deepEqual(got, expected.rows, context());
        assert.equal(page.hasNextPage, expected.hasNextPage, context());
        assert.equal(page.hasPreviousPage, expected.hasPreviousPage, context());
        assert.equal(page.pageNumber, expected.pageNumber, context());
        assert.equal(page.limit, q.args.limit, context());
        if (q.withCount) {
          assert.equal(page.count, expected.count, context());
          assert.equal(page.lastPage, expected.lastPage, context());
        } else {
          assert.equal('count' in page, false);
        }
        if (q.args.mode === 'latest' && q.args.until !== undefined) await checkAsOfForms(vars, now, expected, context);
        checked++;
      }
    }),
    { numRuns: RUNS },
  );
  assert.ok(checked > RUNS, `only ${checked} queries were answered rather than refused`);
});
