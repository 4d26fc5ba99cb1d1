/**
 * factQuery, argument by argument: latest and timeline, both axes, as-of
 * queries, since/until defaults and the 366-day clamp, sort and direction with ties,
 * limit/offset and the page fields, every filter operator per field type and every way a
 * filter can be wrong, joins, and which statements run for which selection.
 */
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { clauseSql } from '../../src/facts/query/filters.sql.ts';
import type { FactFilter } from '../../src/facts/query/filters.ts';
import assert from 'node:assert/strict';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import {
  createModel,
  FACT_FIELDS,
  gql,
  gqlClient,
  insertFacts,
  onFactStatements,
  onlyCode,
  uniqueSlug,
  type ApiFact,
  type GqlResponse,
  type Model,
  type StoredFact,
} from './helpers.ts';

const HOUR = 3_600_000;
const DAY = 86_400_000;
const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const I0 = Date.parse('2026-03-10T00:00:00.000Z');
const at = (ms: number) => new Date(ms).toISOString();
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let t: TestApp;
let tenant: Tenant;
let client: ReturnType<typeof gqlClient>;
let orders: Model;
let facts: Record<string, StoredFact>;

const ORDER_FIELDS = [
  { name: 'order_id', type: 'string' as const, is_primary_key: true },
  { name: 'status', type: 'string' as const },
  { name: 'amount', type: 'integer' as const },
  { name: 'price', type: 'float' as const },
  { name: 'paid', type: 'boolean' as const },
  { name: 'due', type: 'datetime' as const },
  { name: 'meta', type: 'map' as const },
  { name: 'note', type: null },
];

// Ids chosen so "greater id" is known: the o4 tie is broken by id alone.
const ID = (n: number) => `0190a000-0000-7000-8000-${String(n).padStart(12, '0')}`;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '100000' });
  tenant = await seedTenant(t.deps);
  client = gqlClient(t, await tokenFor(t, tenant));
  orders = await createModel(t.deps, tenant, uniqueSlug('orders'), ORDER_FIELDS);
  const seeded = await insertFacts(t.deps, orders, [
    // o1: observed in the order open, pending, closed, but pending was stored last.
    {
      id: ID(1),
      entity_id: 'o1',
      observed_at: T0,
      inserted_at: I0,
      data: { order_id: 'o1', status: 'open', amount: 10, price: 1.5, paid: false, due: '2026-04-01T00:00:00.000Z', meta: { a: 1 } },
    },
    {
      id: ID(2),
      entity_id: 'o1',
      observed_at: T0 + 2 * HOUR,
      inserted_at: I0 + 60_000,
      data: { order_id: 'o1', status: 'closed', amount: 12, price: 2.25, paid: true, due: '2026-04-02T00:00:00.000Z', meta: { a: 2 }, note: 'x' },
    },
    { id: ID(3), entity_id: 'o1', observed_at: T0 + HOUR, inserted_at: I0 + 120_000, data: { order_id: 'o1', status: 'pending', amount: 11 } },
    {
      id: ID(4),
      entity_id: 'o2',
      observed_at: T0 + HOUR,
      inserted_at: I0,
      data: { order_id: 'o2', status: 'open', amount: 5, price: 0.5, paid: false, due: '2026-03-15T12:00:00Z', note: 7 },
    },
    // o3: equal observed_at; the later inserted_at wins.
    { id: ID(6), entity_id: 'o3', observed_at: T0 + 3 * HOUR, inserted_at: I0, data: { order_id: 'o3', status: 'first' } },
    {
      id: ID(5),
      entity_id: 'o3',
      observed_at: T0 + 3 * HOUR,
      inserted_at: I0 + 1,
      data: { order_id: 'o3', status: 'second', amount: -1, meta: { b: [1, 2], a: null } },
    },
    // o4: equal observed_at and inserted_at; the greater id wins.
    { id: ID(8), entity_id: 'o4', observed_at: T0 + 4 * HOUR, inserted_at: I0, data: { order_id: 'o4', status: 'greater-id', note: { k: 'v' } } },
    { id: ID(7), entity_id: 'o4', observed_at: T0 + 4 * HOUR, inserted_at: I0, data: { order_id: 'o4', status: 'smaller-id' } },
    // Without an entity id, each fact is its own entity.
    { id: ID(9), entity_id: null, observed_at: T0 + 30 * 60_000, inserted_at: I0, data: { status: 'anon', amount: 3 } },
    { id: ID(10), entity_id: null, observed_at: T0 + 30 * 60_000, inserted_at: I0, data: { status: 'anon', amount: 4 } },
  ]);
  facts = Object.fromEntries(seeded.map((f) => [f.id, f]));
});
after(async () => {
  await t?.close();
});

interface Page {
  count?: number;
  lastPage?: number;
  hasNextPage?: boolean;
  hasPreviousPage?: boolean;
  pageNumber?: number;
  limit?: number;
  results?: ApiFact[];
}

/** factQuery on the orders model (or `slug`) with these arguments, selecting everything. */
async function fq(
  args: Record<string, unknown>,
  selection = `count lastPage hasNextPage hasPreviousPage pageNumber limit results { ${FACT_FIELDS} }`,
): Promise<GqlResponse<{ factQuery: Page }>> {
  const vars = { slug: orders.slug, ...args };
  const defs = Object.keys(vars).map((k) => `$${k}: ${VAR_TYPES[k] ?? 'String'}`);
  const uses = Object.keys(vars).map((k) => `${ARG_NAMES[k] ?? k}: $${k}`);
  return gql(client, `query(${defs.join(', ')}) { factQuery(${uses.join(', ')}) { ${selection} } }`, vars);
}
const VAR_TYPES: Record<string, string> = { slug: 'String!', since: 'DateTime', until: 'DateTime', limit: 'Int', offset: 'Int' };
const ARG_NAMES: Record<string, string> = { slug: 'dataModelSlug', axis: 'timeAxis', dir: 'sortDirection', join: 'joinDataModelSlug' };

async function page(args: Record<string, unknown>): Promise<Page> {
  const r = await fq(args);
  assert.equal(r.status, 200);
  assert.equal(r.errors, undefined, JSON.stringify(r.errors));
  return r.data!.factQuery;
}

const ids = (p: Page) => p.results!.map((f) => f.id);
const statuses = (p: Page) => p.results!.map((f) => JSON.parse(f.data).status);

async function expectInvalid(args: Record<string, unknown>, argument?: string): Promise<string> {
  const r = await fq(args);
  assert.equal(r.status, 200);
  assert.equal(onlyCode(r), 'graphql_validation', JSON.stringify(r.errors));
  assert.equal(r.data?.factQuery ?? null, null);
  if (argument !== undefined) assert.equal(r.errors![0]!.extensions!.argument, argument, r.errors![0]!.message);
  return r.errors![0]!.message;
}

describe('latest mode', () => {
  test('one row per entity: its greatest observedAt, ties by later insertedAt then greater id; null entity ids each count', async () => {
    const p = await page({});
    assert.deepEqual(ids(p), [ID(8), ID(5), ID(2), ID(4), ID(10), ID(9)]);
    assert.deepEqual(statuses(p), ['greater-id', 'second', 'closed', 'open', 'anon', 'anon']);
    assert.equal(p.count, 6);
    assert.equal(p.limit, 50);
    const first = p.results![0]!;
    assert.equal(first.dataModelId, orders.id);
    assert.equal(first.entityId, 'o4');
    assert.match(first.observedAt, ISO_Z);
    assert.match(first.insertedAt, ISO_Z);
    assert.equal(first.observedAt, at(T0 + 4 * HOUR));
    assert.equal(typeof first.data, 'string');
    assert.deepEqual(JSON.parse(first.data), facts[ID(8)]!.data);
    assert.equal(p.results!.find((f) => f.id === ID(9))!.entityId, null);
  });

  test('the defaults are what explicit default values and explicit nulls give', async () => {
    const implicit = await page({});
    const explicit = await page({ mode: 'latest', axis: 'observed_at', sort: 'observed_at', dir: 'desc', limit: 50, offset: 0, joinType: 'left' });
    const nulls = await page({
      mode: null,
      axis: null,
      sort: null,
      dir: null,
      limit: null,
      offset: null,
      since: null,
      until: null,
      filters: null,
      join: null,
      joinType: null,
      joinFilters: null,
    });
    assert.deepEqual(explicit, implicit);
    assert.deepEqual(nulls, implicit);
  });

  test('timeAxis inserted_at: the latest stored fact per entity, ordered by observedAt', async () => {
    const p = await page({ axis: 'inserted_at' });
    // o1's pending fact was stored last; o3's second (inserted 1 ms later); o4 by id.
    // o1 pending and o2 share observedAt T0+1h: the greater id comes first.
    assert.deepEqual(ids(p), [ID(8), ID(5), ID(4), ID(3), ID(10), ID(9)]);
  });

  test('sortDirection asc reverses the order, ties by id ascending', async () => {
    assert.deepEqual(ids(await page({ dir: 'asc' })), [ID(9), ID(10), ID(4), ID(2), ID(5), ID(8)]);
  });

  test('until: as of that instant, inclusive; an offset is converted to UTC', async () => {
    // At T0+1h: o1 pending (observed exactly then), o2 open; the anonymous facts.
    const p = await page({ until: '2026-03-01T02:00:00+01:00' });
    assert.deepEqual(ids(p), [ID(4), ID(3), ID(10), ID(9)]);
    assert.equal(p.count, 4);
    assert.deepEqual(ids(await page({ until: at(T0 - 1) })), []);
    // as of the o3 tie: both facts qualify, the later inserted wins, as in the current state.
    assert.equal(statuses(await page({ until: at(T0 + 3 * HOUR), filters: JSON.stringify([{ field: 'order_id', op: 'eq', value: 'o3' }]) }))[0], 'second');
  });

  test('until on the inserted_at axis', async () => {
    // Stored up to I0+60s: o1's closed fact is its latest stored one then.
    const p = await page({ axis: 'inserted_at', until: at(I0 + 60_000), filters: JSON.stringify([{ field: 'order_id', op: 'eq', value: 'o1' }]) });
    assert.deepEqual(ids(p), [ID(2)]);
  });

  test('since drops entities whose latest row is older, and filters apply to the latest row', async () => {
    // o2's only fact is at T0+1h; o1's latest is at T0+2h: since T0+2h keeps o1 (latest closed), drops o2.
    const p = await page({ since: at(T0 + 2 * HOUR) });
    assert.deepEqual(ids(p), [ID(8), ID(5), ID(2)]);
    // o1 was open once, but its latest row is closed: "status eq open" means currently open.
    assert.deepEqual(ids(await page({ filters: JSON.stringify([{ field: 'status', op: 'eq', value: 'open' }]) })), [ID(4)]);
    // since with until: as of T0+1h, only entities whose as-of row is at or after T0+1h.
    assert.deepEqual(ids(await page({ since: at(T0 + HOUR), until: at(T0 + HOUR) })), [ID(4), ID(3)]);
  });

  test('sort other than observed_at is refused in latest mode', async () => {
    await expectInvalid({ sort: 'inserted_at' }, 'sort');
    await expectInvalid({ sort: 'entity_id' }, 'sort');
  });

  test('latest without until reads fact_current, never the history; with until it reads facts', async () => {
    const seen = await capture(async () => {
      await page({});
      await page({ filters: JSON.stringify([{ field: 'amount', op: 'gt', value: 1 }]), since: at(T0) });
    });
    // At least one statement per request (with models remembered, page and count are one).
    assert.ok(seen.length >= 2);
    for (const q of seen) {
      assert.match(q, /fact_current/);
      assert.doesNotMatch(q, /\bfacts\b/, q);
    }
    const asOf = await capture(() => page({ until: at(T0) }));
    assert.ok(asOf.some((q) => /\bfacts\b/.test(q) && /distinct on/.test(q)));
  });
});

describe('timeline mode', () => {
  test('every fact with since <= observedAt < until, newest first, ties by id', async () => {
    const p = await page({ mode: 'timeline', since: at(T0), until: at(T0 + 3 * HOUR) });
    // T0+3h is excluded (until is exclusive); T0 is included.
    assert.deepEqual(ids(p), [ID(2), ID(4), ID(3), ID(10), ID(9), ID(1)]);
    assert.equal(p.count, 6);
    const all = await page({ mode: 'timeline', since: at(T0), until: at(T0 + 5 * HOUR), dir: 'asc' });
    assert.deepEqual(ids(all), [ID(1), ID(9), ID(10), ID(3), ID(4), ID(2), ID(5), ID(6), ID(7), ID(8)]);
  });

  test('timeAxis inserted_at windows and sorts on insertedAt', async () => {
    const p = await page({ mode: 'timeline', axis: 'inserted_at', sort: 'inserted_at', since: at(I0 + 1), until: at(I0 + 120_001), dir: 'asc' });
    assert.deepEqual(ids(p), [ID(5), ID(2), ID(3)]);
  });

  test('sort observed_at, inserted_at and entity_id in both directions; entity ids in byte order, nulls last', async () => {
    const window = { mode: 'timeline', since: at(T0), until: at(T0 + DAY) };
    const byInserted = await page({ ...window, sort: 'inserted_at', dir: 'desc' });
    assert.deepEqual(ids(byInserted).slice(0, 3), [ID(3), ID(2), ID(5)]);
    const byEntityAsc = await page({ ...window, sort: 'entity_id', dir: 'asc' });
    assert.deepEqual(
      byEntityAsc.results!.map((f) => f.entityId),
      ['o1', 'o1', 'o1', 'o2', 'o3', 'o3', 'o4', 'o4', null, null],
    );
    assert.deepEqual(ids(byEntityAsc).slice(0, 3), [ID(1), ID(2), ID(3)]);
    const byEntityDesc = await page({ ...window, sort: 'entity_id', dir: 'desc' });
    assert.deepEqual(
      byEntityDesc.results!.map((f) => f.entityId),
      ['o4', 'o4', 'o3', 'o3', 'o2', 'o1', 'o1', 'o1', null, null],
    );
    assert.deepEqual(ids(byEntityDesc).slice(0, 2), [ID(8), ID(7)]);
    assert.deepEqual(ids(byEntityDesc).slice(-2), [ID(10), ID(9)]);
  });

  test('since after until is refused; since equal to until is an empty window', async () => {
    await expectInvalid({ mode: 'timeline', since: at(T0 + 1), until: at(T0) }, 'since');
    await expectInvalid({ since: at(T0 + 1), until: at(T0) }, 'since');
    // With until left out it is now: a since in the future is after it.
    await expectInvalid({ mode: 'timeline', since: at(Date.now() + DAY) }, 'since');
    const empty = await page({ mode: 'timeline', since: at(T0), until: at(T0) });
    assert.deepEqual(empty.results, []);
    assert.equal(empty.count, 0);
    assert.equal(empty.lastPage, 1);
  });

  describe('defaults and the 366-day clamp', () => {
    let recent: Model;
    const now = Date.now();
    before(async () => {
      recent = await createModel(t.deps, tenant, uniqueSlug('recent'), [{ name: 'n', type: 'integer' }]);
      await insertFacts(
        t.deps,
        recent,
        [1, 89, 91, 200, 360, 370].map((days) => ({
          id: ID(1000 + days),
          entity_id: null,
          observed_at: now - days * DAY,
          inserted_at: now - days * DAY,
          data: { n: days },
        })),
      );
    });
    const days = (p: Page) => p.results!.map((f) => JSON.parse(f.data).n);

    test('until defaults to now and since to 90 days before until', async () => {
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline' })), [1, 89]);
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline', axis: 'inserted_at' })), [1, 89]);
      // since alone: until is now.
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline', since: at(now - 95 * DAY) })), [1, 89, 91]);
      // until alone: since is 90 days before it.
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline', until: at(now - 90 * DAY) })), [91]);
    });

    test('a span longer than 366 days is clamped to the 366 days ending at until', async () => {
      const p = await page({ slug: recent.slug, mode: 'timeline', since: at(now - 1000 * DAY), until: at(now) });
      assert.deepEqual(days(p), [1, 89, 91, 200, 360]);
      assert.equal(p.count, 5);
      // until left out: the 366 days end now.
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline', since: at(now - 1000 * DAY) })), [1, 89, 91, 200, 360]);
      assert.deepEqual(days(await page({ slug: recent.slug, mode: 'timeline', since: at(now - 366 * DAY), until: at(now) })), [1, 89, 91, 200, 360]);
    });
  });

  test('joins are refused in timeline mode', async () => {
    await expectInvalid({ mode: 'timeline', join: orders.slug }, 'joinDataModelSlug');
  });
});

describe('as of until: which SQL answers', () => {
  // 30 entities with 40 hourly facts each (more than a walk's window of 1,000); entity e00
  // has one more, an hour after the rest, and entity 'old' one fact, an hour before them all.
  let hist: Model;
  const LAST = T0 + 39 * HOUR;
  before(async () => {
    hist = await createModel(t.deps, tenant, uniqueSlug('hist'), [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'n', type: 'integer' },
    ]);
    const rows = [];
    for (let e = 0; e < 30; e++)
      for (let h = 0; h < 40; h++)
        rows.push({ entity_id: `e${String(e).padStart(2, '0')}`, observed_at: T0 + h * HOUR + e * 1000, data: { k: `e${e}`, n: h } });
    rows.push({ entity_id: 'e00', observed_at: LAST + HOUR, data: { k: 'e00', n: 40 } });
    rows.push({ entity_id: 'old', observed_at: T0 - HOUR, data: { k: 'old', n: 40 } });
    await insertFacts(t.deps, hist, rows);
  });

  test('few entities changed since until: the count reads the current state and probes the history for those; a newest-first page walks back from until', async () => {
    let p: Page | undefined;
    const seen = await capture(async () => {
      p = await page({ slug: hist.slug, until: at(LAST + 59 * 1000), limit: 3 });
    });
    assert.deepEqual(
      p!.results!.map((f) => JSON.parse(f.data).n),
      [39, 39, 39],
    );
    assert.equal(p!.count, 31);
    assert.ok(
      seen.some((q) => /with w as materialized/.test(q)),
      'the page is walked',
    );
    assert.ok(
      seen.some((q) => /count\(\*\)/.test(q) && /cross join lateral/.test(q)),
      'the count reads the current state',
    );
    assert.ok(!seen.some((q) => /distinct on/.test(q)), seen.join('\n'));
  });

  test('most entities changed since until: the count reads the history up to until; so does an oldest-first page', async () => {
    let p: Page | undefined;
    const seen = await capture(async () => {
      p = await page({ slug: hist.slug, until: at(T0 + HOUR + 59 * 1000), dir: 'asc', limit: 2 });
    });
    assert.deepEqual(
      p!.results!.map((f) => JSON.parse(f.data)),
      [
        { k: 'old', n: 40 },
        { k: 'e0', n: 1 },
      ],
    );
    assert.equal(p!.count, 31);
    assert.ok(seen.some((q) => /distinct on/.test(q)));
    assert.ok(!seen.some((q) => /with w as materialized|cross join lateral/.test(q)), seen.join('\n'));
  });

  test('a walk that cannot fill the page in its window gives way to a source, with the same rows', async () => {
    // The window of 1,000 facts back from until holds e00's newest; 'old' is beyond it.
    const filters = JSON.stringify([{ field: 'n', op: 'eq', value: 40 }]);
    let r: GqlResponse<{ factQuery: Page }> | undefined;
    const seen = await capture(async () => {
      r = await fq({ slug: hist.slug, until: at(LAST + 2 * HOUR), filters, limit: 2 }, `results { entityId data }`);
    });
    assert.deepEqual(
      r!.data!.factQuery.results!.map((f) => [f.entityId, JSON.parse(f.data).n]),
      [
        ['e00', 40],
        ['old', 40],
      ],
    );
    assert.ok(
      seen.some((q) => /with w as materialized/.test(q)),
      'walked first',
    );
    assert.ok(
      seen.some((q) => /cross join lateral|distinct on/.test(q) && /order by/.test(q)),
      'then read from a source',
    );
  });
});

describe('pages', () => {
  let many: Model;
  before(async () => {
    many = await createModel(t.deps, tenant, uniqueSlug('many'), [{ name: 'k', type: 'string', is_primary_key: true }]);
    await insertFacts(
      t.deps,
      many,
      Array.from({ length: 260 }, (_, i) => ({
        id: ID(5000 + i),
        entity_id: `k${String(i).padStart(3, '0')}`,
        observed_at: T0 + i * 1000,
        data: { k: `k${i}` },
      })),
    );
  });

  test('limit defaults to 50; the page fields follow count, limit and offset', async () => {
    const p = await page({ slug: many.slug });
    assert.equal(p.results!.length, 50);
    assert.deepEqual(
      { count: p.count, lastPage: p.lastPage, pageNumber: p.pageNumber, hasNextPage: p.hasNextPage, hasPreviousPage: p.hasPreviousPage, limit: p.limit },
      {
        count: 260,
        lastPage: 6,
        pageNumber: 1,
        hasNextPage: true,
        hasPreviousPage: false,
        limit: 50,
      },
    );
    const last = await page({ slug: many.slug, offset: 250 });
    assert.equal(last.results!.length, 10);
    assert.equal(last.pageNumber, 6);
    assert.equal(last.hasNextPage, false);
    assert.equal(last.hasPreviousPage, true);
  });

  test('limit 250 is the maximum; 251, 0 and negative limits and negative offsets are refused', async () => {
    assert.equal((await page({ slug: many.slug, limit: 250 })).results!.length, 250);
    await expectInvalid({ slug: many.slug, limit: 251 }, 'limit');
    await expectInvalid({ slug: many.slug, limit: 0 }, 'limit');
    await expectInvalid({ slug: many.slug, limit: -5 }, 'limit');
    await expectInvalid({ slug: many.slug, offset: -1 }, 'offset');
    const literal = await gql(client, `{ factQuery(dataModelSlug: "${many.slug}", limit: 1000) { count } }`);
    assert.equal(onlyCode(literal), 'graphql_validation');
  });

  test('pageNumber is floor(offset/limit)+1, even off the page grid; offset past the end is an empty page', async () => {
    const p = await page({ slug: many.slug, limit: 7, offset: 15 });
    assert.equal(p.pageNumber, 3);
    assert.equal(p.lastPage, 38);
    assert.deepEqual(
      ids(p),
      Array.from({ length: 7 }, (_, i) => ID(5000 + 259 - 15 - i)),
    );
    const beyond = await page({ slug: many.slug, limit: 10, offset: 1000 });
    assert.deepEqual(beyond.results, []);
    assert.equal(beyond.pageNumber, 101);
    assert.equal(beyond.lastPage, 26);
    assert.equal(beyond.hasNextPage, false);
    assert.equal(beyond.hasPreviousPage, true);
    const edge = await page({ slug: many.slug, limit: 10, offset: 250 });
    assert.equal(edge.hasNextPage, false);
    const before = await page({ slug: many.slug, limit: 10, offset: 249 });
    assert.equal(before.hasNextPage, true);
    // The largest offset: its pageNumber is an Int unless the limit is 1.
    const far = await page({ slug: many.slug, limit: 2, offset: 2 ** 31 - 1 });
    assert.equal(far.pageNumber, 2 ** 30);
    assert.deepEqual(far.results, []);
    await expectInvalid({ slug: many.slug, limit: 1, offset: 2 ** 31 - 1 }, 'offset');
    assert.equal((await page({ slug: many.slug, limit: 1, offset: 2 ** 31 - 2 })).pageNumber, 2 ** 31 - 1);
  });

  test('an empty model: count 0, lastPage 1, no next page', async () => {
    const empty = await createModel(t.deps, tenant, uniqueSlug('empty'), []);
    const p = await page({ slug: empty.slug });
    assert.deepEqual(p, { count: 0, lastPage: 1, hasNextPage: false, hasPreviousPage: false, pageNumber: 1, limit: 50, results: [] });
  });

  test('the count runs only when count or lastPage is selected; hasNextPage alone fetches one row more', async () => {
    const counts = (qs: string[]) => qs.filter((q) => /count\(\*\)/.test(q)).length;
    const pages = (qs: string[]) => qs.filter((q) => /^select/.test(q) && !/count\(\*\)/.test(q) && /fact_current|facts/.test(q));
    let qs = await capture(() => fq({ slug: many.slug }, `results { id }`));
    assert.equal(counts(qs), 0);
    assert.equal(pages(qs).length, 1);
    qs = await capture(() => fq({ slug: many.slug }, `pageNumber hasPreviousPage limit`));
    assert.equal(counts(qs), 0);
    assert.equal(pages(qs).length, 0, 'nothing to read for these fields');
    for (const sel of ['count', 'lastPage', 'count results { id }']) {
      qs = await capture(() => fq({ slug: many.slug }, sel));
      assert.equal(counts(qs), 1, sel);
    }
    qs = await capture(async () => {
      const r = await fq({ slug: many.slug, limit: 10, offset: 250 }, `hasNextPage results { id }`);
      assert.equal(r.data!.factQuery.hasNextPage, false);
      assert.equal(r.data!.factQuery.results!.length, 10);
      const r2 = await fq({ slug: many.slug, limit: 10, offset: 249 }, `hasNextPage`);
      assert.equal(r2.data!.factQuery.hasNextPage, true);
    });
    assert.equal(counts(qs), 0);
    // Fields asked through fragments and aliases count as selected; @skip leaves them out.
    qs = await capture(async () => {
      const r = await gql(client, `{ factQuery(dataModelSlug: "${many.slug}") { ...P n: count } } fragment P on PageOfFact { c: count @skip(if: true) }`);
      assert.equal((r.data as any).factQuery.n, 260);
    });
    assert.equal(counts(qs), 1);
    qs = await capture(() => gql(client, `{ factQuery(dataModelSlug: "${many.slug}") { count @skip(if: true) limit } }`));
    assert.equal(counts(qs), 0);
  });
});

describe('filters', () => {
  const f = (...clauses: unknown[]) => JSON.stringify(clauses);
  const latestIds = async (filters: string, extra: Record<string, unknown> = {}) => ids(await page({ filters, ...extra }));

  test('string: eq ne in nin is_null contains starts_with', async () => {
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'eq', value: 'closed' })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'ne', value: 'anon' })), [ID(8), ID(5), ID(2), ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'in', value: ['open', 'second'] })), [ID(5), ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'nin', value: ['open', 'second', 'anon'] })), [ID(8), ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'in', value: [] })), []);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'nin', value: [] })), [ID(8), ID(5), ID(2), ID(4), ID(10), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'contains', value: 'os' })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'contains', value: 'OS' })), [], 'case-sensitive');
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'starts_with', value: 'gr' })), [ID(8)]);
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'starts_with', value: '%' })), [], 'no pattern characters');
    assert.deepEqual(await latestIds(f({ field: 'order_id', op: 'is_null', value: true })), [ID(10), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'order_id', op: 'is_null', value: false })), [ID(8), ID(5), ID(2), ID(4)]);
  });

  test('integer and float: comparisons are numeric; ne and nin include missing values', async () => {
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'gt', value: 4 })), [ID(2), ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'gte', value: 4 })), [ID(2), ID(4), ID(10)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'lt', value: 4 })), [ID(5), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'lte', value: -1 })), [ID(5)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'eq', value: 12 })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'ne', value: 12 })), [ID(8), ID(5), ID(4), ID(10), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'in', value: [3, 5] })), [ID(4), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'amount', op: 'nin', value: [3, 5] })), [ID(8), ID(5), ID(2), ID(10)]);
    assert.deepEqual(await latestIds(f({ field: 'price', op: 'gt', value: 0.5 })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'price', op: 'eq', value: 2.25 })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'price', op: 'gte', value: 1 })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'price', op: 'lte', value: 0.5 })), [ID(4)]);
    // A float field takes whole numbers too.
    assert.deepEqual(await latestIds(f({ field: 'price', op: 'lt', value: 3 })), [ID(2), ID(4)]);
  });

  test('boolean, datetime (offsets converted), map and untyped fields', async () => {
    assert.deepEqual(await latestIds(f({ field: 'paid', op: 'eq', value: true })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'paid', op: 'ne', value: true })), [ID(8), ID(5), ID(4), ID(10), ID(9)]);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'gt', value: '2026-03-20T00:00:00Z' })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'eq', value: '2026-03-15T13:00:00+01:00' })), [ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'lte', value: '2026-03-15T12:00:00.000Z' })), [ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'lt', value: '2026-03-15T12:00:00.000Z' })), []);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'gte', value: '2026-04-02T00:00:00Z' })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'due', op: 'in', value: ['2026-04-02T02:00:00+02:00'] })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'meta', op: 'eq', value: { a: 2 } })), [ID(2)]);
    // Member order does not matter; a null member is a value.
    assert.deepEqual(await latestIds(f({ field: 'meta', op: 'eq', value: { a: null, b: [1, 2] } })), [ID(5)]);
    assert.deepEqual(await latestIds(f({ field: 'meta', op: 'in', value: [{ a: 2 }, { a: 3 }] })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'meta', op: 'is_null', value: false })), [ID(5), ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'note', op: 'eq', value: 7 })), [ID(4)]);
    assert.deepEqual(await latestIds(f({ field: 'note', op: 'eq', value: 'x' })), [ID(2)]);
    assert.deepEqual(await latestIds(f({ field: 'note', op: 'eq', value: { k: 'v' } })), [ID(8)]);
    assert.deepEqual(await latestIds(f({ field: 'note', op: 'nin', value: [7, 'x'] })), [ID(8), ID(5), ID(10), ID(9)]);
  });

  test('comparisons match by type: a value stored under another type (a field retyped after writing) never equals, is never in range and has no prefix; 5.0 equals 5', async () => {
    // Facts as a retyped field leaves them: `n` and `s` once held other types.
    const mixed = await createModel(t.deps, tenant, uniqueSlug('mixed'), [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'n', type: 'integer' },
      { name: 's', type: 'string' },
      { name: 'b', type: 'boolean' },
    ]);
    await insertFacts(t.deps, mixed, [
      { id: ID(301), entity_id: 'a', observed_at: T0, data: { k: 'a', n: 5, s: '5', b: true } },
      { id: ID(302), entity_id: 'b', observed_at: T0, data: { k: 'b', n: '5', s: 5, b: 'true' } },
      { id: ID(303), entity_id: 'c', observed_at: T0, data: { k: 'c', n: 5.0, s: ['5'], b: 1 } },
      { id: ID(304), entity_id: 'd', observed_at: T0, data: { k: 'd' } },
      { id: ID(305), entity_id: 'e', observed_at: T0, data: { k: 'e', s: 'say "hi" \\ $.x' } },
    ]);
    // JSON.stringify writes 5.0 as 5; store one written by another client as 5.0 exactly.
    await sql`update facts set data = jsonb_set(data, '{n}', '5.0'::jsonb) where id = ${ID(303)}`.execute(t.deps.db);
    await sql`update fact_current set data = jsonb_set(data, '{n}', '5.0'::jsonb) where fact_id = ${ID(303)}`.execute(t.deps.db);
    const q = async (clause: unknown) => ids(await page({ slug: mixed.slug, filters: f(clause) })).sort();
    assert.deepEqual(await q({ field: 'n', op: 'eq', value: 5 }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'ne', value: 5 }), [ID(302), ID(304), ID(305)]);
    assert.deepEqual(await q({ field: 's', op: 'eq', value: '5' }), [ID(301)]);
    assert.deepEqual(await q({ field: 's', op: 'ne', value: '5' }), [ID(302), ID(303), ID(304), ID(305)]);
    assert.deepEqual(await q({ field: 'b', op: 'eq', value: true }), [ID(301)]);
    assert.deepEqual(await q({ field: 'b', op: 'ne', value: true }), [ID(302), ID(303), ID(304), ID(305)]);
    assert.deepEqual(await q({ field: 'n', op: 'in', value: [5] }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'in', value: [4, 5, 6] }), [ID(301), ID(303)]);
    // Nine values and more are tested with a hash table instead: the same answers.
    assert.deepEqual(await q({ field: 'n', op: 'in', value: [1, 2, 3, 4, 5, 6, 7, 8, 9] }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'nin', value: [5] }), [ID(302), ID(304), ID(305)]);
    assert.deepEqual(await q({ field: 's', op: 'in', value: ['5', 'x'] }), [ID(301)]);
    assert.deepEqual(await q({ field: 's', op: 'in', value: ['0', '1', '2', '3', '4', '5', '6', '7', '8'] }), [ID(301)]);
    assert.deepEqual(await q({ field: 'b', op: 'in', value: [true] }), [ID(301)]);
    assert.deepEqual(await q({ field: 'n', op: 'gte', value: 5 }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'lt', value: 6 }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'gt', value: -1e21 }), [ID(301), ID(303)]);
    assert.deepEqual(await q({ field: 'n', op: 'lte', value: 4 }), []);
    assert.deepEqual(await q({ field: 's', op: 'starts_with', value: '5' }), [ID(301)]);
    assert.deepEqual(await q({ field: 's', op: 'starts_with', value: '' }), [ID(301), ID(305)]);
    // Quotes, backslashes and jsonpath syntax in a prefix are characters like any other.
    assert.deepEqual(await q({ field: 's', op: 'starts_with', value: 'say "hi" \\ $.x' }), [ID(305)]);
    assert.deepEqual(await q({ field: 's', op: 'starts_with', value: 'say "hi" \\ $.y' }), []);
  });

  test('a datetime field holding strings that are not instants (written before it was retyped) answers, never fails', async () => {
    const dated = await createModel(t.deps, tenant, uniqueSlug('dated'), [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'd', type: 'datetime' },
    ]);
    const stored = [
      '2026-03-01T10:00:00.000Z',
      '2026-02-30T10:00:00.000Z',
      '2026-13-01T00:00:00Z',
      '2026-01-01T25:00:00Z',
      '0000-01-01T00:00:00Z',
      'soon',
      '2026-03-01 11:00+01:00',
    ];
    await insertFacts(
      t.deps,
      dated,
      stored.map((d, i) => ({ id: ID(321 + i), entity_id: `d${i}`, observed_at: T0, data: { k: `d${i}`, d } })),
    );
    const q = async (clause: unknown) => {
      const r = await gql(client, `query($s: String!, $f: String) { factQuery(dataModelSlug: $s, filters: $f) { count results { id } } }`, {
        s: dated.slug,
        f: f(clause),
      });
      assert.equal(r.errors, undefined, JSON.stringify(r.errors));
      return (r.data.factQuery.results as { id: string }[]).map((x) => x.id).sort();
    };
    // Only the instants compare: the valid canonical string and the one with an offset (the same instant).
    assert.deepEqual(await q({ field: 'd', op: 'gte', value: '2026-03-01T10:00:00Z' }), [ID(321), ID(327)]);
    assert.deepEqual(await q({ field: 'd', op: 'lt', value: '2030-01-01T00:00:00Z' }), [ID(321), ID(327)]);
    assert.deepEqual(await q({ field: 'd', op: 'eq', value: '2026-03-01T10:00:00Z' }), [ID(321), ID(327)]);
    assert.deepEqual(await q({ field: 'd', op: 'in', value: ['2026-03-01T10:00:00Z'] }), [ID(321), ID(327)]);
  });

  test('eq and short in lists are tests that the index on data can answer; ne, nin and long in lists are not', async () => {
    // The clause alone, on every current row: with sequential scans priced out, the plan
    // uses the index on data exactly when it can answer the clause (no other index can).
    const plan = async (clause: FactFilter) =>
      t.deps.db.transaction().execute(async (trx) => {
        await sql`set local enable_seqscan = off`.execute(trx);
        const { rows } = await sql`explain select count(*) from fact_current as b where ${clauseSql(sql.ref('b.data'), clause)}`.execute(trx);
        return (rows as Record<string, string>[]).map((r) => Object.values(r)[0]).join('\n');
      });
    const byIndex = /Bitmap Index Scan on fact_current_(observed|inserted)_data_idx\b/;
    const eq = (type: FactFilter['type'], value: unknown): FactFilter => ({ field: 'x', type, op: 'eq', value });
    for (const clause of [eq('string', 'open'), eq('integer', 5), eq('float', 2.5), eq('boolean', false), eq(null, 'x')]) {
      assert.match(await plan(clause), byIndex, JSON.stringify(clause));
    }
    assert.doesNotMatch(await plan({ field: 'x', type: 'string', op: 'ne', value: 'open' }), byIndex);
    const list = (type: FactFilter['type'], op: 'in' | 'nin', value: unknown[]): FactFilter => ({ field: 'x', type, op, value });
    for (const clause of [
      list('string', 'in', ['a', 'b']),
      list('integer', 'in', [1, 2, 3, 4, 5, 6, 7, 8]),
      list('boolean', 'in', [true]),
      list(null, 'in', ['a', 1]),
    ]) {
      assert.match(await plan(clause), byIndex, JSON.stringify(clause));
    }
    for (const clause of [list('string', 'nin', ['a', 'b']), list('integer', 'in', [1, 2, 3, 4, 5, 6, 7, 8, 9]), list(null, 'in', ['a', { b: 1 }])]) {
      assert.doesNotMatch(await plan(clause), byIndex, JSON.stringify(clause));
    }
  });

  test('clauses are ANDed; 20 clauses are allowed', async () => {
    assert.deepEqual(await latestIds(f({ field: 'status', op: 'eq', value: 'anon' }, { field: 'amount', op: 'eq', value: 4 })), [ID(10)]);
    const twenty = Array.from({ length: 20 }, () => ({ field: 'amount', op: 'gte', value: 4 }));
    assert.deepEqual(await latestIds(JSON.stringify(twenty)), [ID(2), ID(4), ID(10)]);
  });

  test('filters apply in timeline mode to every fact', async () => {
    const p = await page({ mode: 'timeline', since: at(T0), until: at(T0 + DAY), filters: f({ field: 'order_id', op: 'eq', value: 'o1' }) });
    assert.deepEqual(ids(p), [ID(2), ID(3), ID(1)]);
  });

  test('every malformed filter is graphql_validation naming the argument', async () => {
    const bad: [unknown, RegExp][] = [
      ['not json', /not valid JSON/],
      ['{"field":"status","op":"eq","value":"x"}', /must be a JSON array/],
      ['[1]', /must be an object/],
      [
        f({ field: 'nope', op: 'eq', value: 1 }),
        /\.field "nope" is not a field of data model [a-z0-9-]+; its fields: amount, due, meta, note, order_id, paid, price, status$/,
      ],
      [f({ field: 'status', op: 'like', value: 'x' }), /op must be one of/],
      [f({ field: 'status', op: 'gt', value: 'x' }), /does not apply/],
      [f({ field: 'amount', op: 'contains', value: '1' }), /does not apply/],
      [f({ field: 'paid', op: 'lt', value: true }), /does not apply/],
      [f({ field: 'meta', op: 'gt', value: {} }), /does not apply/],
      [f({ field: 'note', op: 'starts_with', value: 'x' }), /does not apply/],
      [f({ field: 'amount', op: 'eq', value: 1.5 }), /type integer/],
      [f({ field: 'amount', op: 'eq', value: '1' }), /type integer/],
      [f({ field: 'price', op: 'eq', value: '1.5' }), /type float/],
      [f({ field: 'paid', op: 'eq', value: 'true' }), /type boolean/],
      [f({ field: 'due', op: 'gt', value: '2026-02-30T00:00:00Z' }), /type datetime/],
      [f({ field: 'due', op: 'gt', value: '2026-03-01T00:00:00' }), /type datetime/],
      [f({ field: 'meta', op: 'eq', value: [1] }), /type map/],
      [f({ field: 'status', op: 'eq', value: 5 }), /type string/],
      [f({ field: 'status', op: 'eq', value: null }), /is_null/],
      [f({ field: 'note', op: 'eq', value: null }), /is_null/],
      [f({ field: 'status', op: 'eq', value: 'a\u0000b' }), /type string/],
      [f({ field: 'status', op: 'contains', value: 7 }), /must be a string/],
      [f({ field: 'status', op: 'in', value: 'open' }), /must be an array/],
      [f({ field: 'amount', op: 'in', value: [1, 'x'] }), /only values of type integer/],
      [f({ field: 'status', op: 'is_null', value: 'yes' }), /true or false/],
      [f({ field: 'status', op: 'eq' }), /value is missing/],
      [f({ field: 'status', op: 'eq', value: 'x', extra: 1 }), /unknown member/],
      [f({ op: 'eq', value: 'x' }), /field must be/],
      [JSON.stringify(Array.from({ length: 21 }, () => ({ field: 'status', op: 'eq', value: 'x' }))), /21 clauses; at most 20/],
      [f({ field: 'status', op: 'in', value: Array.from({ length: 1001 }, (_, i) => `v${i}`) }), /more than 1000/],
    ];
    for (const [filters, message] of bad) {
      assert.match(await expectInvalid({ filters }, 'filters'), message, String(filters).slice(0, 200));
    }
  });
});

describe('joins', () => {
  let customers: Model;
  before(async () => {
    customers = await createModel(t.deps, tenant, uniqueSlug('customers'), [
      { name: 'order_id', type: 'string', is_primary_key: true },
      { name: 'tier', type: 'string' },
      { name: 'score', type: 'integer' },
    ]);
    await insertFacts(t.deps, customers, [
      { id: ID(101), entity_id: 'o1', observed_at: T0, inserted_at: I0, data: { order_id: 'o1', tier: 'gold', score: 1 } },
      { id: ID(102), entity_id: 'o1', observed_at: T0 + DAY, inserted_at: I0, data: { order_id: 'o1', tier: 'silver' } },
      { id: ID(103), entity_id: 'o2', observed_at: T0, inserted_at: I0, data: { order_id: 'o2', tier: 'gold', score: 9 } },
      { id: ID(104), entity_id: null, observed_at: T0, inserted_at: I0, data: { tier: 'none' } },
    ]);
  });
  const joined = (p: Page, slug: string) => p.results!.map((r) => [r.entityId, JSON.parse(r.data)[slug]]);

  test('left: every entity, the joined latest row under the joined slug, all its fields, nulls when unmatched', async () => {
    const p = await page({ join: customers.slug });
    assert.equal(p.count, 6);
    assert.deepEqual(joined(p, customers.slug), [
      ['o4', { order_id: null, tier: null, score: null }],
      ['o3', { order_id: null, tier: null, score: null }],
      ['o1', { order_id: 'o1', tier: 'silver', score: null }],
      ['o2', { order_id: 'o2', tier: 'gold', score: 9 }],
      [null, { order_id: null, tier: null, score: null }],
      [null, { order_id: null, tier: null, score: null }],
    ]);
    // The base row's own data is all there beside the joined member.
    const o1 = JSON.parse(p.results![2]!.data);
    assert.equal(o1.status, 'closed');
    assert.equal(o1.amount, 12);
    assert.deepEqual(await page({ join: customers.slug, joinType: 'left' }), p);
  });

  test('inner: unmatched entities (and facts without an entity id) are left out, and the count follows', async () => {
    const p = await page({ join: customers.slug, joinType: 'inner' });
    assert.equal(p.count, 2);
    assert.deepEqual(joined(p, customers.slug), [
      ['o1', { order_id: 'o1', tier: 'silver', score: null }],
      ['o2', { order_id: 'o2', tier: 'gold', score: 9 }],
    ]);
  });

  test('joinFilters choose among the joined facts before the latest is taken', async () => {
    const gold = JSON.stringify([{ field: 'tier', op: 'eq', value: 'gold' }]);
    // o1's latest customer fact is silver; its latest gold fact is the older one.
    const inner = await page({ join: customers.slug, joinType: 'inner', joinFilters: gold });
    assert.deepEqual(joined(inner, customers.slug), [
      ['o1', { order_id: 'o1', tier: 'gold', score: 1 }],
      ['o2', { order_id: 'o2', tier: 'gold', score: 9 }],
    ]);
    const none = JSON.stringify([{ field: 'tier', op: 'eq', value: 'platinum' }]);
    const innerNone = await page({ join: customers.slug, joinType: 'inner', joinFilters: none });
    assert.equal(innerNone.count, 0);
    const leftNone = await page({ join: customers.slug, joinFilters: none });
    assert.equal(leftNone.count, 6);
    assert.ok(joined(leftNone, customers.slug).every(([, j]) => j.tier === null));
  });

  test('filters and joinFilters together, with paging over the inner join', async () => {
    const p = await page({
      join: customers.slug,
      joinType: 'inner',
      filters: JSON.stringify([{ field: 'amount', op: 'gte', value: 5 }]),
      joinFilters: JSON.stringify([{ field: 'score', op: 'gt', value: 0 }]),
      limit: 1,
      offset: 1,
    });
    assert.equal(p.count, 2);
    assert.equal(p.hasNextPage, false);
    assert.deepEqual(joined(p, customers.slug), [['o2', { order_id: 'o2', tier: 'gold', score: 9 }]]);
  });

  test('as of until, the joined model is read as of the same instant', async () => {
    const p = await page({ join: customers.slug, joinType: 'inner', until: at(T0 + 2 * HOUR) });
    assert.deepEqual(joined(p, customers.slug), [
      ['o1', { order_id: 'o1', tier: 'gold', score: 1 }],
      ['o2', { order_id: 'o2', tier: 'gold', score: 9 }],
    ]);
  });

  test('a join slug that equals a field name replaces that member', async () => {
    const status = await createModel(t.deps, tenant, 'status', [
      { name: 'order_id', type: 'string', is_primary_key: true },
      { name: 'label', type: 'string' },
    ]);
    await insertFacts(t.deps, status, [{ entity_id: 'o2', observed_at: T0, data: { order_id: 'o2', label: 'L' } }]);
    const p = await page({ join: status.slug, joinType: 'inner' });
    assert.deepEqual(JSON.parse(p.results![0]!.data).status, { order_id: 'o2', label: 'L' });
  });

  test('joinFilters: 20 clauses are allowed, and values are typed by the joined model as in filters', async () => {
    const gold = (n: number) => JSON.stringify(Array.from({ length: n }, () => ({ field: 'tier', op: 'eq', value: 'gold' })));
    const one = await page({ join: customers.slug, joinType: 'inner', joinFilters: gold(1) });
    assert.ok(one.results!.length > 0);
    assert.deepEqual(ids(await page({ join: customers.slug, joinType: 'inner', joinFilters: gold(20) })), ids(one));
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ field: 'tier', op: 'gt', value: 'x' }, /does not apply/],
      [{ field: 'score', op: 'eq', value: '1' }, /type integer/],
      [{ field: 'score', op: 'contains', value: '1' }, /does not apply/],
      [{ field: 'tier', op: 'eq', value: null }, /is_null/],
      [{ field: 'tier', op: 'is_null', value: 'yes' }, /true or false/],
    ];
    for (const [clause, message] of bad) {
      assert.match(await expectInvalid({ join: customers.slug, joinFilters: JSON.stringify([clause]) }, 'joinFilters'), message, JSON.stringify(clause));
    }
  });

  test('join errors: unknown slug, bad joinType, joinFilters without a join or on unknown fields, joinFilters limits', async () => {
    await expectInvalid({ join: 'no-such-model' }, 'joinDataModelSlug');
    await expectInvalid({ join: 'Not A Slug!' }, 'joinDataModelSlug');
    await expectInvalid({ join: customers.slug, joinType: 'outer' }, 'joinType');
    await expectInvalid({ joinType: 'full' }, 'joinType');
    await expectInvalid({ joinFilters: '[]' }, 'joinFilters');
    const unknown = await expectInvalid({ join: customers.slug, joinFilters: JSON.stringify([{ field: 'status', op: 'eq', value: 'x' }]) }, 'joinFilters');
    assert.match(unknown, /^joinFilters\[0\]\.field "status" is not a field of data model [a-z0-9-]+; its fields: /);
    await expectInvalid(
      { join: customers.slug, joinFilters: JSON.stringify(Array.from({ length: 21 }, () => ({ field: 'tier', op: 'eq', value: 'x' }))) },
      'joinFilters',
    );
    await expectInvalid({ join: customers.slug, joinFilters: 'nope' }, 'joinFilters');
  });
});

describe('argument errors', () => {
  test('unknown slug, malformed slug, bad mode, axis, sort or direction', async () => {
    await expectInvalid({ slug: 'no-such-model' }, 'dataModelSlug');
    await expectInvalid({ slug: '' }, 'dataModelSlug');
    await expectInvalid({ slug: 'UPPER' }, 'dataModelSlug');
    await expectInvalid({ slug: 'x'.repeat(64) }, 'dataModelSlug');
    await expectInvalid({ mode: 'history' }, 'mode');
    await expectInvalid({ mode: 'LATEST' }, 'mode');
    await expectInvalid({ axis: 'updated_at' }, 'timeAxis');
    await expectInvalid({ mode: 'timeline', sort: 'amount' }, 'sort');
    await expectInvalid({ dir: 'up' }, 'sortDirection');
    await expectInvalid({ dir: 'DESC' }, 'sortDirection');
  });

  test('a DateTime without a zone or impossible is refused naming the argument', async () => {
    for (const [name, value] of [
      ['until', '2026-03-01T00:00:00'],
      ['until', '2026-03-01'],
      ['since', '2026-13-01T00:00:00Z'],
      ['until', '2026-02-29T00:00:00Z'],
      ['since', 'now'],
      ['until', '2026-03-01T24:00:00Z'],
      ['since', 5],
    ] as const) {
      const message = await expectInvalid({ [name]: value }, name);
      assert.match(message, new RegExp(`^${name} must be an ISO 8601 date-time with a zone`), `${name} ${value}`);
    }
    for (const [name, literal] of [
      ['until', '5'],
      ['since', '"yesterday"'],
      ['until', 'true'],
    ]) {
      const r = await gql(client, `{ factQuery(dataModelSlug: "${orders.slug}", ${name}: ${literal}) { count } }`);
      assert.equal(onlyCode(r), 'graphql_validation');
      assert.equal(r.errors![0]!.extensions!.argument, name);
      assert.match(r.errors![0]!.message, new RegExp(`^${name} must be an ISO 8601`));
    }
  });

  test('DateTimes from year 1 to 9999 are accepted, windows near year 1 stop there; outside is refused', async () => {
    for (const until of ['0000-12-31T23:59:59Z', '0001-01-01T00:30:00+01:00', '10000-01-01T00:00:00Z'])
      assert.equal(onlyCode(await fq({ until })), 'graphql_validation', until);
    assert.equal((await page({ mode: 'timeline', until: '0001-01-02T00:00:00Z' })).count, 0);
    assert.equal((await page({ mode: 'timeline', since: '0001-01-01T00:00:00Z', until: '0001-06-01T00:00:00Z' })).count, 0);
    assert.equal((await page({ until: '9999-12-31T23:59:59.999Z' })).count, 6);
    assert.equal(
      (await page({ mode: 'timeline', since: '2026-03-01T00:00:00.000999Z', until: '2026-03-01T01:00:00.5Z', dir: 'asc' })).results![0]!.id,
      ID(1),
      'digits past milliseconds are dropped',
    );
  });

  test('an error in one aliased factQuery leaves the others answered', async () => {
    const r = await gql(
      client,
      `{ ok: factQuery(dataModelSlug: "${orders.slug}") { count } bad: factQuery(dataModelSlug: "${orders.slug}", limit: 0) { count } }`,
    );
    assert.equal(r.status, 200);
    assert.deepEqual(r.data, { ok: { count: 6 }, bad: null });
    assert.equal(onlyCode(r), 'graphql_validation');
    assert.deepEqual(r.errors![0]!.path, ['bad']);
  });
});

/** The SQL of every statement on the fact tables run while `fn` runs, with parameters as placeholders. */
async function capture(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  await onFactStatements(t, (q) => seen.push(q), fn);
  return seen;
}
