import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { AppError } from '../../src/errors.ts';
import { encodeCursor, parseQueryDateTime, parseQuery, type RawQuery } from '../../src/http/jsonapi/query.ts';
import type { ParsedQuery } from '../../src/http/jsonapi/types.ts';
import type { ResourceSpec } from '../../src/resources/resource.ts';
import { runs } from '../helpers/property.ts';
import { RUNAWAY_MS } from '../helpers/runaway.ts';

const item: ResourceSpec = {
  type: 'item',
  table: 'items',
  attributes: {
    name: { column: 'name', kind: 'string', filter: true, sort: true },
    label: { column: 'label_text', kind: 'string', filter: true, sort: true, nullable: true },
    n: { column: 'n', kind: 'integer', filter: true, sort: true, nullable: true },
    flag: { column: 'flag', kind: 'boolean', filter: true, sort: true },
    status: { column: 'status', kind: 'enum', values: ['draft', 'active', 'archived'], filter: true, sort: true },
    owner_id: { column: 'owner_id', kind: 'uuid', filter: true, nullable: true },
    tags: { column: 'tags', kind: 'string_array', values: ['red', 'green', 'blue'], filter: true, nullable: true },
    notes: { column: 'notes', kind: 'string_array', filter: true },
    meta: { column: 'meta', kind: 'json', filter: true, sort: true },
    score: { column: 'score', kind: 'integer' },
    inserted_at: { column: 'inserted_at', kind: 'datetime', filter: true, sort: true },
  },
  relationships: {
    owner: { type: 'user', kind: 'one', column: 'owner_id' },
    parent: { type: 'item', kind: 'one', column: 'parent_id' },
    children: { type: 'item', kind: 'many', foreignKey: 'parent_id' },
  },
};
const user: ResourceSpec = {
  type: 'user',
  table: 'users',
  attributes: { email: { column: 'email', kind: 'string' }, inserted_at: { column: 'inserted_at', kind: 'datetime' } },
  relationships: { memberships: { type: 'membership', kind: 'many', foreignKey: 'user_id' } },
};
const membership: ResourceSpec = {
  type: 'membership',
  table: 'memberships',
  attributes: { role: { column: 'role', kind: 'enum', values: ['owner', 'member'] } },
  relationships: {
    user: { type: 'user', kind: 'one', column: 'user_id' },
    organization: { type: 'organization', kind: 'one', column: 'organization_id' },
  },
};
const organization: ResourceSpec = {
  type: 'organization',
  table: 'organizations',
  attributes: { name: { column: 'name', kind: 'string' } },
  relationships: { members: { type: 'membership', kind: 'many', foreignKey: 'organization_id' } },
};
const specs = new Map([item, user, membership, organization].map((s) => [s.type, s]));
const registry = (type: string) => specs.get(type);

const list = (raw: RawQuery): ParsedQuery => parseQuery(raw, item, { registry, list: true });
const single = (raw: RawQuery): ParsedQuery => parseQuery(raw, item, { registry, list: false });

function rejects(fn: () => unknown, parameter: string, detail?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`);
    assert.equal(err.code, 'invalid_query');
    assert.equal(err.status, 400);
    assert.deepEqual(err.source, { parameter });
    if (detail) assert.match(err.detail, detail);
    return true;
  });
}

const filterOf = (raw: RawQuery) => {
  const [clause] = list(raw).filter;
  assert.ok(clause);
  return clause;
};
const filterValue = (raw: RawQuery) => filterOf(raw).value;

const UUID_A = '0b6d1f9e-3c1a-4e55-9a7e-2f7d7c1b0a01';
const UUID_B = '8f14e45f-ceea-467f-a0e6-1a4d5b7c9e02';

describe('parseQuery: families', () => {
  it('gives defaults for an empty query', () => {
    const q = list({});
    assert.deepEqual(q.include, []);
    assert.equal(q.fields.size, 0);
    assert.deepEqual(q.filter, []);
    assert.deepEqual(q.sort, [{ attr: 'inserted_at', column: 'inserted_at', kind: 'datetime', desc: true }]);
    assert.deepEqual(q.page, { kind: 'keyset', limit: 50 });
    assert.equal(q.count, false);
  });

  it('ignores keys whose value is undefined', () => {
    assert.deepEqual(list({ sort: undefined }).sort, list({}).sort);
  });

  it('rejects unknown parameters by their exact name', () => {
    for (const name of ['foo', 'Filter[name]', 'filter', 'page', 'fields', 'fields[item', 'include[x]', 'sort[name]', 'fields[item][x]', '', '__proto__']) {
      rejects(() => list({ [name]: 'x' }), name);
    }
  });

  it('rejects repeated parameters', () => {
    rejects(() => list({ 'filter[name]': ['a', 'b'] }), 'filter[name]', /repeated/);
    rejects(() => list({ include: ['owner'] }), 'include', /repeated/);
  });

  it('rejects values and names over 4096 characters before parsing them', () => {
    rejects(() => list({ sort: 'name,'.repeat(1000) }), 'sort', /4096/);
    const longName = `filter[${'x'.repeat(5000)}]`;
    rejects(() => list({ [longName]: 'a' }), longName, /too long/);
  });

  it('rejects NUL characters in any value', () => {
    rejects(() => list({ 'filter[name]': 'a\0b' }), 'filter[name]', /NUL/);
  });

  it('allows filter, sort and page only on collections', () => {
    rejects(() => single({ 'filter[name]': 'a' }), 'filter[name]', /collections/);
    rejects(() => single({ sort: 'name' }), 'sort', /collections/);
    rejects(() => single({ 'page[limit]': '5' }), 'page[limit]', /collections/);
    rejects(() => single({ 'page[bogus]': '5' }), 'page[bogus]', /collections/);
    const q = single({ include: 'owner', 'fields[item]': 'name' });
    assert.deepEqual(q.include, [['owner']]);
  });
});

describe('parseQuery: include', () => {
  it('walks relationships through the registry', () => {
    assert.deepEqual(list({ include: 'owner,owner.memberships.organization,children.parent' }).include, [
      ['owner'],
      ['owner', 'memberships', 'organization'],
      ['children', 'parent'],
    ]);
  });

  it('collapses duplicates and treats an empty value as nothing', () => {
    assert.deepEqual(list({ include: 'owner,owner,owner' }).include, [['owner']]);
    assert.deepEqual(list({ include: '' }).include, []);
  });

  it('rejects unknown, empty and prototype segments', () => {
    for (const value of [
      'nope',
      'owner.nope',
      'owner.memberships.nope',
      'owner,',
      '.owner',
      'owner..memberships',
      'constructor',
      '__proto__',
      'owner.toString',
      'email',
    ]) {
      rejects(() => list({ include: value }), 'include', /relationship path/);
    }
  });

  it('limits depth to 3', () => {
    rejects(() => list({ include: 'owner.memberships.organization.members' }), 'include', /deeper than 3/);
    rejects(() => list({ include: 'a.b.c.d' }), 'include', /deeper than 3/);
  });

  it('allows at most 20 distinct paths', () => {
    const paths: string[] = [];
    const queue: [string, ResourceSpec][] = [['', item]];
    while (paths.length < 21 && queue.length > 0) {
      const [prefix, spec] = queue.shift()!;
      for (const [rel, def] of Object.entries(spec.relationships)) {
        const path = prefix === '' ? rel : `${prefix}.${rel}`;
        paths.push(path);
        if (path.split('.').length < 3) queue.push([path, specs.get(def.type)!]);
      }
    }
    assert.ok(paths.length >= 21);
    assert.equal(list({ include: [...paths.slice(0, 20), ...paths.slice(0, 20)].join(',') }).include.length, 20);
    rejects(() => list({ include: paths.slice(0, 21).join(',') }), 'include', /At most 20/);
  });
});

describe('parseQuery: fields', () => {
  it('keeps attributes and relationships per type', () => {
    const q = list({ 'fields[item]': 'name,owner,name', 'fields[user]': 'email' });
    assert.deepEqual(
      q.fields,
      new Map([
        ['item', new Set(['name', 'owner'])],
        ['user', new Set(['email'])],
      ]),
    );
  });

  it('reads an empty value as no fields', () => {
    assert.deepEqual(list({ 'fields[item]': '' }).fields.get('item'), new Set());
  });

  it('rejects unknown types and names', () => {
    rejects(() => list({ 'fields[nope]': 'name' }), 'fields[nope]', /Unknown resource type/);
    rejects(() => list({ 'fields[]': 'name' }), 'fields[]', /Unknown resource type/);
    rejects(() => list({ 'fields[__proto__]': 'name' }), 'fields[__proto__]', /Unknown resource type/);
    rejects(() => list({ 'fields[item]': 'name,nope' }), 'fields[item]', /"nope" is not a field/);
    rejects(() => list({ 'fields[item]': 'name,' }), 'fields[item]', /"" is not a field/);
    rejects(() => list({ 'fields[item]': 'constructor' }), 'fields[item]', /not a field/);
    rejects(() => list({ 'fields[user]': 'name' }), 'fields[user]', /not a field of user/);
  });

  it('does not trust a registry that answers for a type it does not have', () => {
    const sloppy = () => item;
    assert.throws(() => parseQuery({ 'fields[whatever]': 'name' }, item, { registry: sloppy, list: true }), AppError);
  });
});

describe('parseQuery: filter', () => {
  it('reads filter[attr] as equality and resolves the column', () => {
    assert.deepEqual(filterOf({ 'filter[label]': 'x' }), { attr: 'label', column: 'label_text', kind: 'string', op: 'eq', value: 'x' });
    assert.equal(filterOf({ 'filter[label][ne]': 'x' }).op, 'ne');
  });

  it('keeps several clauses, including two on one attribute', () => {
    const q = list({ 'filter[n][gte]': '1', 'filter[n][lt]': '5', 'filter[name]': 'a' });
    assert.deepEqual(
      q.filter.map((c) => [c.attr, c.op, c.value]),
      [
        ['n', 'gte', 1],
        ['n', 'lt', 5],
        ['name', 'eq', 'a'],
      ],
    );
  });

  it('rejects unknown, unfilterable and json attributes', () => {
    for (const attr of ['nope', 'score', 'meta', 'constructor', '__proto__', 'toString', '']) {
      rejects(() => list({ [`filter[${attr}]`]: '1' }), `filter[${attr}]`, /Cannot filter/);
    }
  });

  it('an unknown filter or sort attribute is named, with the attributes that can be used', () => {
    rejects(
      () => list({ 'filter[nope][eq]': '1' }),
      'filter[nope][eq]',
      /^Cannot filter by "nope"; filterable: name, label, n, flag, status, owner_id, tags, notes, inserted_at$/,
    );
    rejects(() => list({ sort: 'name,-nope' }), 'sort', /^Cannot sort by "nope"; sortable: name, label, n, flag, status, inserted_at$/);
    rejects(() => list({ [`filter[${'x'.repeat(500)}]`]: '1' }), `filter[${'x'.repeat(500)}]`, /^Cannot filter by "x{64}\.\.\."; filterable/);
  });

  it('rejects unknown operators and malformed keys', () => {
    rejects(() => list({ 'filter[name][xx]': 'a' }), 'filter[name][xx]', /Unknown filter operator "xx"/);
    rejects(() => list({ 'filter[name][EQ]': 'a' }), 'filter[name][EQ]', /Unknown filter operator/);
    rejects(() => list({ 'filter[name][]': 'a' }), 'filter[name][]', /Unknown filter operator/);
    rejects(() => list({ 'filter[name][eq][x]': 'a' }), 'filter[name][eq][x]', /filter\[attribute\]/);
    rejects(() => list({ 'filter[name': 'a' }), 'filter[name', /filter\[attribute\]/);
    rejects(() => list({ 'filter[a[b]]': 'a' }), 'filter[a[b]]', /filter\[attribute\]/);
  });

  it('coerces integers: whole numbers in the range of the integer column only', () => {
    assert.equal(filterValue({ 'filter[n]': '42' }), 42);
    assert.equal(filterValue({ 'filter[n]': '-7' }), -7);
    assert.ok(Object.is(filterValue({ 'filter[n]': '-0' }), 0));
    assert.equal(filterValue({ 'filter[n]': '2147483647' }), 2147483647);
    assert.equal(filterValue({ 'filter[n]': '-2147483648' }), -2147483648);
    for (const bad of [
      '',
      '1.5',
      '1e3',
      '+1',
      ' 1',
      '0x10',
      '2147483648',
      '-2147483649',
      '9007199254740991',
      '9007199254740992',
      'NaN',
      'Infinity',
      '1'.repeat(40),
    ]) {
      rejects(() => list({ 'filter[n]': bad }), 'filter[n]', /whole number from -2147483648 to 2147483647/);
    }
  });

  it('property: an integer filter value is accepted exactly when the integer column can hold it', () => {
    const int4 = (n: bigint) => n >= -(2n ** 31n) && n <= 2n ** 31n - 1n;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: -(2n ** 40n), max: 2n ** 40n }),
          fc.bigInt({ min: -(2n ** 31n) - 2n, max: -(2n ** 31n) + 2n }),
          fc.bigInt({ min: 2n ** 31n - 3n, max: 2n ** 31n + 1n }),
        ),
        fc.constantFrom('eq', 'gt', 'lte', 'in'),
        (n, op) => {
          const name = `filter[n][${op}]`;
          if (int4(n)) {
            const v = filterValue({ [name]: String(n) });
            assert.deepEqual(v, op === 'in' ? [Number(n)] : Number(n));
          } else {
            rejects(() => list({ [name]: String(n) }), name, /whole number from/);
          }
        },
      ),
    );
  });

  it('coerces booleans from true/false only', () => {
    assert.equal(filterValue({ 'filter[flag]': 'true' }), true);
    assert.equal(filterValue({ 'filter[flag]': 'false' }), false);
    for (const bad of ['TRUE', '1', 'yes', '']) rejects(() => list({ 'filter[flag]': bad }), 'filter[flag]', /true or false/);
  });

  it('coerces ISO 8601 datetimes to Dates', () => {
    const at = (v: string) => (filterValue({ 'filter[inserted_at][gte]': v }) as Date).toISOString();
    assert.equal(at('2024-03-01'), '2024-03-01T00:00:00.000Z');
    assert.equal(at('2024-03-01T10:20:30Z'), '2024-03-01T10:20:30.000Z');
    assert.equal(at('2024-03-01T10:20Z'), '2024-03-01T10:20:00.000Z');
    assert.equal(at('2024-03-01T10:20:30.5Z'), '2024-03-01T10:20:30.500Z');
    assert.equal(at('2024-03-01T10:20:30.123456+02:00'), '2024-03-01T08:20:30.123Z');
    assert.equal(at('2024-03-01T10:20:30-0530'), '2024-03-01T15:50:30.000Z');
    assert.equal(at('2024-03-01T10:20:30 02:00'), '2024-03-01T08:20:30.000Z', 'an unencoded + arrives as a space');
    assert.equal(at('2024-02-29T00:00:00Z'), '2024-02-29T00:00:00.000Z');
    assert.equal(at('0001-01-01T00:00:00Z'), '0001-01-01T00:00:00.000Z');
    assert.equal(at('2024-03-01t10:20:30z'), '2024-03-01T10:20:30.000Z', 'RFC 3339 allows lower-case t and z');
    for (const bad of [
      '',
      'yesterday',
      '2024-02-30',
      '2023-02-29',
      '2024-13-01',
      '2024-00-10',
      '2024-04-31',
      '2024-03-01T10:20:30',
      '2024-03-01T24:00:00Z',
      '2024-03-01T10:60:00Z',
      '2024-03-01T10:00:60Z',
      '2024-03-01T10:00:00+24:00',
      '0000-01-01',
      '2024-3-1',
      '2024-03-01T10:20:30.Z',
      '2024-03-01T10:20:30.1234567890Z',
      '1709287230',
    ]) {
      rejects(() => list({ 'filter[inserted_at][gte]': bad }), 'filter[inserted_at][gte]', /ISO 8601/);
    }
  });

  it('checks uuids and lowercases them', () => {
    assert.equal(filterValue({ 'filter[owner_id]': UUID_A.toUpperCase() }), UUID_A);
    for (const bad of ['', 'x', UUID_A.replaceAll('-', ''), `{${UUID_A}}`, `${UUID_A}0`, UUID_A.replace('0', 'g')]) {
      rejects(() => list({ 'filter[owner_id]': bad }), 'filter[owner_id]', /UUID/);
    }
  });

  it('checks enums against their values', () => {
    assert.equal(filterValue({ 'filter[status]': 'active' }), 'active');
    rejects(() => list({ 'filter[status]': 'Active' }), 'filter[status]', /one of: draft, active, archived/);
  });

  it('splits `in` into 1..100 coerced values', () => {
    assert.deepEqual(filterValue({ 'filter[n][in]': '1,2,3' }), [1, 2, 3]);
    assert.deepEqual(filterValue({ 'filter[status][in]': 'draft' }), ['draft']);
    assert.deepEqual(filterValue({ 'filter[owner_id][in]': `${UUID_A},${UUID_B.toUpperCase()}` }), [UUID_A, UUID_B]);
    assert.equal((filterValue({ 'filter[n][in]': Array.from({ length: 100 }, (_, i) => i).join(',') }) as number[]).length, 100);
    rejects(() => list({ 'filter[n][in]': Array.from({ length: 101 }, (_, i) => i).join(',') }), 'filter[n][in]', /At most 100/);
    rejects(() => list({ 'filter[n][in]': '1,x' }), 'filter[n][in]', /whole number/);
    rejects(() => list({ 'filter[n][in]': '' }), 'filter[n][in]', /whole number/);
  });

  it('allows is_null on nullable attributes only, with true/false', () => {
    assert.equal(filterValue({ 'filter[n][is_null]': 'true' }), true);
    assert.equal(filterValue({ 'filter[label][is_null]': 'false' }), false);
    assert.equal(filterValue({ 'filter[tags][is_null]': 'true' }), true);
    rejects(() => list({ 'filter[name][is_null]': 'true' }), 'filter[name][is_null]', /does not apply/);
    rejects(() => list({ 'filter[n][is_null]': 'yes' }), 'filter[n][is_null]', /true or false/);
  });

  it('allows contains on strings and string arrays only', () => {
    assert.equal(filterValue({ 'filter[name][contains]': '50%_off' }), '50%_off');
    assert.equal(filterValue({ 'filter[tags][contains]': 'red' }), 'red');
    assert.equal(filterValue({ 'filter[notes][contains]': 'anything goes' }), 'anything goes');
    rejects(() => list({ 'filter[tags][contains]': 'purple' }), 'filter[tags][contains]', /one of: red, green, blue/);
    for (const attr of ['n', 'flag', 'status', 'owner_id', 'inserted_at']) {
      rejects(() => list({ [`filter[${attr}][contains]`]: 'a' }), `filter[${attr}][contains]`, /does not apply/);
    }
  });

  it('allows only contains (and is_null) on string arrays', () => {
    for (const op of ['eq', 'ne', 'in', 'gt']) {
      rejects(() => list({ [`filter[tags][${op}]`]: 'red' }), `filter[tags][${op}]`, /does not apply/);
    }
    rejects(() => list({ 'filter[tags]': 'red' }), 'filter[tags]', /does not apply/);
  });

  it('allows ranges on integers, datetimes and strings only', () => {
    for (const op of ['gt', 'gte', 'lt', 'lte']) {
      assert.equal(filterOf({ [`filter[n][${op}]`]: '1' }).op, op);
      assert.equal(filterOf({ [`filter[name][${op}]`]: 'm' }).op, op);
      assert.ok(filterValue({ [`filter[inserted_at][${op}]`]: '2024-01-01' }) instanceof Date);
      rejects(() => list({ [`filter[flag][${op}]`]: 'true' }), `filter[flag][${op}]`, /does not apply/);
      rejects(() => list({ [`filter[status][${op}]`]: 'draft' }), `filter[status][${op}]`, /does not apply/);
      rejects(() => list({ [`filter[owner_id][${op}]`]: UUID_A }), `filter[owner_id][${op}]`, /does not apply/);
    }
  });

  it('caps filter values at 1024 characters, each `in` value included', () => {
    assert.equal(filterValue({ 'filter[name]': 'x'.repeat(1024) }), 'x'.repeat(1024));
    rejects(() => list({ 'filter[name]': 'x'.repeat(1025) }), 'filter[name]', /1024/);
    rejects(() => list({ 'filter[name][in]': `a,${'x'.repeat(1025)}` }), 'filter[name][in]', /1024/);
  });
});

describe('parseQuery: sort', () => {
  it('reads keys and directions', () => {
    assert.deepEqual(list({ sort: 'label,-inserted_at' }).sort, [
      { attr: 'label', column: 'label_text', kind: 'string', desc: false },
      { attr: 'inserted_at', column: 'inserted_at', kind: 'datetime', desc: true },
    ]);
  });

  it('rejects unknown and unsortable attributes', () => {
    for (const value of ['nope', 'owner_id', 'meta', 'tags', 'score', '', '-', '--name', '+name', 'name,', 'constructor', '-__proto__']) {
      rejects(() => list({ sort: value }), 'sort', /Cannot sort/);
    }
  });

  it('rejects duplicates in either direction', () => {
    rejects(() => list({ sort: 'name,-name' }), 'sort', /more than once/);
    rejects(() => list({ sort: 'n,n' }), 'sort', /more than once/);
  });

  it('allows at most 5 keys', () => {
    assert.equal(list({ sort: 'name,label,n,flag,status' }).sort.length, 5);
    rejects(() => list({ sort: 'name,label,n,flag,status,inserted_at' }), 'sort', /At most 5/);
  });
});

describe('parseQuery: page', () => {
  it('reads limit and offset within bounds', () => {
    assert.deepEqual(list({ 'page[limit]': '1' }).page, { kind: 'keyset', limit: 1 });
    assert.deepEqual(list({ 'page[limit]': '250', 'page[offset]': '0' }).page, { kind: 'offset', limit: 250, offset: 0 });
    assert.deepEqual(list({ 'page[offset]': '1000000' }).page, { kind: 'offset', limit: 50, offset: 1000000 });
    for (const bad of ['0', '251', '-1', '1.5', 'abc', '', ' 5', '1e2']) rejects(() => list({ 'page[limit]': bad }), 'page[limit]', /1 to 250/);
    for (const bad of ['-1', '1000001', '1.0', 'x', '']) rejects(() => list({ 'page[offset]': bad }), 'page[offset]', /0 to 1000000/);
  });

  it('reads page[count]', () => {
    assert.equal(list({ 'page[count]': 'true' }).count, true);
    assert.equal(list({ 'page[count]': 'false' }).count, false);
    rejects(() => list({ 'page[count]': '1' }), 'page[count]', /true or false/);
  });

  it('rejects unknown page members', () => {
    rejects(() => list({ 'page[size]': '5' }), 'page[size]', /Unknown page parameter/);
    rejects(() => list({ 'page[number]': '5' }), 'page[number]', /Unknown page parameter/);
    rejects(() => list({ 'page[limit][x]': '5' }), 'page[limit][x]', /Unknown page parameter/);
  });

  it('refuses to mix offset and keyset, or after and before', () => {
    const cursor = encodeCursor(list({}).sort, { inserted_at: new Date(), id: UUID_A });
    rejects(() => list({ 'page[offset]': '5', 'page[after]': cursor }), 'page[offset]', /cannot be combined/);
    rejects(() => list({ 'page[offset]': '5', 'page[before]': cursor }), 'page[offset]', /cannot be combined/);
    rejects(() => list({ 'page[after]': cursor, 'page[before]': cursor }), 'page[before]', /cannot be combined/);
  });
});

describe('cursors', () => {
  const at = new Date('2024-05-06T07:08:09.010Z');

  it('round-trip through encodeCursor and page[after]/page[before]', () => {
    const raw = { sort: 'name,-n,flag,status,-inserted_at' };
    const sort = list(raw).sort;
    const row = { id: UUID_A.toUpperCase(), name: 'Zoë, "quoted"', n: 3, flag: false, status: 'draft', inserted_at: at };
    const cursor = encodeCursor(sort, row);
    assert.match(cursor, /^[A-Za-z0-9_-]+$/);
    const expected = { values: ['Zoë, "quoted"', 3, false, 'draft', at], id: UUID_A };
    assert.deepEqual(list({ ...raw, 'page[after]': cursor }).page, { kind: 'keyset', limit: 50, after: expected });
    assert.deepEqual(list({ ...raw, 'page[before]': cursor, 'page[limit]': '3' }).page, { kind: 'keyset', limit: 3, before: expected });
  });

  it('carry NULLs for nullable keys', () => {
    const sort = list({ sort: 'n,label' }).sort;
    const cursor = encodeCursor(sort, { id: UUID_A, n: null, label_text: undefined });
    const page = list({ sort: 'n,label', 'page[after]': cursor }).page;
    assert.deepEqual(page, { kind: 'keyset', limit: 50, after: { values: [null, null], id: UUID_A } });
  });

  it('turn int8 strings into numbers', () => {
    const sort = list({ sort: 'n' }).sort;
    const page = list({ sort: 'n', 'page[after]': encodeCursor(sort, { id: UUID_A, n: '12' }) }).page;
    assert.deepEqual(page.kind === 'keyset' && page.after?.values, [12]);
  });

  it('are refused when they do not fit the current sort', () => {
    const byName = encodeCursor(list({ sort: 'name' }).sort, { id: UUID_A, name: 'a' });
    rejects(() => list({ 'page[after]': byName }), 'page[after]', /Invalid cursor/);
    rejects(() => list({ sort: 'n', 'page[after]': byName }), 'page[after]', /Invalid cursor/);
    rejects(() => list({ sort: 'name,n', 'page[before]': byName }), 'page[before]', /Invalid cursor/);
    const nullName = encodeCursor(list({ sort: 'name' }).sort, { id: UUID_A, name: null });
    rejects(() => list({ sort: 'name', 'page[after]': nullName }), 'page[after]', /Invalid cursor/);
  });

  it('are refused when malformed', () => {
    const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
    const good = { v: ['2024-05-06T07:08:09.010Z'], id: UUID_A };
    assert.doesNotThrow(() => list({ 'page[after]': b64(good) }));
    for (const bad of [
      '',
      'not base64!',
      '====',
      b64('not json'),
      b64('null'),
      b64([1]),
      b64({ v: [] }),
      b64({ ...good, id: 'abc' }),
      b64({ ...good, id: 5 }),
      b64({ ...good, v: ['2024-02-30T00:00:00Z'] }),
      b64({ ...good, v: [1714979289010] }),
      b64({ ...good, v: 'x' }),
      b64({ v: ['2024-05-06T07:08:09.010Z', 'extra'], id: UUID_A }),
    ]) {
      rejects(() => list({ 'page[after]': bad }), 'page[after]', /Invalid cursor/);
    }
    const kinds = list({ sort: 'n,flag,status' }).sort;
    for (const v of [
      ['1', true, 'draft'],
      [1.5, true, 'draft'],
      [1, 'true', 'draft'],
      [1, true, 7],
      [1, true, 'a\0'],
    ]) {
      rejects(() => list({ sort: 'n,flag,status', 'page[after]': b64({ v, id: UUID_A }) }), 'page[after]', /Invalid cursor/);
    }
    assert.doesNotThrow(() => list({ sort: 'n,flag,status', 'page[after]': encodeCursor(kinds, { id: UUID_A, n: 1, flag: true, status: 'draft' }) }));
  });
});

describe('parseQueryDateTime', () => {
  it('agrees with Date for every toISOString output of years 1..9999', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }), (d) => {
        assert.equal(parseQueryDateTime(d.toISOString())?.getTime(), d.getTime());
      }),
      { numRuns: runs(500) },
    );
  });
});

describe('parseQuery: hostile input', () => {
  const attrs = [...Object.keys(item.attributes), 'nope', '__proto__', 'constructor', ''];
  const ops = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'is_null', 'contains', 'xx', ''];
  const keyArb = fc.oneof(
    fc.string({ maxLength: 30 }),
    fc.constantFrom(
      'include',
      'sort',
      'page[limit]',
      'page[offset]',
      'page[after]',
      'page[before]',
      'page[count]',
      'page[x]',
      'fields[item]',
      'fields[user]',
      'fields[nope]',
    ),
    fc.tuple(fc.constantFrom(...attrs), fc.option(fc.constantFrom(...ops))).map(([a, op]) => (op === null ? `filter[${a}]` : `filter[${a}][${op}]`)),
    fc.tuple(fc.constantFrom('filter', 'page', 'fields'), fc.string({ maxLength: 10 })).map(([f, s]) => `${f}[${s}]`),
  );
  const cursorArb = fc.oneof(
    fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')),
    fc
      .record({ v: fc.array(fc.jsonValue(), { maxLength: 6 }), id: fc.oneof(fc.uuid(), fc.string()) })
      .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
  );
  const valueArb = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constantFrom('true', 'false', '1', '-1', '250', '0', 'owner', 'owner.memberships', 'name,-n', 'a,b', '2024-01-01', UUID_A, 'draft', 'red', ''),
    fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
    fc.constant(undefined),
    cursorArb,
    fc.nat({ max: 6000 }).map((n) => 'a,'.repeat(n)),
  );

  it('never throws anything but invalid_query naming a parameter that was sent', () => {
    fc.assert(
      fc.property(fc.dictionary(keyArb, valueArb, { maxKeys: 6 }), fc.boolean(), (raw, isList) => {
        try {
          const q = parseQuery(raw as RawQuery, item, { registry, list: isList });
          assert.ok(q.sort.length >= 1 && q.page.limit >= 1 && q.page.limit <= 250);
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          assert.equal(err.code, 'invalid_query');
          assert.ok(err.source?.parameter !== undefined && Object.hasOwn(raw, err.source.parameter), `unknown parameter ${err.source?.parameter}`);
        }
      }),
      { numRuns: runs(2000) },
    );
  });

  it('answers huge and pathological input without running away', () => {
    const started = performance.now();
    const huge = 'a'.repeat(1_000_000);
    rejects(() => list({ sort: huge }), 'sort');
    rejects(() => list({ [`filter[${huge}]`]: 'x' }), `filter[${huge}]`);
    rejects(() => list({ include: `${'owner.'.repeat(680)}x` }), 'include');
    rejects(() => list({ '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[': 'x' }), '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[');
    rejects(() => list({ [`filter[${'['.repeat(4000)}`]: 'x' }), `filter[${'['.repeat(4000)}`);
    rejects(() => list({ 'page[after]': Buffer.from('['.repeat(3000)).toString('base64url').slice(0, 4096) }), 'page[after]');
    assert.equal(list({ 'filter[n][in]': Array.from({ length: 100 }, () => '1').join(',') }).filter.length, 1);
    assert.ok(performance.now() - started < RUNAWAY_MS);
  });
});
