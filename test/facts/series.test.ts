/**
 * factAggregate's series (runSeries): per bucket the latest-state aggregate as of the
 * bucket's end. The property compares it with factQuery's own as-of reader (planFactQuery,
 * selectPage and selectCount with `until = end(b) - 1 ms`), grouped and summed here, for
 * random facts, filters, groupBy, measures, axes, buckets and time zones, with windows
 * around DST changes. The bucket boundaries of the reference are computed here from
 * Intl's local calendar, not from the SQL under test.
 */
import fs from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { appWithTenant } from '../helpers/app.ts';
import { runs } from '../helpers/property.ts';
import { createModel, insertFacts, uniqueSlug } from '../graphql/helpers.ts';
import { uuidv7 } from '../../src/ids.ts';
import { loadModel, type DataModelWithFields } from '../../src/facts/models.sql.ts';
import { planFactQuery } from '../../src/facts/query/plan.ts';
import { selectCount, selectPage } from '../../src/facts/query/page.sql.ts';
import type { RawClause } from '../../src/facts/query/filters.ts';
import { MAX_SERIES_BUCKETS, runSeries } from '../../src/facts/aggregate/series.sql.ts';
import type { AggregateBucket, AggregateMeasure, AggregatePlan, AggregateResult, BucketUnit, MeasureOp } from '../../src/facts/aggregate/plan-types.ts';
import { AppError } from '../../src/errors.ts';

const { t, tenant } = await appWithTenant();
const db = t.deps.db;

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

const FIELDS = [
  { name: 'k', type: 'string' as const, is_primary_key: true },
  { name: 'status', type: 'string' as const },
  { name: 'n', type: 'integer' as const },
  { name: 'flag', type: 'boolean' as const },
  { name: 'amount', type: 'integer' as const },
];

async function newModel(): Promise<{ model: DataModelWithFields; seed: Awaited<ReturnType<typeof createModel>> }> {
  const seed = await createModel(t.deps, tenant, uniqueSlug('s'), FIELDS);
  return { model: (await loadModel(db, tenant.workspaceId, seed.slug))!, seed };
}

function plan(model: DataModelWithFields, o: Partial<AggregatePlan> & { bucket: AggregateBucket; since: Date; until: Date }): AggregatePlan {
  return {
    workspaceId: tenant.workspaceId,
    model,
    mode: 'latest',
    axis: 'observed_at',
    filters: [],
    join: undefined,
    groupBy: [],
    series: true,
    measures: [{ name: 'count', op: 'count' }],
    orderBy: [],
    limit: 10_000,
    ...o,
  };
}

const field = (model: DataModelWithFields, name: string) => {
  const f = model.fields.find((x) => x.name === name)!;
  return { source: 'model' as const, field: f, path: name };
};

// ---- The reference's buckets: Intl's local calendar, boundaries found by stepping 15 minutes (every zone's offset is a multiple of 15 minutes).

const formatters = new Map<string, Intl.DateTimeFormat>();
function localParts(ms: number, tz: string): Record<string, string> {
  let f = formatters.get(tz);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      weekday: 'short',
      timeZoneName: 'longOffset',
    });
    formatters.set(tz, f);
  }
  return Object.fromEntries(f.formatToParts(ms).map((p) => [p.type, p.value]));
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

function label(ms: number, b: AggregateBucket): string {
  if (b.unit === 'minute') return String(Math.floor(ms / MIN));
  const p = localParts(ms, b.timezone);
  if (b.unit === 'hour') return `${p.year}-${p.month}-${p.day}T${p.hour} ${p.timeZoneName}`;
  if (b.unit === 'day') return `${p.year}-${p.month}-${p.day}`;
  if (b.unit === 'month') return `${p.year}-${p.month}`;
  const back = (WEEKDAYS.indexOf(p.weekday!) - (b.weekStart === 'sunday' ? 0 : 1) + 7) % 7;
  return new Date(Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day) - back)).toISOString().slice(0, 10);
}

/** Bucket starts of [since, until) and the last bucket's end, as runSeries defines them. */
function referenceStarts(b: AggregateBucket, since: number, until: number): number[] {
  const step = b.unit === 'minute' ? MIN : 15 * MIN;
  const margin = b.unit === 'minute' ? MIN : b.unit === 'hour' ? 3 * HOUR : 40 * DAY;
  const boundaries: number[] = [];
  let at = Math.floor((since - margin) / step) * step;
  let prev = label(at, b);
  for (at += step; at <= until + margin; at += step) {
    const l = label(at, b);
    if (l !== prev) boundaries.push(at);
    prev = l;
  }
  const first = boundaries.findLastIndex((x) => x <= since);
  const last = boundaries.findIndex((x) => x >= until);
  return boundaries.slice(first, last + 1);
}

// ---- The reference's values: factQuery as of each bucket's end, grouped and measured here.

type Typed = string | number | boolean | null;

function typedValue(data: Record<string, unknown>, name: string, type: string): Typed {
  const v = data[name];
  if (type === 'integer' || type === 'float') return typeof v === 'number' ? v : null;
  if (type === 'boolean') return typeof v === 'boolean' ? v : null;
  if (type === 'string') return typeof v === 'string' ? v : null;
  return null;
}

interface Case {
  axis: 'observed_at' | 'inserted_at';
  bucket: AggregateBucket;
  since: number;
  until: number;
  clauses: RawClause[];
  groupBy: string[];
  ops: MeasureOp[];
}

async function reference(model: DataModelWithFields, c: Case): Promise<Map<string, (number | null)[]>> {
  const starts = referenceStarts(c.bucket, c.since, c.until);
  const perBucket: Map<string, (number | null)[]>[] = [];
  const groups = new Map<string, Typed[]>();
  for (let i = 0; i + 1 < starts.length; i++) {
    const p = await planFactQuery(db, tenant.workspaceId, {
      slug: model.slug,
      mode: 'latest',
      axis: c.axis,
      sort: 'observed_at',
      direction: 'desc',
      limit: 1000,
      offset: 0,
      since: undefined,
      until: new Date(starts[i + 1]! - 1),
      joinSlug: undefined,
      joinType: 'left',
      filters: c.clauses,
      joinFilters: [],
    });
    const [rows, count] = await Promise.all([selectPage(db, p, { withData: true, extra: 0 }), selectCount(db, { ...p })]);
    assert.equal(rows.length, count, 'page and count of the reference agree');
    const byGroup = new Map<string, Record<string, unknown>[]>();
    for (const r of rows) {
      const data = r.data as Record<string, unknown>;
      const keys = c.groupBy.map((g) => typedValue(data, g, FIELDS.find((f) => f.name === g)!.type));
      const key = JSON.stringify(keys);
      groups.set(key, keys);
      byGroup.set(key, [...(byGroup.get(key) ?? []), data]);
    }
    const values = new Map<string, (number | null)[]>();
    for (const [key, facts] of byGroup) {
      const ns = facts.map((d) => typedValue(d, 'n', 'integer')).filter((v): v is number => v !== null);
      values.set(
        key,
        c.ops.map((op) => {
          if (op === 'count' || op === 'count_distinct_entities') return facts.length;
          if (ns.length === 0) return null;
          if (op === 'sum') return ns.reduce((a, b) => a + b, 0);
          if (op === 'avg') return ns.reduce((a, b) => a + b, 0) / ns.length;
          return op === 'min' ? Math.min(...ns) : Math.max(...ns);
        }),
      );
    }
    perBucket.push(values);
  }
  if (c.groupBy.length === 0) groups.set('[]', []);
  const out = new Map<string, (number | null)[]>();
  perBucket.forEach((values, i) => {
    for (const key of groups.keys()) {
      out.set(
        `${new Date(starts[i]!).toISOString()} ${key}`,
        values.get(key) ?? c.ops.map((op) => (op === 'count' || op === 'count_distinct_entities' ? 0 : null)),
      );
    }
  });
  return out;
}

function measured(r: AggregateResult): Map<string, (number | null)[]> {
  return new Map(r.rows.map((row) => [`${row.bucket!.toISOString()} ${JSON.stringify(row.keys)}`, row.values]));
}

function assertClose(actual: Map<string, (number | null)[]>, expected: Map<string, (number | null)[]>, context: string): void {
  assert.deepEqual([...actual.keys()].sort(), [...expected.keys()].sort(), `groups and buckets ${context}`);
  for (const [key, want] of expected) {
    const got = actual.get(key)!;
    want.forEach((w, i) => {
      const g = got[i]!;
      if (w === null || g === null) assert.equal(g, w, `${key} measure ${i} ${context}`);
      else assert.ok(Math.abs(g - w) <= 1e-9 * Math.max(1, Math.abs(w)), `${key} measure ${i}: ${g} vs ${w} ${context}`);
    });
  }
}

// ---- Random cases.

/** Windows open near DST changes: New York's spring and autumn, Europe's, Sydney's autumn. */
const ANCHORS = [
  Date.parse('2026-03-08T07:00:00Z'),
  Date.parse('2026-11-01T06:00:00Z'),
  Date.parse('2026-03-29T01:00:00Z'),
  Date.parse('2026-10-25T01:00:00Z'),
  Date.parse('2026-04-04T16:00:00Z'),
];
const ZONES = ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Kolkata', 'America/St_Johns', 'Australia/Sydney'];
const SPAN: Record<BucketUnit, number> = { minute: 40 * MIN, hour: 40 * HOUR, day: 20 * DAY, week: 9 * 7 * DAY, month: 150 * DAY };

const bucketArb = fc.record({
  unit: fc.constantFrom<BucketUnit>('minute', 'hour', 'day', 'week', 'month'),
  timezone: fc.constantFrom(...ZONES),
  weekStart: fc.constantFrom<'monday' | 'sunday'>('monday', 'sunday'),
});

const caseArb = bucketArb.chain((bucket) =>
  fc.record({
    axis: fc.constantFrom<'observed_at' | 'inserted_at'>('observed_at', 'inserted_at'),
    bucket: fc.constant(bucket),
    since: fc.tuple(fc.constantFrom(...ANCHORS), fc.double({ min: -0.5, max: 0.5, noNaN: true })).map(([a, f]) => Math.round(a + f * SPAN[bucket.unit])),
    length: fc.double({ min: 0.05, max: 1, noNaN: true }).map((f) => Math.max(1, Math.round(f * SPAN[bucket.unit]))),
    clauses: fc.array(
      fc.oneof(
        fc.record({ field: fc.constant('status'), op: fc.constantFrom<'eq' | 'ne'>('eq', 'ne'), value: fc.constantFrom('open', 'closed') }),
        fc.record({ field: fc.constant('status'), op: fc.constant<'is_null'>('is_null'), value: fc.boolean() }),
        fc.record({ field: fc.constant('n'), op: fc.constantFrom<'gte' | 'lt'>('gte', 'lt'), value: fc.integer({ min: -2, max: 4 }) }),
        fc.record({ field: fc.constant('flag'), op: fc.constant<'eq'>('eq'), value: fc.boolean() }),
      ),
      { maxLength: 2 },
    ),
    groupBy: fc.subarray(['status', 'n', 'flag'], { maxLength: 2 }).chain((xs) => fc.shuffledSubarray(xs, { minLength: xs.length, maxLength: xs.length })),
    ops: fc.subarray<MeasureOp>(['count', 'count_distinct_entities', 'sum', 'avg', 'min', 'max'], { minLength: 1 }),
    // Fact times: a fraction of the window (some before it), or a bucket boundary and a millisecond either side.
    times: fc.array(
      fc.record({
        observed: fc.oneof(fc.double({ min: -0.3, max: 1.1, noNaN: true }), fc.tuple(fc.nat(40), fc.constantFrom(-1, 0, 1))),
        inserted: fc.oneof(fc.double({ min: -0.3, max: 1.1, noNaN: true }), fc.tuple(fc.nat(40), fc.constantFrom(-1, 0, 1))),
        entity: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('e1', 'e2', 'e3', 'e4', 'e5') }, { weight: 1, arbitrary: fc.constant(null) }),
        status: fc.constantFrom<unknown>('open', 'closed', undefined, 3),
        n: fc.constantFrom<unknown>(-2, 0, 1, 4, 2.5, undefined, '7'),
        flag: fc.constantFrom<unknown>(true, false, undefined),
      }),
      { maxLength: 30 },
    ),
  }),
);

test('series equals factQuery as of each bucket end, grouped and measured', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, async (g) => {
      const c: Case = { ...g, until: g.since + g.length };
      const starts = referenceStarts(c.bucket, c.since, c.until);
      const at = (x: number | [number, number]) => (typeof x === 'number' ? Math.round(c.since + x * g.length) : starts[x[0] % starts.length]! + x[1]);
      const { model, seed } = await newModel();
      await insertFacts(
        t.deps,
        seed,
        g.times.map((f) => {
          const data: Record<string, unknown> = {};
          if (f.entity !== null) data.k = f.entity;
          for (const k of ['status', 'n', 'flag'] as const) if (f[k] !== undefined) data[k] = f[k];
          return { id: uuidv7(), entity_id: f.entity, observed_at: new Date(at(f.observed)), inserted_at: new Date(at(f.inserted)), data };
        }),
      );
      const expected = await reference(model, c);
      const typed = await planFactQuery(db, tenant.workspaceId, {
        slug: model.slug,
        mode: 'latest',
        axis: c.axis,
        sort: 'observed_at',
        direction: 'desc',
        limit: 1,
        offset: 0,
        since: undefined,
        until: undefined,
        joinSlug: undefined,
        joinType: 'left',
        filters: c.clauses,
        joinFilters: [],
      });
      const measures: AggregateMeasure[] = c.ops.map((op) =>
        op === 'count' || op === 'count_distinct_entities' ? { name: op, op } : { name: `${op}_n`, op, field: field(model, 'n') },
      );
      const result = await runSeries(
        db,
        plan(model, {
          axis: c.axis,
          bucket: c.bucket,
          since: new Date(c.since),
          until: new Date(c.until),
          filters: typed.filters,
          groupBy: c.groupBy.map((name) => field(model, name)),
          measures,
        }),
      );
      assert.equal(result.cut, false);
      const context = JSON.stringify({ ...c, since: new Date(c.since), until: new Date(c.until) });
      assertClose(measured(result), expected, context);
      // Default order: bucket ascending.
      const buckets = result.rows.map((r) => r.bucket!.getTime());
      assert.deepEqual(
        buckets,
        [...buckets].sort((a, b) => a - b),
        `bucket order ${context}`,
      );
    }),
    { numRuns: runs(60) },
  );
});

test('open orders at the end of each day: the example of docs/graphql-series.md, read from it', async () => {
  const doc = fs.readFileSync(new URL('../../docs/graphql-series.md', import.meta.url), 'utf8');
  const table = [...doc.matchAll(/^\| (o\d) +\| (\S+) +\| (\w+) +\| (\d+) +\|$/gm)];
  const graphql = doc.slice(doc.indexOf('```graphql'), doc.indexOf('```json'));
  const arg = (name: string) => JSON.parse(new RegExp(`${name}: ("(?:[^"\\\\]|\\\\.)*")`).exec(graphql)![1]!) as string;
  const answer = JSON.parse(doc.slice(doc.indexOf('```json') + 7, doc.indexOf('```', doc.indexOf('```json') + 7))) as {
    data: { factAggregate: { groups: Array<{ bucket: string; values: Array<{ value: number | null }> }> } };
  };
  assert.equal(table.length, 5);
  const { model, seed } = await newModel();
  await insertFacts(
    t.deps,
    seed,
    table.map(([, k, at, status, amount]) => ({ entity_id: k!, observed_at: new Date(at!), data: { k, status, amount: Number(amount) } })),
  );
  const typed = await planFactQuery(db, tenant.workspaceId, {
    ...{ slug: model.slug, mode: 'latest', axis: 'observed_at', sort: 'observed_at', direction: 'desc', limit: 1, offset: 0 },
    ...{ since: undefined, until: undefined, joinSlug: undefined, joinType: 'left', joinFilters: [] },
    filters: JSON.parse(arg('filters')) as RawClause[],
  });
  const r = await runSeries(
    db,
    plan(model, {
      bucket: { unit: arg('bucket') as BucketUnit, timezone: 'UTC', weekStart: 'monday' },
      since: new Date(arg('since')),
      until: new Date(arg('until')),
      filters: typed.filters,
      measures: [
        { name: 'count', op: 'count' },
        { name: 'sum_amount', op: 'sum', field: field(model, 'amount') },
      ],
    }),
  );
  assert.deepEqual(
    r.rows.map((x) => [x.bucket!.toISOString(), ...x.values]),
    answer.data.factAggregate.groups.map((g) => [g.bucket, ...g.values.map((v) => v.value)]),
  );
});

test('groups, order and limit: every bucket of a group that ever had entities, cut past the limit', async () => {
  const { model, seed } = await newModel();
  await insertFacts(t.deps, seed, [
    { entity_id: 'a', observed_at: new Date('2026-01-01T05:00:00Z'), data: { k: 'a', status: 'open' } },
    { entity_id: 'b', observed_at: new Date('2026-01-02T05:00:00Z'), data: { k: 'b', status: 'closed' } },
    // Open and closed within one day: never open at a day's end, so no "void" group.
    { entity_id: 'c', observed_at: new Date('2026-01-02T06:00:00Z'), data: { k: 'c', status: 'void' } },
    { entity_id: 'c', observed_at: new Date('2026-01-02T07:00:00Z'), data: { k: 'c', status: 'open' } },
  ]);
  const base = plan(model, {
    bucket: { unit: 'day', timezone: 'UTC', weekStart: 'monday' },
    since: new Date('2026-01-01T00:00:00Z'),
    until: new Date('2026-01-03T00:00:00Z'),
    groupBy: [field(model, 'status')],
  });
  const r = await runSeries(db, base);
  assert.deepEqual(
    r.rows.map((x) => [x.bucket!.toISOString().slice(0, 10), ...x.keys, ...x.values]),
    [
      ['2026-01-01', 'closed', 0],
      ['2026-01-01', 'open', 1],
      ['2026-01-02', 'closed', 1],
      ['2026-01-02', 'open', 2],
    ],
  );
  assert.equal(r.cut, false);
  const ordered = await runSeries(db, { ...base, limit: 3, orderBy: [{ by: { kind: 'measure', index: 0 }, direction: 'desc' }] });
  assert.deepEqual(
    ordered.rows.map((x) => [x.bucket!.toISOString().slice(0, 10), ...x.keys, ...x.values]),
    [
      ['2026-01-02', 'open', 2],
      ['2026-01-01', 'open', 1],
      ['2026-01-02', 'closed', 1],
    ],
  );
  assert.equal(ordered.cut, true);
});

test('another workspace sees nothing of the model; an empty window still has every bucket', async () => {
  const { model, seed } = await newModel();
  await insertFacts(t.deps, seed, [{ entity_id: 'a', observed_at: new Date('2026-01-01T05:00:00Z'), data: { k: 'a', status: 'open' } }]);
  const p = plan(model, {
    bucket: { unit: 'hour', timezone: 'UTC', weekStart: 'monday' },
    since: new Date('2026-01-01T04:30:00Z'),
    until: new Date('2026-01-01T07:00:00Z'),
  });
  const mine = await runSeries(db, p);
  assert.deepEqual(
    mine.rows.map((x) => x.values[0]),
    [0, 1, 1],
  );
  const other = await runSeries(db, { ...p, workspaceId: uuidv7() });
  assert.deepEqual(
    other.rows.map((x) => [x.bucket!.toISOString(), x.values[0]]),
    [
      ['2026-01-01T04:00:00.000Z', 0],
      ['2026-01-01T05:00:00.000Z', 0],
      ['2026-01-01T06:00:00.000Z', 0],
    ],
  );
});

test('refusals: more than MAX_SERIES_BUCKETS buckets (on bucket), a join (on joinDataModelSlug)', async () => {
  const { model } = await newModel();
  const day = { unit: 'day' as const, timezone: 'Europe/Berlin', weekStart: 'monday' as const };
  const since = new Date('2026-01-01T00:00:00Z');
  const refused = async (p: AggregatePlan, parameter: string, pattern: RegExp) =>
    assert.rejects(
      runSeries(db, p),
      (e: unknown) => e instanceof AppError && e.code === 'invalid_query' && e.source?.parameter === parameter && pattern.test(e.message),
    );
  // 1,000 days are allowed, 1,001 are not (the window's count named), however far the window reaches.
  const ok = await runSeries(db, plan(model, { bucket: day, since, until: new Date(since.getTime() + MAX_SERIES_BUCKETS * DAY - 2 * HOUR) }));
  assert.equal(ok.rows.length, MAX_SERIES_BUCKETS);
  await refused(
    plan(model, { bucket: day, since, until: new Date(since.getTime() + (MAX_SERIES_BUCKETS + 1) * DAY) }),
    'bucket',
    /has 100[12] buckets; at most 1000/,
  );
  await refused(plan(model, { bucket: { ...day, unit: 'minute' }, since, until: new Date(since.getTime() + 365 * DAY) }), 'bucket', /at most 1000/);
  await refused(
    plan(model, { bucket: day, since, until: new Date(since.getTime() + DAY), join: { model, type: 'left', filters: [] } }),
    'joinDataModelSlug',
    /series/,
  );
});
