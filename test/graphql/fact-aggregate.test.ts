/**
 * factAggregate end to end: latest groups (as of, joins, groupBy on joined fields), timeline
 * buckets in a time zone, measures and their nulls, order and limits, every invalid argument
 * named, another workspace's model indistinguishable from an unknown slug, the cost limits,
 * and the metrics it records.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, gql, gqlClient, insertFacts, onlyCode, uniqueSlug, type Model } from './helpers.ts';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let client: ReturnType<typeof gqlClient>;
let otherClient: ReturnType<typeof gqlClient>;
let orders: Model;
let customers: Model;
let foreign: Model;

const DAY = 86_400_000;
// Midnight UTC ten days back: every fact sits inside the default 90-day window.
const BASE = Math.floor(Date.now() / DAY) * DAY - 10 * DAY;
const at = (days: number, hours = 0) => new Date(BASE + days * DAY + hours * 3_600_000).toISOString();

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await seedTenant(t.deps);
  other = await seedTenant(t.deps);
  client = gqlClient(t, await tokenFor(t, tenant));
  otherClient = gqlClient(t, await tokenFor(t, other));
  orders = await createModel(t.deps, tenant, uniqueSlug('orders'), [
    { name: 'id', type: 'string', is_primary_key: true },
    { name: 'status', type: 'string' },
    { name: 'amount', type: 'float' },
    { name: 'qty', type: 'integer', is_indexed: true },
    { name: 'rush', type: 'boolean' },
  ]);
  customers = await createModel(t.deps, tenant, uniqueSlug('customers'), [
    { name: 'id', type: 'string', is_primary_key: true },
    { name: 'region', type: 'string' },
  ]);
  foreign = await createModel(t.deps, other, uniqueSlug('orders'), [{ name: 'status', type: 'string' }]);
  // o1: open then shipped; o2, o3 open; o4 cancelled without an amount; o5 open without a customer.
  await insertFacts(t.deps, orders, [
    { entity_id: 'o1', observed_at: at(0, 1), data: { id: 'o1', status: 'open', amount: 10, qty: 1 } },
    { entity_id: 'o1', observed_at: at(2, 3), data: { id: 'o1', status: 'shipped', amount: 10, qty: 1 } },
    { entity_id: 'o2', observed_at: at(0, 5), data: { id: 'o2', status: 'open', amount: 2.5, qty: 3, rush: true } },
    { entity_id: 'o3', observed_at: at(1, 2), data: { id: 'o3', status: 'open', amount: 7, qty: 2 } },
    { entity_id: 'o4', observed_at: at(1, 4), data: { id: 'o4', status: 'cancelled', amount: 'n/a' } },
    { entity_id: 'o5', observed_at: at(2, 1), data: { id: 'o5', status: 'open', amount: 1, qty: 1 } },
  ]);
  await insertFacts(t.deps, customers, [
    { entity_id: 'o1', observed_at: at(0), data: { id: 'o1', region: 'north' } },
    { entity_id: 'o2', observed_at: at(0), data: { id: 'o2', region: 'south' } },
    { entity_id: 'o3', observed_at: at(0), data: { id: 'o3', region: 'north' } },
    { entity_id: 'o4', observed_at: at(0), data: { id: 'o4', region: 'south' } },
  ]);
  await insertFacts(t.deps, foreign, [{ entity_id: 'x', observed_at: at(0), data: { status: 'open' } }]);
});
after(async () => {
  await t?.close();
});

const GROUPS = 'groupBy measures groupsCut groups { keys { field string number boolean dateTime json } bucket values { name value } }';

interface Answer {
  groupBy: string[];
  measures: string[];
  groupsCut: boolean;
  groups: { keys: Record<string, unknown>[]; bucket: string | null; values: { name: string; value: number | null }[] }[];
}

async function aggregate(args: string, vars: Record<string, unknown> = {}, c = client): Promise<Answer> {
  const r = await gql<{ factAggregate: Answer }>(
    c,
    `query($s: String!, $j: String, $u: DateTime) { factAggregate(dataModelSlug: $s, joinDataModelSlug: $j, until: $u, ${args}) { ${GROUPS} } }`,
    {
      s: orders.slug,
      ...vars,
    },
  );
  assert.equal(r.errors, undefined, JSON.stringify(r.errors));
  return r.data!.factAggregate;
}

/** Each group as [keys..., bucket?, values...] for short assertions. */
const flat = (a: Answer) =>
  a.groups.map((g) => [
    ...g.keys.map((k) => k.string ?? k.number ?? k.boolean ?? k.dateTime ?? k.json ?? null),
    ...(g.bucket === null ? [] : [g.bucket]),
    ...g.values.map((v) => v.value),
  ]);

describe('latest', () => {
  test('open orders by status: counts of entities by their current fact, the largest first', async () => {
    const a = await aggregate('groupBy: ["status"]');
    assert.deepEqual(a.groupBy, ['status']);
    assert.deepEqual(a.measures, ['count']);
    assert.equal(a.groupsCut, false);
    assert.deepEqual(flat(a), [
      ['open', 3],
      ['cancelled', 1],
      ['shipped', 1],
    ]);
    assert.deepEqual(a.groups[0]!.keys[0], { field: 'status', string: 'open', number: null, boolean: null, dateTime: null, json: null });
  });

  test('no groupBy: one group, even when nothing matches', async () => {
    assert.deepEqual(flat(await aggregate('')), [[5]]);
    assert.deepEqual(flat(await aggregate('filters: "[{\\"field\\":\\"status\\",\\"op\\":\\"eq\\",\\"value\\":\\"lost\\"}]"')), [[0]]);
  });

  test('measures: sum, avg, min, max skip facts without a number; null where none has one', async () => {
    const a = await aggregate(
      'groupBy: ["status"], measures: [{op: "count"}, {op: "sum", field: "amount"}, {op: "avg", field: "qty"}, {op: "min", field: "amount", as: "least"}, {op: "max", field: "qty"}, {op: "count_distinct_entities"}], orderBy: [{by: "status", direction: "asc"}]',
    );
    assert.deepEqual(a.measures, ['count', 'sum_amount', 'avg_qty', 'least', 'max_qty', 'count_distinct_entities']);
    assert.deepEqual(flat(a), [
      ['cancelled', 1, null, null, null, null, 1],
      ['open', 3, 10.5, 2, 1, 3, 3],
      ['shipped', 1, 10, 1, 10, 1, 1],
    ]);
  });

  test('as of until: the state then', async () => {
    const a = await aggregate('groupBy: ["status"], orderBy: [{by: "status", direction: "asc"}]', { u: at(1, 3) });
    assert.deepEqual(flat(a), [['open', 3]]);
  });

  test('a boolean key, a null key its own group (last in order)', async () => {
    const a = await aggregate('groupBy: ["rush"], orderBy: [{by: "rush", direction: "asc"}]');
    assert.deepEqual(
      a.groups.map((g) => [g.keys[0]!.boolean, g.values[0]!.value]),
      [
        [true, 1],
        [null, 4],
      ],
    );
  });

  test('join: open orders by the customer region, left keeps orders without a customer under a null key', async () => {
    const filters = JSON.stringify([{ field: 'status', op: 'eq', value: 'open' }]);
    const left = await aggregate(
      `filters: ${JSON.stringify(filters)}, groupBy: ["${customers.slug}.region"], measures: [{op: "count"}, {op: "sum", field: "amount"}]`,
      {
        j: customers.slug,
      },
    );
    assert.deepEqual(left.groupBy, [`${customers.slug}.region`]);
    assert.deepEqual(flat(left), [
      ['north', 1, 7],
      ['south', 1, 2.5],
      [null, 1, 1],
    ]);
    const inner = await aggregate(`joinType: "inner", groupBy: ["${customers.slug}.region"], orderBy: [{by: "${customers.slug}.region", direction: "asc"}]`, {
      j: customers.slug,
    });
    assert.deepEqual(flat(inner), [
      ['north', 2],
      ['south', 2],
    ]);
    const joinFiltered = await aggregate(
      `joinType: "inner", joinFilters: ${JSON.stringify(JSON.stringify([{ field: 'region', op: 'eq', value: 'south' }]))}, groupBy: ["status"]`,
      {
        j: customers.slug,
      },
    );
    assert.deepEqual(flat(joinFiltered), [
      ['cancelled', 1],
      ['open', 1],
    ]);
  });
});

describe('timeline', () => {
  test('orders per day: facts by their day, buckets without facts absent, oldest first', async () => {
    const a = await aggregate('mode: "timeline", bucket: "day"');
    assert.deepEqual(flat(a), [
      [at(0), 2],
      [at(1), 2],
      [at(2), 2],
    ]);
  });

  test('a bucket in a time zone starts at the local midnight', async () => {
    // 05:00 UTC on day 0 is the previous day in New York (UTC-4 or -5); 01:00 on day 0 too.
    const a = await aggregate('mode: "timeline", bucket: "day", timezone: "America/New_York", groupBy: ["status"]');
    const days = new Set(a.groups.map((g) => g.bucket));
    for (const d of days) {
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(
        new Date(d!),
      );
      assert.equal(local, '00:00');
    }
    const total = a.groups.reduce((n, g) => n + g.values[0]!.value!, 0);
    assert.equal(total, 6);
  });

  test('week buckets start on Monday, or on Sunday', async () => {
    for (const [weekStart, weekday] of [
      ['monday', 1],
      ['sunday', 0],
    ] as const) {
      const a = await aggregate(`mode: "timeline", bucket: "week", weekStart: "${weekStart}"`);
      for (const g of a.groups) assert.equal(new Date(g.bucket!).getUTCDay(), weekday);
      assert.equal(
        a.groups.reduce((n, g) => n + g.values[0]!.value!, 0),
        6,
      );
    }
  });

  test('count_distinct_entities counts entities among the facts', async () => {
    assert.deepEqual(flat(await aggregate('mode: "timeline", measures: [{op: "count"}, {op: "count_distinct_entities"}]')), [[6, 5]]);
  });

  test('limit and groupsCut', async () => {
    const a = await aggregate('mode: "timeline", bucket: "day", limit: 2');
    assert.equal(a.groups.length, 2);
    assert.equal(a.groupsCut, true);
    const b = await aggregate('mode: "timeline", bucket: "day", limit: 3');
    assert.equal(b.groupsCut, false);
    const c = await aggregate('mode: "timeline", bucket: "day", orderBy: [{by: "bucket"}], limit: 1');
    assert.deepEqual(flat(c), [[at(2), 2]]);
  });
});

describe('refusals', () => {
  const cases: [string, string][] = [
    ['mode: "history"', 'mode'],
    ['timeAxis: "x"', 'timeAxis'],
    ['groupBy: ["a", "b", "c", "d"]', 'groupBy'],
    ['groupBy: ["nope"]', 'groupBy'],
    ['groupBy: ["status", "status"]', 'groupBy'],
    ['bucket: "year"', 'bucket'],
    ['bucket: "day", timezone: "Mars/Olympus"', 'timezone'],
    ['timezone: "Europe/Nowhere"', 'timezone'],
    ['weekStart: "friday"', 'weekStart'],
    ['measures: []', 'measures'],
    ['measures: [{op: "median"}]', 'measures'],
    ['measures: [{op: "sum"}]', 'measures'],
    ['measures: [{op: "sum", field: "status"}]', 'measures'],
    ['measures: [{op: "count", field: "qty"}]', 'measures'],
    ['measures: [{op: "count"}, {op: "count"}]', 'measures'],
    ['measures: [{op: "count", as: "a b"}]', 'measures'],
    ['orderBy: [{by: "nothing"}]', 'orderBy'],
    ['orderBy: [{by: "count", direction: "up"}]', 'orderBy'],
    ['orderBy: [{by: "bucket"}]', 'orderBy'],
    ['limit: 0', 'limit'],
    ['limit: 10001', 'limit'],
    ['filters: "[1]"', 'filters'],
    ['filters: "[{\\"field\\":\\"status\\",\\"op\\":\\"gt\\",\\"value\\":1}]"', 'filters'],
    ['mode: "timeline", joinDataModelSlug: "x"', 'joinDataModelSlug'],
    ['joinFilters: "[]"', 'joinFilters'],
    ['since: "yesterday"', 'since'],
    ['series: true', 'bucket'],
    ['series: true, bucket: "day"', 'since'],
    ['series: true, mode: "timeline", bucket: "day"', 'series'],
    ['series: true, bucket: "minute", since: "2026-01-01T00:00:00Z", until: "2026-01-02T00:00:00Z"', 'bucket'],
  ];
  for (const [args, argument] of cases) {
    test(`${args}: graphql_validation naming ${argument}`, async () => {
      const r = await gql(client, `query($s: String!) { factAggregate(dataModelSlug: $s, ${args}) { groupsCut } }`, { s: orders.slug });
      assert.equal(onlyCode(r), 'graphql_validation', JSON.stringify(r.errors));
      assert.equal(r.errors![0]!.extensions?.argument, argument, JSON.stringify(r.errors));
    });
  }

  test("another workspace's model answers exactly as an unknown slug", async () => {
    const ask = (s: string, j?: string) =>
      gql(client, 'query($s: String!, $j: String) { factAggregate(dataModelSlug: $s, joinDataModelSlug: $j) { groupsCut } }', { s, j });
    const [theirs, unknown] = [await ask(foreign.slug), await ask(uniqueSlug('orders'))];
    assert.equal(onlyCode(theirs), 'graphql_validation');
    assert.deepEqual(theirs.errors, unknown.errors);
    assert.deepEqual(theirs.data, unknown.data);
    const [theirJoin, unknownJoin] = [await ask(orders.slug, foreign.slug), await ask(orders.slug, uniqueSlug('orders'))];
    assert.equal(theirJoin.errors![0]!.extensions?.argument, 'joinDataModelSlug');
    assert.deepEqual(theirJoin.errors, unknownJoin.errors);
    // And the owner sees its model.
    const own = await gql(otherClient, 'query($s: String!) { factAggregate(dataModelSlug: $s) { groups { values { value } } } }', { s: foreign.slug });
    assert.deepEqual(own.data, { factAggregate: { groups: [{ values: [{ value: 1 }] }] } });
  });

  test('the cost limits hold: a wide document is query_too_complex', async () => {
    const one = (i: number) => `a${i}: factAggregate(dataModelSlug: $s, limit: 10000) { ${GROUPS} }`;
    const wide = await gql(client, `query($s: String!) { ${[0, 1, 2].map(one).join(' ')} }`, { s: orders.slug });
    assert.equal(onlyCode(wide), 'query_too_complex');
    const fits = await gql(client, `query($s: String!) { ${one(0)} }`, { s: orders.slug });
    assert.equal(fits.errors, undefined, JSON.stringify(fits.errors));
  });
});

test('metrics: requests and seconds by mode', async () => {
  await aggregate('mode: "timeline"');
  const text = await t.deps.metrics.registry.metrics();
  assert.match(text, /tributary_graphql_aggregate_requests_total\{mode="timeline"\} [1-9]/);
  assert.match(text, /tributary_graphql_aggregate_requests_total\{mode="latest"\} [1-9]/);
  assert.match(text, /tributary_graphql_aggregate_seconds_count\{mode="timeline"\} [1-9]/);
});

describe('buckets across DST changes (docs/graphql.md "Where does a bucket start?")', () => {
  test('the hour that repeats shares one bucket starting at the later instant; a skipped start reads as the jump', async () => {
    const m = await createModel(t.deps, tenant, uniqueSlug('dst'), [{ name: 'x', type: 'integer' }]);
    await insertFacts(t.deps, m, [
      // New York, 2026-11-01: 01:30 EDT (05:30Z) and 01:30 EST (06:30Z).
      { entity_id: null, observed_at: '2026-11-01T05:30:00Z', data: {} },
      { entity_id: null, observed_at: '2026-11-01T06:30:00Z', data: {} },
      // Lord Howe, 2026-10-04: clocks go from 02:00 to 02:30; 02:45 LHDT is 15:45Z.
      { entity_id: null, observed_at: '2026-10-03T15:45:00Z', data: {} },
    ]);
    const ask = async (tz: string) => {
      const r = await gql(
        client,
        `query($s: String!, $tz: String) { factAggregate(dataModelSlug: $s, mode: "timeline", since: "2026-09-01T00:00:00Z", until: "2026-11-30T00:00:00Z", bucket: "hour", timezone: $tz) { groups { bucket values { value } } } }`,
        { s: m.slug, tz },
      );
      assert.equal(r.errors, undefined, JSON.stringify(r.errors));
      return r.data.factAggregate.groups.map((g: { bucket: string; values: { value: number }[] }) => [g.bucket, g.values[0]!.value]);
    };
    assert.deepEqual(await ask('America/New_York'), [
      ['2026-10-03T15:00:00.000Z', 1],
      ['2026-11-01T06:00:00.000Z', 2],
    ]);
    assert.deepEqual(await ask('Australia/Lord_Howe'), [
      ['2026-10-03T15:30:00.000Z', 1],
      // Lord Howe is UTC+11 then: 16:30 and 17:30 local, whole hours of their own.
      ['2026-11-01T05:00:00.000Z', 1],
      ['2026-11-01T06:00:00.000Z', 1],
    ]);
  });
});
