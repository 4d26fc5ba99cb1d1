import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, sql } from 'kysely';
import { applyListQuery, countQuery, countRows, finishKeysetPage } from '../../src/http/jsonapi/list.sql.ts';
import { encodeCursor, parseQuery, type RawQuery } from '../../src/http/jsonapi/query.ts';
import type { JsonApiFilter, ParsedQuery, SortKey } from '../../src/http/jsonapi/types.ts';
import type { ResourceSpec } from '../../src/resources/resource.ts';
import { runs } from '../helpers/property.ts';

const item: ResourceSpec = {
  type: 'item',
  table: 'items',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    label: { column: 'label_text', kind: 'string', filter: true, sort: true, nullable: true },
    n: { column: 'n', kind: 'integer', filter: true, sort: true, nullable: true },
    flag: { column: 'flag', kind: 'boolean', filter: true, sort: true },
    // A reserved word as column name proves identifiers are quoted.
    status: { column: 'group', kind: 'enum', values: ['draft', 'active', 'archived'], filter: true, sort: true },
    owner_id: { column: 'owner_id', kind: 'uuid', filter: true, sort: true, nullable: true },
    tags: { column: 'tags', kind: 'string_array', values: ['red', 'green', 'blue'], filter: true, nullable: true },
    inserted_at: { column: 'inserted_at', kind: 'datetime', filter: true, sort: true },
  },
  relationships: {},
};
const registry = (type: string) => (type === 'item' ? item : undefined);
const parse = (raw: RawQuery): ParsedQuery => parseQuery(raw, item, { registry, list: true });

interface Row {
  id: string;
  name: string;
  label_text: string | null;
  n: number | null;
  flag: boolean;
  group: string;
  owner_id: string | null;
  tags: string[] | null;
  inserted_at: Date;
}

const UUID_A = '0b6d1f9e-3c1a-4e55-9a7e-2f7d7c1b0a01';
const UUID_B = '8f14e45f-ceea-467f-a0e6-1a4d5b7c9e02';
const DATES = ['2024-01-01T00:00:00.000Z', '2024-01-01T00:00:00.001Z', '2024-06-30T12:34:56.789Z', '2025-02-03T04:05:06.007Z'].map((s) => new Date(s));

let db: Kysely<any>;

before(async () => {
  db = new Kysely<any>({ dialect: new PGliteDialect({ pglite: new PGlite() }) });
  await sql`
    create table items (
      id uuid primary key,
      name text not null,
      label_text text,
      n integer,
      flag boolean not null,
      "group" text not null,
      owner_id uuid,
      tags text[],
      inserted_at timestamptz(3) not null
    )`.execute(db);
});

after(async () => {
  await db.destroy();
});

async function load(rows: readonly Row[]): Promise<void> {
  await db.deleteFrom('items').execute();
  if (rows.length > 0)
    await db
      .insertInto('items')
      .values([...rows])
      .execute();
}

async function fetchPage(q: ParsedQuery) {
  const rows = (await applyListQuery(db.selectFrom('items').selectAll(), 'items', q).execute()) as Row[];
  return finishKeysetPage(rows, q);
}

// --- The in-memory reference: what the SQL must agree with. ---

function compareValues(a: unknown, b: unknown): number {
  if (a instanceof Date && b instanceof Date) return a.getTime() - b.getTime();
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  // The embedded database collates as "C"; for the BMP characters used here that is
  // JavaScript's code unit order.
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}

/** NULL is the greatest value; the id tie-breaker follows the last key's direction. */
function compareRows(a: Row, b: Row, sort: readonly SortKey[]): number {
  const keys = [...sort.map((k) => ({ column: k.column, desc: k.desc })), { column: 'id', desc: sort[sort.length - 1]!.desc }];
  for (const key of keys) {
    const x = a[key.column as keyof Row];
    const y = b[key.column as keyof Row];
    const c = x === null && y === null ? 0 : x === null ? 1 : y === null ? -1 : compareValues(x, y);
    if (c !== 0) return key.desc ? -c : c;
  }
  return 0;
}

function matches(row: Row, clause: JsonApiFilter): boolean {
  const v = row[clause.column as keyof Row];
  const x = clause.value;
  switch (clause.op) {
    case 'eq':
      return v !== null && compareValues(v, x) === 0;
    case 'ne':
      return v === null || compareValues(v, x) !== 0;
    case 'gt':
      return v !== null && compareValues(v, x) > 0;
    case 'gte':
      return v !== null && compareValues(v, x) >= 0;
    case 'lt':
      return v !== null && compareValues(v, x) < 0;
    case 'lte':
      return v !== null && compareValues(v, x) <= 0;
    case 'in':
      return v !== null && (x as unknown[]).some((e) => compareValues(v, e) === 0);
    case 'is_null':
      return (v === null) === x;
    case 'contains':
      return Array.isArray(v) ? v.includes(x as string) : typeof v === 'string' && v.includes(x as string);
  }
}

function reference(rows: readonly Row[], q: ParsedQuery): Row[] {
  return rows.filter((r) => q.filter.every((c) => matches(r, c))).sort((a, b) => compareRows(a, b, q.sort));
}

const ids = (rows: readonly Row[]) => rows.map((r) => r.id);

// --- Generators ---

const textArb = fc.string({ unit: fc.constantFrom('a', 'b', 'B', '%', '_', 'é', ' '), maxLength: 3 });
const rowArb = fc.record({
  id: fc.uuid(),
  name: textArb,
  label_text: fc.option(textArb),
  n: fc.option(fc.integer({ min: -3, max: 3 })),
  flag: fc.boolean(),
  group: fc.constantFrom('draft', 'active', 'archived'),
  owner_id: fc.option(fc.constantFrom(UUID_A, UUID_B)),
  tags: fc.option(fc.subarray(['red', 'green', 'blue'])),
  inserted_at: fc.constantFrom(...DATES),
});
const rowsArb = fc.uniqueArray(rowArb, { selector: (r) => r.id, maxLength: 30 });

const ORDERED = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in'];
const opsFor: Record<string, string[]> = {
  name: [...ORDERED, 'contains'],
  label: [...ORDERED, 'contains', 'is_null'],
  n: [...ORDERED, 'is_null'],
  flag: ['eq', 'ne', 'in'],
  status: ['eq', 'ne', 'in'],
  owner_id: ['eq', 'ne', 'in', 'is_null'],
  tags: ['contains', 'is_null'],
  inserted_at: ORDERED,
};
const valueFor: Record<string, fc.Arbitrary<string>> = {
  name: textArb,
  label: textArb,
  n: fc.integer({ min: -4, max: 4 }).map(String),
  flag: fc.constantFrom('true', 'false'),
  status: fc.constantFrom('draft', 'active', 'archived'),
  owner_id: fc.constantFrom(UUID_A, UUID_B, UUID_B.toUpperCase(), 'ffffffff-ffff-4fff-bfff-ffffffffffff'),
  tags: fc.constantFrom('red', 'green', 'blue'),
  inserted_at: fc.oneof(
    fc.constantFrom(...DATES).map((d) => d.toISOString()),
    fc.constantFrom('2024-01-01', '2024-06-30T14:34:56.789+02:00', '2030-01-01T00:00:00Z'),
  ),
};
const clauseArb = fc.constantFrom(...Object.keys(opsFor)).chain((attr) =>
  fc.constantFrom(...opsFor[attr]!).chain((op): fc.Arbitrary<[string, string]> => {
    const key = op === 'eq' ? fc.constantFrom(`filter[${attr}]`, `filter[${attr}][eq]`) : fc.constant(`filter[${attr}][${op}]`);
    let value = valueFor[attr]!;
    if (op === 'is_null') value = fc.constantFrom('true', 'false');
    if (op === 'in') value = fc.array(valueFor[attr]!, { minLength: 1, maxLength: 3 }).map((vs) => vs.join(','));
    return fc.tuple(key, value);
  }),
);
const filtersArb = fc.uniqueArray(clauseArb, { selector: ([key]) => key.replace(/\[eq\]$/, ''), maxLength: 3 });
const sortArb = fc.option(
  fc
    .uniqueArray(fc.constantFrom('name', 'label', 'n', 'flag', 'status', 'owner_id', 'inserted_at'), { minLength: 1, maxLength: 3 })
    .chain((attrs) => fc.tuple(...attrs.map((a) => fc.boolean().map((desc) => (desc ? `-${a}` : a)))))
    .map((keys) => keys.join(',')),
);

function queryOf(filters: readonly [string, string][], sort: string | null, extra: RawQuery = {}): RawQuery {
  return { ...Object.fromEntries(filters), ...(sort === null ? {} : { sort }), ...extra };
}

// --- Tests ---

const at = (i: number) => DATES[i]!;
const fixed: Row[] = [
  {
    id: '00000000-0000-4000-8000-000000000001',
    name: 'apple',
    label_text: null,
    n: 1,
    flag: true,
    group: 'draft',
    owner_id: UUID_A,
    tags: ['red'],
    inserted_at: at(0),
  },
  {
    id: '00000000-0000-4000-8000-000000000002',
    name: '50%_off',
    label_text: 'x',
    n: null,
    flag: false,
    group: 'active',
    owner_id: null,
    tags: null,
    inserted_at: at(1),
  },
  {
    id: '00000000-0000-4000-8000-000000000003',
    name: '50 of',
    label_text: 'y',
    n: 2,
    flag: true,
    group: 'active',
    owner_id: UUID_B,
    tags: ['red', 'blue'],
    inserted_at: at(1),
  },
  {
    id: '00000000-0000-4000-8000-000000000004',
    name: 'Apple',
    label_text: null,
    n: 2,
    flag: false,
    group: 'archived',
    owner_id: UUID_A,
    tags: [],
    inserted_at: at(2),
  },
  {
    id: '00000000-0000-4000-8000-000000000005',
    name: 'banana',
    label_text: 'x',
    n: null,
    flag: true,
    group: 'draft',
    owner_id: null,
    tags: ['green'],
    inserted_at: at(3),
  },
];
const fixedIds = (...ns: number[]) => ns.map((n) => `00000000-0000-4000-8000-00000000000${n}`);

describe('applyListQuery on fixed rows', () => {
  before(() => load(fixed));

  const cases: [RawQuery, number[]][] = [
    [{ 'filter[name]': 'apple' }, [1]],
    [{ 'filter[name][contains]': 'pple' }, [1, 4]],
    [{ 'filter[name][contains]': 'App' }, [4]],
    [{ 'filter[name][contains]': '%_' }, [2]],
    [{ 'filter[name][contains]': '_' }, [2]],
    [{ 'filter[label][ne]': 'x' }, [1, 3, 4]],
    [{ 'filter[n][ne]': '2' }, [1, 2, 5]],
    [{ 'filter[n][gt]': '1' }, [3, 4]],
    [{ 'filter[n][lte]': '1' }, [1]],
    [{ 'filter[n][is_null]': 'true' }, [2, 5]],
    [{ 'filter[n][is_null]': 'false' }, [1, 3, 4]],
    [{ 'filter[n][in]': '1,2' }, [1, 3, 4]],
    [{ 'filter[flag]': 'false' }, [2, 4]],
    [{ 'filter[status][in]': 'draft,archived' }, [1, 4, 5]],
    [{ 'filter[owner_id]': UUID_A.toUpperCase() }, [1, 4]],
    [{ 'filter[owner_id][in]': `${UUID_A},${UUID_B}` }, [1, 3, 4]],
    [{ 'filter[tags][contains]': 'red' }, [1, 3]],
    [{ 'filter[tags][is_null]': 'true' }, [2]],
    [{ 'filter[inserted_at]': at(1).toISOString() }, [2, 3]],
    [{ 'filter[inserted_at][gt]': '2024-01-01T00:00:00Z' }, [2, 3, 4, 5]],
    [{ 'filter[inserted_at][lt]': '2024-06-30' }, [1, 2, 3]],
    [{ 'filter[n][gte]': '1', 'filter[flag]': 'true' }, [1, 3]],
  ];
  for (const [raw, expected] of cases) {
    it(`filters ${new URLSearchParams(raw as Record<string, string>).toString()}`, async () => {
      const page = await fetchPage(parse({ ...raw, sort: 'inserted_at' }));
      assert.deepEqual(ids(page.rows).sort(), fixedIds(...expected));
    });
  }

  it('orders NULLs last ascending and first descending, ties by id in the last direction', async () => {
    assert.deepEqual(ids((await fetchPage(parse({ sort: 'n' }))).rows), fixedIds(1, 3, 4, 2, 5));
    assert.deepEqual(ids((await fetchPage(parse({ sort: '-n' }))).rows), fixedIds(5, 2, 4, 3, 1));
    assert.deepEqual(ids((await fetchPage(parse({ sort: '-n,label' }))).rows), fixedIds(2, 5, 3, 4, 1));
    assert.deepEqual(ids((await fetchPage(parse({}))).rows), fixedIds(5, 4, 3, 2, 1), 'default -inserted_at, id descending');
  });

  it('pages by offset, fetching one row ahead', async () => {
    const first = await fetchPage(parse({ sort: 'name', 'page[limit]': '2', 'page[offset]': '0' }));
    assert.deepEqual(first, { rows: first.rows, hasNext: true, hasPrev: false });
    assert.deepEqual(ids(first.rows), fixedIds(3, 2));
    const last = await fetchPage(parse({ sort: 'name', 'page[limit]': '2', 'page[offset]': '4' }));
    assert.deepEqual([ids(last.rows), last.hasNext, last.hasPrev], [fixedIds(5), false, true]);
  });

  it('keyset-pages across NULLs with mixed directions', async () => {
    const q = parse({ sort: 'n,-label', 'page[limit]': '2' });
    const seen: string[] = [];
    let page = await fetchPage(q);
    seen.push(...ids(page.rows));
    while (page.hasNext) {
      page = await fetchPage(parse({ sort: 'n,-label', 'page[limit]': '2', 'page[after]': encodeCursor(q.sort, page.rows.at(-1)!) }));
      seen.push(...ids(page.rows));
    }
    assert.deepEqual(seen, fixedIds(1, 4, 3, 5, 2));
    const back = await fetchPage(parse({ sort: 'n,-label', 'page[limit]': '2', 'page[before]': encodeCursor(q.sort, fixed[1]!) }));
    assert.deepEqual([ids(back.rows), back.hasPrev, back.hasNext], [fixedIds(3, 5), true, true]);
  });

  it('keeps the caller’s own conditions', async () => {
    const q = parse({ sort: 'name' });
    const rows = await applyListQuery(db.selectFrom('items').select(['id']).where('flag', '=', true), 'items', q).execute();
    assert.deepEqual(ids(rows as Row[]), fixedIds(3, 1, 5));
  });

  it('counts with the filters only', async () => {
    const q = parse({ 'filter[flag]': 'true', sort: 'name', 'page[limit]': '1', 'page[offset]': '2' });
    assert.equal(await countRows(db.selectFrom('items').selectAll().orderBy('name').limit(1), 'items', q), 3);
    assert.equal(await countRows(db.selectFrom('items').where('group', '=', 'draft'), 'items', q), 2);
    const compiled = countQuery(db.selectFrom('items').selectAll(), 'items', q).compile();
    assert.doesNotMatch(compiled.sql, /order by|limit|offset/);
  });

  it('passes every value as a parameter and quotes every column', () => {
    const q = parse({
      'filter[name][contains]': "'; drop table items; --",
      sort: '-status',
      'page[after]': encodeCursor(parse({ sort: '-status' }).sort, { id: UUID_A, group: 'draft' }),
    });
    const compiled = applyListQuery(db.selectFrom('items').selectAll(), 'items', q).compile();
    assert.doesNotMatch(compiled.sql, /drop table|draft/);
    assert.match(compiled.sql, /"items"\."group" desc nulls first/);
    assert.ok(compiled.parameters.includes("'; drop table items; --"));
  });
});

describe('finishKeysetPage', () => {
  const q = (raw: RawQuery) => parse(raw);
  const cursor = encodeCursor(parse({}).sort, { id: UUID_A, inserted_at: at(0) });

  it('trims the look-ahead row', () => {
    assert.deepEqual(finishKeysetPage([1, 2, 3], q({ 'page[limit]': '2' })), { rows: [1, 2], hasNext: true, hasPrev: false });
    assert.deepEqual(finishKeysetPage([1, 2], q({ 'page[limit]': '2' })), { rows: [1, 2], hasNext: false, hasPrev: false });
    assert.deepEqual(finishKeysetPage([], q({})), { rows: [], hasNext: false, hasPrev: false });
  });

  it('reverses a before page and reads the extra row as a previous page', () => {
    assert.deepEqual(finishKeysetPage([3, 2, 1], q({ 'page[limit]': '2', 'page[before]': cursor })), { rows: [2, 3], hasNext: true, hasPrev: true });
    assert.deepEqual(finishKeysetPage([3], q({ 'page[limit]': '2', 'page[before]': cursor })), { rows: [3], hasNext: true, hasPrev: false });
  });

  it('assumes a previous page after a cursor or a positive offset', () => {
    assert.deepEqual(finishKeysetPage([1], q({ 'page[after]': cursor })), { rows: [1], hasNext: false, hasPrev: true });
    assert.deepEqual(finishKeysetPage([1], q({ 'page[offset]': '0' })), { rows: [1], hasNext: false, hasPrev: false });
    assert.deepEqual(finishKeysetPage([1], q({ 'page[offset]': '3' })), { rows: [1], hasNext: false, hasPrev: true });
  });
});

describe('applyListQuery against an in-memory reference', () => {
  it('filters, sorts, offset-pages and counts like the reference', async () => {
    await fc.assert(
      fc.asyncProperty(
        rowsArb,
        filtersArb,
        sortArb,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 12 }),
        async (rows, filters, sort, limit, offset) => {
          await load(rows);
          const q = parse(queryOf(filters, sort, { 'page[limit]': String(limit), 'page[offset]': String(offset) }));
          const expected = reference(rows, q);
          const page = await fetchPage(q);
          assert.deepEqual(ids(page.rows), ids(expected.slice(offset, offset + limit)));
          assert.equal(page.hasNext, expected.length > offset + limit);
          assert.equal(await countRows(db.selectFrom('items'), 'items', q), expected.length);
        },
      ),
      { numRuns: runs(300) },
    );
  });

  it('visits every row exactly once, in order, paging forward with after and back with before', async () => {
    await fc.assert(
      fc.asyncProperty(rowsArb, fc.option(filtersArb), sortArb, fc.integer({ min: 1, max: 6 }), async (rows, filters, sort, limit) => {
        await load(rows);
        const base = queryOf(filters ?? [], sort, { 'page[limit]': String(limit) });
        const q = parse(base);
        const expected = ids(reference(rows, q));

        const forward: string[] = [];
        let page = await fetchPage(q);
        forward.push(...ids(page.rows));
        while (page.hasNext) {
          assert.ok(forward.length <= rows.length, 'forward paging does not terminate');
          page = await fetchPage(parse({ ...base, 'page[after]': encodeCursor(q.sort, page.rows.at(-1)!) }));
          assert.ok(page.rows.length > 0 || !page.hasNext);
          forward.push(...ids(page.rows));
        }
        assert.deepEqual(forward, expected);

        // Backwards from the last row: every earlier row, one page at a time.
        const all = reference(rows, q);
        if (all.length === 0) return;
        const backward: string[] = [];
        let from = all.at(-1)!;
        for (;;) {
          assert.ok(backward.length <= rows.length, 'backward paging does not terminate');
          page = await fetchPage(parse({ ...base, 'page[before]': encodeCursor(q.sort, from) }));
          assert.ok(page.rows.length <= limit);
          backward.unshift(...ids(page.rows));
          if (!page.hasPrev) break;
          from = page.rows[0]!;
        }
        assert.deepEqual([...backward, all.at(-1)!.id], expected);
      }),
      { numRuns: runs(200) },
    );
  });
});
