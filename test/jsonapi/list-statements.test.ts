/**
 * A list's statement compiled once per shape (read.sql.ts listStatementOnce) is the
 * statement the route would build for that request: same text, same parameters in the same
 * places, for every shape, whatever shapes were compiled before it; lists with filters,
 * a sparse fieldset of their type or a cursor are built per request. Through the route,
 * pages of different limits, offsets and sorts, and callers of different workspaces, read
 * their own rows.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { withAccountStatement } from '../../src/auth/auth.sql.ts';
import { claimedPrincipal } from '../../src/auth/principal.ts';
import { slot } from '../../src/db/compiled.ts';
import {
  listQuery,
  listShape,
  listSlotValues,
  listStatementOnce,
  MAX_LIST_SHAPES,
  SLOT_PRINCIPAL,
  type ListStatements,
} from '../../src/http/jsonapi/read.sql.ts';
import type { ParsedQuery } from '../../src/http/jsonapi/types.ts';
import type { ResourceType } from '../../src/resources/resource.ts';
import { apiSpecType } from '../../src/resources/api_specs/resource.ts';
import { credentialType } from '../../src/resources/credentials/resource.ts';
import { dataModelType } from '../../src/resources/data_models/resource.ts';
import { organizationType } from '../../src/resources/organizations/resource.ts';
import { userType } from '../../src/resources/users/resource.ts';
import { workspaceType } from '../../src/resources/workspaces/resource.ts';
import { jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startApp();
});
after(() => t.close());

type Sort = ParsedQuery['sort'];
const sortBy = (...keys: string[]): Sort =>
  keys.map((k) => ({ attr: k.replace(/^-/, ''), column: k.replace(/^-/, ''), desc: k.startsWith('-'), kind: 'string' as const }));

function query(page: ParsedQuery['page'], sort: Sort, extra: Partial<ParsedQuery> = {}): ParsedQuery {
  return { include: [], fields: new Map(), filter: [], sort, page, count: false, ...extra };
}

/** What the route runs per request for `q`, beside what the compiled statement binds. */
function compare(statements: ListStatements, type: ResourceType, q: ParsedQuery, budget: number | undefined): boolean {
  const once = listStatementOnce(statements, t.deps.db, type, SLOT_PRINCIPAL, q, budget, (rows) =>
    withAccountStatement(t.deps.db, slot('accountId'), { rows }),
  );
  const claims = { sub: 'cred-1', org: 'org-2', ws: 'ws-3' } as Parameters<typeof claimedPrincipal>[0];
  const direct = withAccountStatement(t.deps.db, 'acct-0', { rows: listQuery(t.deps.db, type, claimedPrincipal(claims), q, budget) }).compile();
  if (once === undefined) return false;
  assert.equal(once.sql, direct.sql, JSON.stringify(q.page));
  assert.deepEqual(
    once.bind({ accountId: 'acct-0', credentialId: 'cred-1', organizationId: 'org-2', workspaceId: 'ws-3', ...listSlotValues(q) }),
    direct.parameters,
    JSON.stringify(q.page),
  );
  return true;
}

test('every shape binds to the statement built per request, whatever was compiled before', () => {
  for (const type of [dataModelType, apiSpecType, userType, credentialType, workspaceType, organizationType]) {
    for (const budget of [undefined, 4096]) {
      const statements: ListStatements = new Map();
      const sorts = [sortBy('-inserted_at'), sortBy('inserted_at'), sortBy('-updated_at', 'inserted_at'), sortBy('id')];
      // Twice over, in different orders: the second pass reads the statements of the first.
      for (const pass of [0, 1])
        for (const sort of pass === 0 ? sorts : [...sorts].reverse())
          for (const page of [
            { kind: 'offset' as const, limit: 7, offset: 3 },
            { kind: 'offset' as const, limit: 50, offset: 0 },
            { kind: 'keyset' as const, limit: 7 },
            { kind: 'keyset' as const, limit: 1 },
          ])
            assert.ok(compare(statements, type, query(page, sort), budget), `${type.type} compiled`);
      assert.equal(statements.size, 8, `${type.type}: one statement per page kind and sort`);
    }
  }
});

test('lists with filters, their own sparse fieldset or a cursor are built per request', () => {
  const statements: ListStatements = new Map();
  const sort = sortBy('-inserted_at');
  const cursor = { values: [new Date(0)], id: '00000000-0000-4000-8000-000000000000' };
  const filtered = query({ kind: 'offset', limit: 5, offset: 0 }, sort, {
    filter: [{ column: 'slug', op: 'eq', value: 'x', kind: 'string' } as ParsedQuery['filter'][number]],
  });
  const sparse = query({ kind: 'offset', limit: 5, offset: 0 }, sort, { fields: new Map([['data_model', new Set(['slug'])]]) });
  for (const q of [filtered, sparse, query({ kind: 'keyset', limit: 5, after: cursor }, sort), query({ kind: 'keyset', limit: 5, before: cursor }, sort)]) {
    assert.equal(listShape(dataModelType, q), undefined);
    assert.equal(compare(statements, dataModelType, q, undefined), false);
  }
  assert.equal(statements.size, 0);
  // Another type's sparse fieldset (for included resources) leaves the list's text alone.
  const otherFields = query({ kind: 'offset', limit: 5, offset: 2 }, sort, { fields: new Map([['data_model_field', new Set(['name'])]]) });
  assert.ok(compare(statements, dataModelType, otherFields, undefined));
});

test('at most MAX_LIST_SHAPES shapes a type; past that, built per request', () => {
  const statements: ListStatements = new Map();
  const columns = ['name', 'slug', 'retention_days', 'inserted_at', 'updated_at'];
  let compiled = 0;
  let n = 0;
  for (const a of columns)
    for (const b of columns)
      if (a !== b)
        for (const desc of ['', '-']) {
          n++;
          if (compare(statements, dataModelType, query({ kind: 'offset', limit: 9, offset: n }, sortBy(`${desc}${a}`, b)), undefined)) compiled++;
        }
  assert.equal(compiled, MAX_LIST_SHAPES);
  assert.equal(statements.size, MAX_LIST_SHAPES);
});

test('through the route: limits, offsets and sorts page the caller workspace rows', async () => {
  const mine = await seedTenant(t.deps);
  const other = await seedTenant(t.deps);
  const api = jsonApi(t, await tokenFor(t, mine));
  const theirs = jsonApi(t, await tokenFor(t, other));
  const slugs = ['m-a', 'm-b', 'm-c', 'm-d', 'm-e'];
  for (const slug of slugs)
    assert.equal((await api.post('/api/json/v1/data_models', { data: { type: 'data_model', attributes: { name: slug, slug } } })).status, 201);
  assert.equal((await theirs.post('/api/json/v1/data_models', { data: { type: 'data_model', attributes: { name: 'o', slug: 'o-a' } } })).status, 201);
  const read = async (client: typeof api, q: string) => {
    const res = await client.get(`/api/json/v1/data_models?${q}`);
    assert.equal(res.status, 200, res.text);
    return res.body.data.map((r: { attributes: { slug: string } }) => r.attributes.slug);
  };
  for (let round = 0; round < 2; round++) {
    assert.deepEqual(await read(api, 'sort=slug&page[limit]=2&page[offset]=1'), ['m-b', 'm-c']);
    assert.deepEqual(await read(api, 'sort=slug&page[limit]=3&page[offset]=2'), ['m-c', 'm-d', 'm-e']);
    assert.deepEqual(await read(api, 'sort=-slug&page[limit]=2&page[offset]=0'), ['m-e', 'm-d']);
    assert.deepEqual(await read(api, 'sort=slug&page[limit]=2'), ['m-a', 'm-b']);
    assert.deepEqual(await read(api, 'sort=-slug&page[limit]=4'), ['m-e', 'm-d', 'm-c', 'm-b']);
    assert.deepEqual(await read(theirs, 'sort=slug&page[limit]=2&page[offset]=0'), ['o-a']);
    assert.deepEqual(await read(theirs, 'sort=-slug&page[limit]=4'), ['o-a']);
    assert.deepEqual(await read(api, 'sort=slug&page[limit]=2&page[offset]=0&filter[slug]=m-d'), ['m-d']);
  }
});
