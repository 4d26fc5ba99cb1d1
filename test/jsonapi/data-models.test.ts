/** Data models over JSON:API: auth openers, create/read/update, validation and the list query language. */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as admin from '../../src/admin/service.ts';
import {
  dataModelDoc,
  JSONAPI,
  jsonApi,
  seedAccount,
  seedTenant,
  tokenFor,
  type ApiResponse,
  type Tenant,
  assertJsonApiError,
  appWithTenant,
} from '../helpers/app.ts';

const P = '/api/json/v1';
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

type Api = ReturnType<typeof jsonApi>;

const { t, tenant, api } = await appWithTenant();

const assertError = assertJsonApiError;

const ids = (res: ApiResponse): string[] => res.body.data.map((r: { id: string }) => r.id);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A tenant of its own, so lists hold exactly what a test put there. */
async function freshApi(): Promise<{ tenant: Tenant; api: Api }> {
  const tn = await seedTenant(t.deps);
  return { tenant: tn, api: jsonApi(t, await tokenFor(t, tn)) };
}

async function create(a: Api, attrs: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await a.post(`${P}/data_models`, dataModelDoc(attrs));
  assert.equal(res.status, 201, res.text);
  return res.body.data;
}

describe('auth openers', () => {
  test('401 without a token, on every verb', async () => {
    const anon = jsonApi(t, undefined);
    const dm = await create(api, { name: 'Auth', slug: 'auth-401' });
    for (const res of [
      await anon.get(`${P}/data_models`),
      await anon.get(`${P}/data_models/${dm.id}`),
      await anon.post(`${P}/data_models`, dataModelDoc({ name: 'X', slug: 'x-401' })),
      await anon.patch(`${P}/data_models/${dm.id}`, { data: { type: 'data_model', id: dm.id, attributes: { name: 'Y' } } }),
    ]) {
      assertError(res, 401, 'unauthorized');
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
    }
    const bad = await jsonApi(t, 'tbat_garbage.sig').get(`${P}/data_models`);
    assertError(bad, 401, 'unauthorized');
    assert.equal(bad.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
    assert.equal((await api.get(`${P}/data_models/${dm.id}`)).body.data.attributes.name, 'Auth');
  });

  test('403 without api_write for POST and PATCH, without api_read for GET', async () => {
    const dm = await create(api, { name: 'Scopes', slug: 'scopes-403' });
    const readOnly = jsonApi(t, await tokenFor(t, tenant, 'api_read'));
    assertError(await readOnly.post(`${P}/data_models`, dataModelDoc({ name: 'X', slug: 'x-403' })), 403, 'forbidden');
    assertError(await readOnly.patch(`${P}/data_models/${dm.id}`, { data: { type: 'data_model', id: dm.id, attributes: { name: 'Nope' } } }), 403, 'forbidden');
    assert.equal((await readOnly.get(`${P}/data_models/${dm.id}`)).status, 200);

    const writeOnly = jsonApi(t, await tokenFor(t, tenant, 'api_write'));
    assertError(await writeOnly.get(`${P}/data_models`), 403, 'forbidden');
    assertError(await writeOnly.get(`${P}/data_models/${dm.id}`), 403, 'forbidden');
    const created = await writeOnly.post(`${P}/data_models`, dataModelDoc({ name: 'W', slug: 'write-only' }));
    assert.equal(created.status, 201, created.text);

    assert.equal((await api.get(`${P}/data_models?filter[slug]=x-403`)).body.data.length, 0);
    assert.equal((await api.get(`${P}/data_models/${dm.id}`)).body.data.attributes.name, 'Scopes');
  });

  test("another tenant's data model is 404 for GET and PATCH, and its slug is free here", async () => {
    const other = await freshApi();
    const theirs = await create(other.api, { name: 'Theirs', slug: 'theirs' });
    const get = await api.get(`${P}/data_models/${theirs.id}`);
    assertError(get, 404, 'not_found');
    const random = await api.get(`${P}/data_models/${randomUUID()}`);
    assert.equal(get.body.errors[0].detail, random.body.errors[0].detail);
    assertError(
      await api.patch(`${P}/data_models/${theirs.id}`, { data: { type: 'data_model', id: theirs.id, attributes: { name: 'Mine' } } }),
      404,
      'not_found',
    );
    assert.equal((await other.api.get(`${P}/data_models/${theirs.id}`)).body.data.attributes.name, 'Theirs');
    // Slugs are unique per organization, not globally.
    await create(api, { name: 'Mine', slug: 'theirs' });
  });
});

describe('create, read, update', () => {
  test('create answers 201 with Location, the attributes as sent plus defaults, and a UUIDv7 id', async () => {
    const before = Date.now();
    const res = await api.post(`${P}/data_models`, dataModelDoc({ name: 'Customers', slug: 'customers' }));
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('content-type'), JSONAPI);
    const data = res.body.data;
    assert.match(data.id, UUID_V7);
    const ms = parseInt(data.id.replace(/-/g, '').slice(0, 12), 16);
    assert.ok(ms >= before - 1000 && ms <= Date.now() + 1000, 'the id carries the creation time');
    assert.equal(res.headers.get('location'), `${P}/data_models/${data.id}`);
    assert.equal(data.type, 'data_model');
    const { inserted_at, updated_at, ...rest } = data.attributes;
    assert.deepEqual(rest, { name: 'Customers', slug: 'customers', description: null, organization_id: tenant.organizationId, retention_days: null });
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assert.ok(Math.abs(Date.parse(inserted_at) - Date.now()) < 60_000);
    assert.equal(data.links.self, `${P}/data_models/${data.id}`);
    assert.deepEqual(data.relationships, { fields: { meta: { included: false } } });

    const full = await api.post(
      `${P}/data_models`,
      dataModelDoc({ name: 'Orders', slug: 'orders', description: 'All orders', organization_id: tenant.organizationId, retention_days: 30 }),
    );
    assert.equal(full.status, 201, full.text);
    const { inserted_at: _i, updated_at: _u, ...attrs } = full.body.data.attributes;
    assert.deepEqual(attrs, { name: 'Orders', slug: 'orders', description: 'All orders', organization_id: tenant.organizationId, retention_days: 30 });

    // Location resolves to the same resource.
    const got = await api.get(res.headers.get('location')!);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body.data, data);
    assert.deepEqual(got.body.links, { self: `${P}/data_models/${data.id}` });
  });

  test('list shows created models; PATCH answers 200 and moves updated_at', async () => {
    const { api: a } = await freshApi();
    const one = await create(a, { name: 'One', slug: 'one' });
    const two = await create(a, { name: 'Two', slug: 'two', retention_days: 7 });
    const list = await a.get(`${P}/data_models`);
    assert.equal(list.status, 200);
    assert.deepEqual(new Set(ids(list)), new Set([one.id, two.id]));
    assert.deepEqual(
      list.body.data.find((r: { id: string }) => r.id === two.id),
      two,
    );

    await sleep(20);
    const res = await a.patch(`${P}/data_models/${one.id}`, {
      data: { type: 'data_model', id: one.id, attributes: { name: 'Uno', description: 'first', retention_days: 90 } },
    });
    assert.equal(res.status, 200, res.text);
    const attrs = res.body.data.attributes;
    assert.equal(attrs.name, 'Uno');
    assert.equal(attrs.slug, 'one');
    assert.equal(attrs.description, 'first');
    assert.equal(attrs.retention_days, 90);
    assert.equal(attrs.inserted_at, one.attributes.inserted_at);
    assert.match(attrs.updated_at, ISO_Z);
    assert.ok(Date.parse(attrs.updated_at) > Date.parse(one.attributes.updated_at), `${attrs.updated_at} after ${one.attributes.updated_at}`);
    assert.deepEqual((await a.get(`${P}/data_models/${one.id}`)).body.data, res.body.data);

    const cleared = await a.patch(`${P}/data_models/${one.id}`, {
      data: { type: 'data_model', id: one.id, attributes: { retention_days: null, description: null } },
    });
    assert.equal(cleared.status, 200, cleared.text);
    assert.equal(cleared.body.data.attributes.retention_days, null);
    assert.equal(cleared.body.data.attributes.description, null);
    assert.equal(cleared.body.data.attributes.name, 'Uno');

    assertError(await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: two.id, attributes: { name: 'x' } } }), 409, 'conflict', {
      pointer: '/data/id',
    });
    assertError(await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', attributes: { name: 'x' } } }), 409, 'conflict', {
      pointer: '/data/id',
    });
    // UUIDs compare case-insensitively: an uppercase id in the URL and the body names the same model.
    const upper = one.id.toUpperCase();
    const byUpper = await a.patch(`${P}/data_models/${upper}`, { data: { type: 'data_model', id: upper, attributes: { name: 'Uno!' } } });
    assert.equal(byUpper.status, 200, byUpper.text);
    assert.equal(byUpper.body.data.id, one.id);
    assert.equal(byUpper.body.data.attributes.name, 'Uno!');
    const mixed = await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: upper, attributes: { name: 'Uno' } } });
    assert.equal(mixed.status, 200, mixed.text);
    assertError(
      await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: one.id, attributes: { slug: 'two' } } }),
      422,
      'invalid_request',
      { pointer: '/data/attributes/slug' },
    );
    assertError(
      await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: one.id, attributes: { organization_id: randomUUID() } } }),
      422,
      'invalid_request',
      { pointer: '/data/attributes/organization_id' },
    );
    assertError(await a.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: one.id, attributes: { name: '' } } }), 422, 'invalid_request', {
      pointer: '/data/attributes/name',
    });
  });

  test('create input: data.type, unknown and read-only attributes, required members', async () => {
    assertError(await api.post(`${P}/data_models`, { data: { type: 'data_model_field', attributes: { name: 'X', slug: 'type-x' } } }), 409, 'type_mismatch', {
      pointer: '/data/type',
    });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'X', slug: 'x-ws', workspace_id: tenant.workspaceId })), 422, 'invalid_request', {
      pointer: '/data/attributes/workspace_id',
    });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'X', slug: 'x-ins', inserted_at: '2020-01-01T00:00:00Z' })), 422, 'invalid_request', {
      pointer: '/data/attributes/inserted_at',
    });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ slug: 'no-name' })), 422, 'invalid_request', { pointer: '/data/attributes/name' });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'No slug' })), 422, 'invalid_request', { pointer: '/data/attributes/slug' });
    assertError(
      await api.post(`${P}/data_models`, { data: { type: 'data_model', id: randomUUID(), attributes: { name: 'X', slug: 'x-id' } } }),
      403,
      'forbidden',
      { pointer: '/data/id' },
    );
    assert.equal((await api.get(`${P}/data_models?filter[slug][in]=type-x,x-ws,x-ins,no-name,x-id`)).body.data.length, 0);
  });
});

describe('validation', () => {
  test('slug rules: 422 at /data/attributes/slug', async () => {
    for (const slug of ['Upper', 'UPPER', 'with space', ' lead', 'trail ', 'under_score', 'dot.ted', 'a'.repeat(64), '', 'ünï', 7, null]) {
      const res = await api.post(`${P}/data_models`, dataModelDoc({ name: 'Bad slug', slug }));
      assertError(res, 422, 'invalid_request', { pointer: '/data/attributes/slug' });
    }
    for (const slug of ['a'.repeat(63), 'x', '0-9-a', 'with-hyphen']) {
      const dm = await create(api, { name: 'Good slug', slug });
      assert.equal(dm.attributes.slug, slug);
    }
  });

  test('a duplicate slug in the organization is 422 at /data/attributes/slug, also from a second workspace', async () => {
    await create(api, { name: 'Dup', slug: 'dup' });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'Dup again', slug: 'dup' })), 422, 'invalid_request', {
      pointer: '/data/attributes/slug',
    });

    const ws = await admin.createWorkspace(t.deps.db, { organization_id: tenant.organizationId, name: 'Second' });
    const second = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, { ...tenant, workspaceId: ws.id })));
    const res = await second.post(`${P}/data_models`, dataModelDoc({ name: 'Dup elsewhere', slug: 'dup' }));
    assertError(res, 422, 'invalid_request', { pointer: '/data/attributes/slug' });
    // The message does not reveal which workspace holds the slug.
    assert.ok(!res.text.includes(tenant.workspaceId));
    assert.equal((await second.get(`${P}/data_models`)).body.data.length, 0);
    await create(second, { name: 'Own', slug: 'dup-2' });
    assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'Dup 2', slug: 'dup-2' })), 422, 'invalid_request', {
      pointer: '/data/attributes/slug',
    });
    assert.equal((await api.get(`${P}/data_models?filter[slug]=dup`)).body.data.length, 1);
  });

  test('retention_days: positive whole numbers or null', async () => {
    for (const retention_days of [0, -1, 1.5, '7', true, {}]) {
      assertError(await api.post(`${P}/data_models`, dataModelDoc({ name: 'Retention', slug: 'retention-bad', retention_days })), 422, 'invalid_request', {
        pointer: '/data/attributes/retention_days',
      });
    }
    assert.equal((await api.get(`${P}/data_models?filter[slug]=retention-bad`)).body.data.length, 0);
    const none = await create(api, { name: 'Keep all', slug: 'retention-null', retention_days: null });
    assert.equal(none.attributes.retention_days, null);
    const one = await create(api, { name: 'One day', slug: 'retention-one', retention_days: 1 });
    assert.equal(one.attributes.retention_days, 1);
    assertError(
      await api.patch(`${P}/data_models/${one.id}`, { data: { type: 'data_model', id: one.id, attributes: { retention_days: 0 } } }),
      422,
      'invalid_request',
      { pointer: '/data/attributes/retention_days' },
    );
  });

  test('a run-as member (role member) can create and update data models', async () => {
    const member = await seedAccount(t.deps, tenant, { role: 'member' });
    const m = jsonApi(t, await tokenFor(t, member));
    const dm = await create(m, { name: 'By member', slug: 'by-member' });
    const res = await m.patch(`${P}/data_models/${dm.id}`, { data: { type: 'data_model', id: dm.id, attributes: { name: 'By member, renamed' } } });
    assert.equal(res.status, 200, res.text);
    assert.equal((await api.get(`${P}/data_models/${dm.id}`)).body.data.attributes.name, 'By member, renamed');
    const admins = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, tenant, { role: 'admin' })));
    await create(admins, { name: 'By admin', slug: 'by-admin' });
  });
});

describe('query language', () => {
  let a: Api;
  let models: Record<string, any>[];

  before(async () => {
    ({ api: a } = await freshApi());
    models = [];
    const specs: [string, string, number | null][] = [
      ['Beta', 'b-1', 30],
      ['Alpha', 'a-1', 7],
      ['Beta', 'b-0', null],
      ['Gamma', 'g-1', 365],
      ['Delta', 'd-1', 1],
      ['Beta', 'b-2', 90],
      ['Epsilon', 'e-1', null],
    ];
    for (const [name, slug, retention_days] of specs) models.push(await create(a, { name, slug, retention_days }));
    const dm = models[0]!;
    for (const name of ['id', 'amount']) {
      const f = await a.post(`${P}/data_model_fields`, { data: { type: 'data_model_field', attributes: { data_model_id: dm.id, name } } });
      assert.equal(f.status, 201, f.text);
    }
  });

  test('fields[data_model]=name limits attributes and drops relationships', async () => {
    const list = await a.get(`${P}/data_models?fields[data_model]=name`);
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.data.length, models.length);
    for (const r of list.body.data) {
      assert.deepEqual(Object.keys(r.attributes), ['name']);
      assert.equal(r.relationships, undefined);
      assert.equal(r.type, 'data_model');
    }
    const one = await a.get(`${P}/data_models/${models[0]!.id}?fields[data_model]=slug,retention_days`);
    assert.deepEqual(one.body.data.attributes, { slug: 'b-1', retention_days: 30 });
    const empty = await a.get(`${P}/data_models/${models[0]!.id}?fields[data_model]=`);
    assert.deepEqual(empty.body.data.attributes, {});
    assertError(await a.get(`${P}/data_models?fields[data_model]=workspace_id`), 400, 'invalid_query', { parameter: 'fields[data_model]' });
    assertError(await a.get(`${P}/data_models?fields[nope]=name`), 400, 'invalid_query', { parameter: 'fields[nope]' });
  });

  test('include=fields gives a compound document with full linkage', async () => {
    const res = await a.get(`${P}/data_models/${models[0]!.id}?include=fields`);
    assert.equal(res.status, 200, res.text);
    const linkage = res.body.data.relationships.fields.data;
    assert.equal(linkage.length, 2);
    const included = res.body.included;
    assert.equal(included.length, 2);
    assert.deepEqual(
      new Set(linkage.map((l: { type: string; id: string }) => `${l.type}:${l.id}`)),
      new Set(included.map((r: { type: string; id: string }) => `${r.type}:${r.id}`)),
    );
    for (const f of included) {
      assert.equal(f.type, 'data_model_field');
      assert.equal(f.attributes.data_model_id, models[0]!.id);
      assert.deepEqual(f.relationships.data_model, { data: { type: 'data_model', id: models[0]!.id } });
    }
    assert.deepEqual(new Set(included.map((f: any) => f.attributes.name)), new Set(['id', 'amount']));

    const list = await a.get(`${P}/data_models?include=fields`);
    assert.equal(list.status, 200);
    for (const r of list.body.data) {
      assert.ok(Array.isArray(r.relationships.fields.data), 'to-many linkage is an array when included');
      assert.equal(r.relationships.fields.data.length, r.id === models[0]!.id ? 2 : 0);
    }
    assert.equal(list.body.included.length, 2);
    // Sparse fieldsets apply to included resources too.
    const sparse = await a.get(`${P}/data_models/${models[0]!.id}?include=fields&fields[data_model_field]=name`);
    for (const f of sparse.body.included) assert.deepEqual(Object.keys(f.attributes), ['name']);
    assertError(await a.get(`${P}/data_models?include=owner`), 400, 'invalid_query', { parameter: 'include' });
  });

  test('filters: equality, gte, in, is_null, contains', async () => {
    const bySlug = await a.get(`${P}/data_models?filter[slug]=g-1`);
    assert.deepEqual(ids(bySlug), [models[3]!.id]);
    assert.deepEqual(ids(await a.get(`${P}/data_models?filter[slug][eq]=g-1`)), [models[3]!.id]);
    const gte = await a.get(`${P}/data_models?filter[retention_days][gte]=30&sort=retention_days`);
    assert.deepEqual(
      gte.body.data.map((r: any) => r.attributes.retention_days),
      [30, 90, 365],
    );
    const lt = await a.get(`${P}/data_models?filter[retention_days][lt]=30&sort=retention_days`);
    assert.deepEqual(
      lt.body.data.map((r: any) => r.attributes.retention_days),
      [1, 7],
    );
    const nulls = await a.get(`${P}/data_models?filter[retention_days][is_null]=true`);
    assert.deepEqual(new Set(ids(nulls)), new Set([models[2]!.id, models[6]!.id]));
    const inSlugs = await a.get(`${P}/data_models?filter[slug][in]=a-1,d-1,zz`);
    assert.deepEqual(new Set(ids(inSlugs)), new Set([models[1]!.id, models[4]!.id]));
    const contains = await a.get(`${P}/data_models?filter[name][contains]=eta`);
    assert.deepEqual(new Set(ids(contains)), new Set([models[0]!.id, models[2]!.id, models[5]!.id]));
    const combined = await a.get(`${P}/data_models?filter[name]=Beta&filter[retention_days][gte]=30`);
    assert.deepEqual(new Set(ids(combined)), new Set([models[0]!.id, models[5]!.id]));
  });

  test('sort=-name,slug', async () => {
    const res = await a.get(`${P}/data_models?sort=-name,slug`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.data.map((r: any) => `${r.attributes.name}/${r.attributes.slug}`),
      ['Gamma/g-1', 'Epsilon/e-1', 'Delta/d-1', 'Beta/b-0', 'Beta/b-1', 'Beta/b-2', 'Alpha/a-1'],
    );
    const def = await a.get(`${P}/data_models`);
    assert.deepEqual(
      ids(def),
      [...models].reverse().map((m) => m.id),
      'default sort is -inserted_at',
    );
    assertError(await a.get(`${P}/data_models?sort=workspace_id`), 400, 'invalid_query', { parameter: 'sort' });
    assertError(await a.get(`${P}/data_models?sort=description`), 400, 'invalid_query', { parameter: 'sort' });
  });

  test('offset pages: links first/prev/next and page[count]', async () => {
    const all = ids(await a.get(`${P}/data_models?sort=slug`));
    const first = await a.get(`${P}/data_models?sort=slug&page[limit]=3&page[offset]=0&page[count]=true`);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(ids(first), all.slice(0, 3));
    assert.equal(first.body.meta.page.total, 7);
    assert.equal(first.body.meta.page.limit, 3);
    assert.equal(first.body.meta.page.offset, 0);
    assert.equal(first.body.links.prev, null);
    const link = (l: string) => new URL(l, t.url);
    const next = link(first.body.links.next);
    assert.equal(next.pathname, `${P}/data_models`);
    assert.equal(next.searchParams.get('page[offset]'), '3');
    assert.equal(next.searchParams.get('page[limit]'), '3');
    assert.equal(next.searchParams.get('sort'), 'slug');
    assert.equal(link(first.body.links.first).searchParams.get('page[offset]'), '0');

    const middle = await a.get(first.body.links.next);
    assert.deepEqual(ids(middle), all.slice(3, 6));
    // self is the page that was asked for.
    assert.equal(link(middle.body.links.self).searchParams.get('page[offset]'), '3');
    assert.equal(link(middle.body.links.self).searchParams.get('page[limit]'), '3');
    assert.deepEqual(ids(await a.get(middle.body.links.self)), ids(middle));
    assert.equal(link(middle.body.links.prev).searchParams.get('page[offset]'), '0');
    assert.equal(link(middle.body.links.next).searchParams.get('page[offset]'), '6');
    assert.equal(middle.body.meta.page.total, 7, 'page[count] is carried by links');
    const last = await a.get(middle.body.links.next);
    assert.deepEqual(ids(last), all.slice(6));
    assert.equal(last.body.links.next, null);
    assert.equal(link(last.body.links.prev).searchParams.get('page[offset]'), '3');
    const back = await a.get(last.body.links.prev);
    assert.deepEqual(ids(back), ids(middle));

    const beyond = await a.get(`${P}/data_models?page[offset]=50`);
    assert.deepEqual(beyond.body.data, []);
    assert.equal(beyond.body.links.next, null);
    const counted = await a.get(`${P}/data_models?filter[name]=Beta&page[count]=true&page[limit]=1`);
    assert.equal(counted.body.meta.page.total, 3);
    assert.equal(counted.body.data.length, 1);
    const uncounted = await a.get(`${P}/data_models`);
    assert.equal(uncounted.body.meta.page.total, undefined);
    assertError(await a.get(`${P}/data_models?page[limit]=0`), 400, 'invalid_query', { parameter: 'page[limit]' });
    assertError(await a.get(`${P}/data_models?page[limit]=251`), 400, 'invalid_query', { parameter: 'page[limit]' });
    assertError(await a.get(`${P}/data_models?page[offset]=-1`), 400, 'invalid_query', { parameter: 'page[offset]' });
    assertError(await a.get(`${P}/data_models?page[size]=1`), 400, 'invalid_query', { parameter: 'page[size]' });
  });

  for (const sort of ['', 'sort=inserted_at', 'sort=-name,slug', 'sort=name', 'sort=retention_days', 'sort=-retention_days']) {
    test(`keyset: page[after] from links.next walks every page exactly once (${sort || 'default sort'})`, async () => {
      const qs = sort ? `${sort}&` : '';
      const expected = ids(await a.get(`${P}/data_models?${qs}page[limit]=250`));
      assert.equal(expected.length, models.length);
      const seen: string[] = [];
      const pages: string[][] = [];
      let next: string | null = `${P}/data_models?${qs}page[limit]=2`;
      let last: ApiResponse | undefined;
      while (next !== null) {
        const res: ApiResponse = await a.get(next);
        assert.equal(res.status, 200, res.text);
        assert.ok(res.body.data.length <= 2);
        if (pages.length > 0) assert.ok(new URL(next, t.url).searchParams.get('page[after]'), 'links.next is a keyset link');
        assert.deepEqual(
          Object.fromEntries(new URL(res.body.links.self, t.url).searchParams),
          Object.fromEntries(new URL(next, t.url).searchParams),
          'links.self is the page asked for',
        );
        pages.push(ids(res));
        seen.push(...ids(res));
        next = res.body.links.next;
        last = res;
        assert.ok(pages.length <= 10, 'the walk terminates');
      }
      assert.deepEqual(seen, expected);
      assert.equal(pages.length, 4);
      // And back again from the last page through links.prev.
      const back: string[][] = [];
      let prev: string | null = last!.body.links.prev;
      while (prev !== null) {
        const res: ApiResponse = await a.get(prev);
        assert.equal(res.status, 200, res.text);
        back.unshift(ids(res));
        prev = res.body.links.prev;
        assert.ok(back.length <= 10, 'the walk terminates');
      }
      assert.deepEqual(back, pages.slice(0, -1));
    });
  }

  test('unknown filters and operators are 400 invalid_query with source.parameter', async () => {
    const cases: [string, string][] = [
      ['filter[nope]=1', 'filter[nope]'],
      ['filter[slug][regex]=x', 'filter[slug][regex]'],
      ['filter[slug][like]=x', 'filter[slug][like]'],
      ['filter[workspace_id]=' + tenant.workspaceId, 'filter[workspace_id]'],
      ['filter[id]=' + randomUUID(), 'filter[id]'],
      ['filter[retention_days]=seven', 'filter[retention_days]'],
      ['filter[retention_days][contains]=7', 'filter[retention_days][contains]'],
      ['filter[slug][is_null]=true', 'filter[slug][is_null]'],
      ['filter[organization_id]=not-a-uuid', 'filter[organization_id]'],
      ['filter[inserted_at][gte]=yesterday', 'filter[inserted_at][gte]'],
      ['nope=1', 'nope'],
    ];
    for (const [qs, parameter] of cases) {
      assertError(await a.get(`${P}/data_models?${qs}`), 400, 'invalid_query', { parameter });
    }
    assertError(await a.get(`${P}/data_models/${models[0]!.id}?filter[slug]=b-1`), 400, 'invalid_query', { parameter: 'filter[slug]' });
    assertError(await a.get(`${P}/data_models?page[offset]=0&page[after]=abc`), 400, 'invalid_query', { parameter: 'page[offset]' });
    assertError(await a.get(`${P}/data_models?page[after]=not*a*cursor`), 400, 'invalid_query', { parameter: 'page[after]' });
  });
});
