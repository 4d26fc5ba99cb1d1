/**
 * factAggregate against a plain computation over factQuery's pages: random facts (values of
 * the wrong JSON type included, null entity ids, equal times), filters, joins, groupBy,
 * measures, buckets and time zones whose DST changes fall inside the facts' times. Every
 * case pages through factQuery with the same query arguments, groups and measures those
 * facts in JavaScript (buckets by the zone's wall clock, read with Intl, and that wall time's
 * instant as PostgreSQL reads a local time), and must get the
 * same groups, in the documented default order, with the same values; a smaller limit must
 * answer the first groups of that order and say they were cut.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, gql, gqlClient, insertFacts, uniqueSlug, type Model } from './helpers.ts';
import { runs } from '../helpers/property.ts';

const RUNS = runs(40);

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

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
/** DST changes of 2026: New York (spring, fall), Berlin (spring, fall), Lord Howe (fall back 30 min, spring forward 30 min). */
const CHANGES = [
  '2026-03-08T07:00:00Z',
  '2026-11-01T06:00:00Z',
  '2026-03-29T01:00:00Z',
  '2026-10-25T01:00:00Z',
  '2026-04-04T15:00:00Z',
  '2026-10-03T15:30:00Z',
].map((s) => Date.parse(s));
const ZONES = ['UTC', 'America/New_York', 'Europe/Berlin', 'Australia/Lord_Howe'];
const UNITS = ['minute', 'hour', 'day', 'week', 'month'] as const;
const ENTITIES = ['e1', 'e2', 'e3', 'E4'];
const STRINGS = ['a', 'b', 'ab', 'B', 'é'];

interface GenFact {
  entity_id: string | null;
  observed_at: number;
  inserted_at: number;
  data: Record<string, unknown>;
}

// Mostly values of the field's type, sometimes another JSON type (as after a retype), null or absent.
const member = (typed: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 6, arbitrary: typed },
    { weight: 1, arbitrary: fc.constantFrom('x', 3, true, [1]) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
const when = (change: number) =>
  fc.oneof(
    fc.integer({ min: -3 * 24 * 4, max: 3 * 24 * 4 }).map((q) => change + q * 15 * MIN),
    fc.integer({ min: -90, max: 90 }).map((m) => change + m * MIN),
  );

const factsArb = fc.constantFrom(...CHANGES).chain((change) =>
  fc.array(
    fc
      .record({
        entity_id: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...ENTITIES) }, { weight: 1, arbitrary: fc.constant(null) }),
        observed_at: when(change),
        inserted_at: when(change),
        s: member(fc.constantFrom(...STRINGS)),
        n: member(fc.integer({ min: -3, max: 3 })),
        f: member(fc.constantFrom(-1.5, 0, 0.25, 2.75)),
        b: member(fc.boolean()),
      })
      .map(({ entity_id, observed_at, inserted_at, ...values }): GenFact => {
        const data: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(values)) if (v !== undefined) data[k] = v;
        return { entity_id, observed_at, inserted_at, data };
      }),
    { maxLength: 30 },
  ),
);

const joinFactsArb = fc.array(
  fc.record({ entity_id: fc.constantFrom(...ENTITIES), observed_at: fc.constantFrom(...CHANGES), r: member(fc.constantFrom('north', 'south')) }),
  { maxLength: 6 },
);

const filterArb = fc.constantFrom(
  [],
  [{ field: 's', op: 'eq', value: 'a' }],
  [{ field: 'n', op: 'gte', value: 0 }],
  [{ field: 'b', op: 'ne', value: true }],
  [{ field: 's', op: 'in', value: ['a', 'B', 'é'] }],
  [
    { field: 'f', op: 'is_null', value: false },
    { field: 'n', op: 'lt', value: 2 },
  ],
);

interface Measure {
  op: string;
  field?: string;
}
const measureArb = fc.constantFrom<Measure>(
  { op: 'count' },
  { op: 'count_distinct_entities' },
  { op: 'sum', field: 'n' },
  { op: 'sum', field: 'f' },
  { op: 'avg', field: 'f' },
  { op: 'avg', field: 'n' },
  { op: 'min', field: 'f' },
  { op: 'max', field: 'n' },
);

const caseArb = fc.record({
  facts: factsArb,
  joinFacts: joinFactsArb,
  mode: fc.constantFrom('latest', 'timeline'),
  axis: fc.constantFrom('observed_at', 'inserted_at'),
  asOf: fc.option(fc.integer({ min: -2 * DAY, max: 2 * DAY }), { nil: undefined }),
  filters: filterArb,
  join: fc.option(fc.constantFrom('left', 'inner'), { nil: undefined }),
  groupBy: fc.subarray(['s', 'n', 'b', 'join.r'], { maxLength: 3 }),
  bucket: fc.option(fc.constantFrom(...UNITS), { nil: undefined }),
  timezone: fc.constantFrom(...ZONES),
  weekStart: fc.constantFrom('monday', 'sunday'),
  measures: fc.uniqueArray(measureArb, { minLength: 1, maxLength: 3, selector: (m) => `${m.op}/${m.field}` }),
  limit: fc.integer({ min: 1, max: 4 }),
});

/** The wall clock of an instant in a zone, truncated to a bucket's start, as YYYY-MM-DDTHH:mm. */
function wallBucket(ms: number, zone: string, unit: (typeof UNITS)[number], weekStart: string): string {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
  }).formatToParts(new Date(ms));
  const n = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  let d = new Date(Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute')));
  if (unit !== 'minute') d.setUTCMinutes(0);
  if (unit === 'day' || unit === 'week' || unit === 'month') d.setUTCHours(0);
  if (unit === 'week') {
    const back = (d.getUTCDay() - (weekStart === 'monday' ? 1 : 0) + 7) % 7;
    d = new Date(d.getTime() - back * DAY);
  }
  if (unit === 'month') d.setUTCDate(1);
  return d.toISOString().slice(0, 16);
}

/** The wall clock of an instant in a zone, as milliseconds of a UTC date with the same fields. */
function wallOf(ms: number, zone: string): number {
  return Date.parse(`${wallBucket(ms, zone, 'minute', 'monday')}:00Z`) + (ms % MIN);
}

/**
 * The instant a zone's wall-clock time names: where it names two (clocks went back), the
 * later; where it names none (clocks went forward past it), read with the offset before
 * the change. PostgreSQL's reading of a local time (timestamp AT TIME ZONE).
 */
function instantOf(wall: string, zone: string): string {
  const w = Date.parse(`${wall}:00Z`);
  const offsets = [w - DAY, w + DAY].map((probe) => wallOf(probe, zone) - probe);
  const named = offsets.map((o) => w - o).filter((x) => wallOf(x, zone) === w);
  return new Date(named.length > 0 ? Math.max(...named) : w - offsets[0]!).toISOString();
}

type Key = string | number | boolean | null;
const typed = (v: unknown, type: 'string' | 'number' | 'boolean'): Key => (typeof v === type ? (v as Key) : null);
const TYPE_OF: Record<string, 'string' | 'number' | 'boolean'> = { s: 'string', n: 'number', b: 'boolean', r: 'string' };

/** Ascending, nulls last, strings by code point (UTF-8 byte order for these). */
function compareKeys(a: Key, b: Key): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

interface RefGroup {
  keys: Key[];
  bucket: string | null;
  values: (number | null)[];
}

function measure(m: Measure, rows: { entity: string; data: Record<string, unknown> }[]): number | null {
  if (m.op === 'count') return rows.length;
  if (m.op === 'count_distinct_entities') return new Set(rows.map((r) => r.entity)).size;
  const nums = rows.map((r) => r.data[m.field!]).filter((v): v is number => typeof v === 'number');
  if (nums.length === 0) return null;
  const sum = nums.reduce((x, y) => x + y, 0);
  return m.op === 'sum' ? sum : m.op === 'avg' ? sum / nums.length : m.op === 'min' ? Math.min(...nums) : Math.max(...nums);
}

const Q = `query($s: String!, $mode: String, $axis: String, $since: DateTime, $until: DateTime, $filters: String, $j: String, $jt: String, $offset: Int) {
  factQuery(dataModelSlug: $s, mode: $mode, timeAxis: $axis, since: $since, until: $until, filters: $filters, joinDataModelSlug: $j, joinType: $jt, limit: 250, offset: $offset) {
    hasNextPage results { id entityId observedAt insertedAt data } } }`;

const A = `query($s: String!, $mode: String, $axis: String, $since: DateTime, $until: DateTime, $filters: String, $j: String, $jt: String,
  $groupBy: [String!], $bucket: String, $tz: String, $ws: String, $measures: [FactMeasureInput!], $limit: Int) {
  factAggregate(dataModelSlug: $s, mode: $mode, timeAxis: $axis, since: $since, until: $until, filters: $filters, joinDataModelSlug: $j, joinType: $jt,
    groupBy: $groupBy, bucket: $bucket, timezone: $tz, weekStart: $ws, measures: $measures, limit: $limit) {
    groupsCut groups { keys { field string number boolean dateTime json } bucket values { name value } } } }`;

test('factAggregate equals a plain computation over the facts of factQuery pages', async () => {
  let cases = 0;
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      cases++;
      const fields = [
        { name: 'id', type: 'string' as const },
        { name: 's', type: 'string' as const },
        { name: 'n', type: 'integer' as const, is_indexed: cases % 2 === 0 },
        { name: 'f', type: 'float' as const },
        { name: 'b', type: 'boolean' as const },
      ];
      const model: Model = await createModel(t.deps, tenant, uniqueSlug('agg'), fields);
      await insertFacts(t.deps, model, c.facts);
      const latest = c.mode === 'latest';
      const join = latest ? c.join : undefined;
      let joinSlug: string | undefined;
      if (join !== undefined) {
        const jm = await createModel(t.deps, tenant, uniqueSlug('aggj'), [{ name: 'r', type: 'string' }]);
        await insertFacts(
          t.deps,
          jm,
          c.joinFacts.map((f) => ({ entity_id: f.entity_id, observed_at: f.observed_at, data: f.r === undefined ? {} : { r: f.r } })),
        );
        joinSlug = jm.slug;
      }
      const groupBy = c.groupBy.filter((g) => g !== 'join.r' || joinSlug !== undefined).map((g) => (g === 'join.r' ? `${joinSlug}.r` : g));
      const times = c.facts.flatMap((f) => [f.observed_at, f.inserted_at]);
      const mid = times.length > 0 ? times[0]! : CHANGES[0]!;
      const since = latest ? undefined : new Date(Math.min(mid, ...times) - DAY).toISOString();
      const until = latest ? (c.asOf === undefined ? undefined : new Date(mid + c.asOf).toISOString()) : new Date(Math.max(mid, ...times) + DAY).toISOString();
      const vars = {
        s: model.slug,
        mode: c.mode,
        axis: c.axis,
        since,
        until,
        filters: JSON.stringify(c.filters),
        j: joinSlug,
        jt: join,
      };

      // The facts, as factQuery pages them.
      const rows: { entity: string; data: Record<string, unknown>; time: number }[] = [];
      for (let offset = 0; ; offset += 250) {
        const r = await gql(client, Q, { ...vars, offset });
        assert.equal(r.errors, undefined, JSON.stringify(r.errors));
        for (const f of r.data.factQuery.results)
          rows.push({
            entity: f.entityId ?? `#${f.id}`,
            data: typeof f.data === 'string' ? JSON.parse(f.data) : f.data,
            time: Date.parse(c.axis === 'observed_at' ? f.observedAt : f.insertedAt),
          });
        if (!r.data.factQuery.hasNextPage) break;
      }

      // The plain computation.
      const bucketOf = (ms: number) => (c.bucket === undefined ? null : instantOf(wallBucket(ms, c.timezone, c.bucket, c.weekStart), c.timezone));
      const keysOf = (data: Record<string, unknown>): Key[] =>
        groupBy.map((g) => {
          const dot = g.indexOf('.');
          if (dot < 0) return typed(data[g], TYPE_OF[g]!);
          const joined = data[g.slice(0, dot)] as Record<string, unknown>;
          return typed(joined[g.slice(dot + 1)], 'string');
        });
      const groups = new Map<string, { keys: Key[]; bucket: string | null; rows: typeof rows }>();
      for (const r of rows) {
        const keys = keysOf(r.data);
        const bucket = bucketOf(r.time);
        const id = JSON.stringify([keys, bucket]);
        const g = groups.get(id) ?? { keys, bucket, rows: [] };
        g.rows.push(r);
        groups.set(id, g);
      }
      if (groups.size === 0 && groupBy.length === 0 && c.bucket === undefined) groups.set('[]', { keys: [], bucket: null, rows: [] });
      const expected: RefGroup[] = [...groups.values()].map((g) => ({ keys: g.keys, bucket: g.bucket, values: c.measures.map((m) => measure(m, g.rows)) }));
      const byKeys = (a: RefGroup, b: RefGroup) => {
        for (let i = 0; i < a.keys.length; i++) {
          const d = compareKeys(a.keys[i]!, b.keys[i]!);
          if (d !== 0) return d;
        }
        return 0;
      };
      expected.sort((a, b) =>
        c.bucket !== undefined
          ? a.bucket!.localeCompare(b.bucket!) || byKeys(a, b)
          : compareKeys(b.values[0] ?? null, a.values[0] ?? null) * (a.values[0] === null || b.values[0] === null ? -1 : 1) || byKeys(a, b),
      );

      // factAggregate, whole and cut.
      const measures = c.measures.map((m) => (m.field === undefined ? { op: m.op } : { op: m.op, field: m.field }));
      const ask = async (limit: number) => {
        const r = await gql(client, A, { ...vars, groupBy, bucket: c.bucket, tz: c.timezone, ws: c.weekStart, measures, limit });
        assert.equal(r.errors, undefined, JSON.stringify(r.errors));
        return r.data.factAggregate as {
          groupsCut: boolean;
          groups: { keys: Record<string, unknown>[]; bucket: string | null; values: { value: number | null }[] }[];
        };
      };
      const shape = (a: Awaited<ReturnType<typeof ask>>): RefGroup[] =>
        a.groups.map((g) => ({
          keys: g.keys.map((k) => (k.string ?? k.number ?? k.boolean ?? null) as Key),
          bucket: g.bucket,
          values: g.values.map((v) => v.value),
        }));
      const close = (got: RefGroup[], want: RefGroup[]) => {
        assert.equal(got.length, want.length, JSON.stringify({ got, want }));
        got.forEach((g, i) => {
          const w = want[i]!;
          assert.deepEqual([g.keys, g.bucket], [w.keys, w.bucket], JSON.stringify({ got, want }));
          g.values.forEach((v, j) => {
            const e = w.values[j]!;
            if (v === null || e === null) assert.equal(v, e, JSON.stringify({ got, want }));
            else assert.ok(Math.abs(v - e) < 1e-9, JSON.stringify({ got, want }));
          });
        });
      };
      const whole = await ask(10_000);
      assert.equal(whole.groupsCut, false);
      close(shape(whole), expected);
      const cut = await ask(c.limit);
      assert.equal(cut.groupsCut, expected.length > c.limit);
      close(shape(cut), expected.slice(0, c.limit));
    }),
    { numRuns: RUNS },
  );
});
