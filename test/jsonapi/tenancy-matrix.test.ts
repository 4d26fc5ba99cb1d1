/**
 * Tenancy matrix: for every JSON:API endpoint and verb, another tenant's objects read
 * exactly like objects that do not exist (404, never 403), lists and
 * includes never carry them, and create bodies that name them fail with the same text
 * as made-up ids.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as admin from '../../src/admin/service.ts';
import { uuidv7 } from '../../src/ids.ts';
import { dataModelDoc, JSONAPI, jsonApi, seedAccount, seedTenant, startApp, tokenFor, type ApiResponse, type Tenant, type TestApp } from '../helpers/app.ts';

const P = '/api/json/v1';

type Api = ReturnType<typeof jsonApi>;

interface World {
  tenant: Tenant;
  api: Api;
  dataModelId: string;
  fieldId: string;
  widgetId: string;
}

/** The ids of one tenant's objects, by collection path. */
function idsOf(w: World): Record<string, string> {
  return {
    organizations: w.tenant.organizationId,
    org_memberships: w.tenant.membershipId,
    users: w.tenant.userId,
    credentials: w.tenant.credentialId,
    dashboard_widgets: w.widgetId,
    data_models: w.dataModelId,
    data_model_fields: w.fieldId,
  };
}

const COLLECTIONS = ['organizations', 'org_memberships', 'users', 'credentials', 'dashboard_widgets', 'data_models', 'data_model_fields'] as const;

/** An error document without the per-request `id` member of each error. */
function withoutErrorIds(res: ApiResponse): unknown {
  assert.ok(res.body && Array.isArray(res.body.errors), `expected an error document, got ${res.text}`);
  return {
    ...res.body,
    errors: res.body.errors.map((e: Record<string, unknown>) => {
      const { id, ...rest } = e;
      assert.equal(typeof id, 'string');
      return rest;
    }),
  };
}

function assert404(res: ApiResponse): void {
  assert.equal(res.status, 404, res.text);
  assert.equal(res.headers.get('content-type'), JSONAPI);
  assert.equal(res.body.errors.length, 1);
  assert.equal(res.body.errors[0].code, 'not_found');
  assert.equal(res.body.errors[0].status, '404');
}

let t: TestApp;
let A: World;
let B: World;

async function world(): Promise<World> {
  const tenant = await seedTenant(t.deps);
  const api = jsonApi(t, await tokenFor(t, tenant));
  const dm = await api.post(`${P}/data_models`, dataModelDoc({ name: 'Orders', slug: 'orders' }));
  assert.equal(dm.status, 201, dm.text);
  const field = await api.post(`${P}/data_model_fields`, {
    data: { type: 'data_model_field', attributes: { data_model_id: dm.body.data.id, name: 'order_id', type: 'string', is_primary_key: true } },
  });
  assert.equal(field.status, 201, field.text);
  const widget = await admin.createWidget(t.deps.db, { workspace_id: tenant.workspaceId, data_model_id: dm.body.data.id, kind: 'table', title: 'Orders' });
  return { tenant, api, dataModelId: dm.body.data.id, fieldId: field.body.data.id, widgetId: widget.id };
}

before(async () => {
  t = await startApp();
  A = await world();
  B = await world();
});

after(async () => {
  await t.close();
});

describe('reads by id', () => {
  for (const collection of COLLECTIONS) {
    test(`GET ${collection}/{id}: another tenant's id reads like a random and a malformed id`, async () => {
      const own = await A.api.get(`${P}/${collection}/${idsOf(A)[collection]}`);
      assert.equal(own.status, 200, own.text);
      assert.equal(own.body.data.id, idsOf(A)[collection]);
      // B's id is real: B reads it.
      const theirs = await B.api.get(`${P}/${collection}/${idsOf(B)[collection]}`);
      assert.equal(theirs.status, 200, theirs.text);

      const foreign = await A.api.get(`${P}/${collection}/${idsOf(B)[collection]}`);
      const foreignUpper = await A.api.get(`${P}/${collection}/${idsOf(B)[collection]!.toUpperCase()}`);
      const random = await A.api.get(`${P}/${collection}/${randomUUID()}`);
      const v7 = await A.api.get(`${P}/${collection}/${uuidv7()}`);
      const malformed = await A.api.get(`${P}/${collection}/not-a-uuid`);
      for (const res of [foreign, foreignUpper, random, v7, malformed]) assert404(res);
      const expected = withoutErrorIds(random);
      assert.deepEqual(withoutErrorIds(foreign), expected);
      assert.deepEqual(withoutErrorIds(foreignUpper), expected);
      assert.deepEqual(withoutErrorIds(v7), expected);
      assert.deepEqual(withoutErrorIds(malformed), expected);
      assert.ok(!foreign.text.includes(idsOf(B)[collection]!));
    });

    test(`GET ${collection}/{id} with include: a foreign id is still 404`, async () => {
      const include = {
        organizations: '',
        org_memberships: '?include=user,organization',
        users: '',
        credentials: '?include=run_as_membership',
        dashboard_widgets: '?include=data_model',
        data_models: '?include=fields',
        data_model_fields: '?include=data_model',
      }[collection];
      const foreign = await A.api.get(`${P}/${collection}/${idsOf(B)[collection]}${include}`);
      const random = await A.api.get(`${P}/${collection}/${randomUUID()}${include}`);
      assert404(foreign);
      assert.deepEqual(withoutErrorIds(foreign), withoutErrorIds(random));
    });
  }
});

describe('lists', () => {
  for (const collection of COLLECTIONS) {
    test(`GET ${collection}: A's list has A's object and none of B's`, async () => {
      const res = await A.api.get(`${P}/${collection}?page[limit]=250&page[count]=true`);
      assert.equal(res.status, 200, res.text);
      const listed = res.body.data.map((r: { id: string }) => r.id);
      assert.ok(listed.includes(idsOf(A)[collection]), `${collection}: own object missing`);
      for (const id of Object.values(idsOf(B))) assert.ok(!res.text.includes(id), `${collection}: B's id ${id} leaked`);
      assert.equal(res.body.meta.page.total, listed.length);
    });
  }

  test('filters naming B ids find nothing', async () => {
    const cases: [string, string][] = [
      ['data_models', `filter[organization_id]=${B.tenant.organizationId}`],
      ['data_model_fields', `filter[data_model_id]=${B.dataModelId}`],
      ['dashboard_widgets', `filter[data_model_id]=${B.dataModelId}`],
      ['data_models', `filter[slug]=orders`],
    ];
    for (const [collection, filter] of cases) {
      const res = await A.api.get(`${P}/${collection}?${filter}&page[count]=true`);
      assert.equal(res.status, 200, res.text);
      // links echo the query string; the resources must not carry B's ids.
      const resources = JSON.stringify({ data: res.body.data, included: res.body.included, meta: res.body.meta });
      for (const id of Object.values(idsOf(B))) assert.ok(!resources.includes(id), `${collection}?${filter}: ${id} leaked`);
    }
    const bySlug = await A.api.get(`${P}/data_models?filter[slug]=orders`);
    assert.deepEqual(
      bySlug.body.data.map((r: { id: string }) => r.id),
      [A.dataModelId],
    );
    const byModel = await A.api.get(`${P}/data_model_fields?filter[data_model_id]=${B.dataModelId}&page[count]=true`);
    assert.deepEqual(byModel.body.data, []);
    assert.equal(byModel.body.meta.page.total, 0);
  });
});

describe('includes', () => {
  const paths = [
    `data_models?include=fields`,
    `data_model_fields?include=data_model.fields`,
    `dashboard_widgets?include=data_model.fields`,
    `org_memberships?include=user,organization`,
    `credentials?include=run_as_membership.user,run_as_membership.organization`,
  ];
  for (const p of paths) {
    test(`GET ${p} from A reveals none of B's objects`, async () => {
      const res = await A.api.get(`${P}/${p}`);
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.included.length > 0, 'the include found nothing at all');
      for (const id of Object.values(idsOf(B))) assert.ok(!res.text.includes(id), `${p}: ${id} leaked`);
      const aIds = new Set(Object.values(idsOf(A)));
      for (const r of res.body.included)
        assert.ok(aIds.has(r.id) || r.type === 'data_model_field' || r.type === 'user' || r.type === 'org_membership', `${r.type} ${r.id}`);
    });
  }

  test("includes apply the related type's visibility even to rows that point across tenants", async () => {
    // Rows the service would never write, made directly: A's widget pointing at B's model,
    // and a field of B's workspace pointing at A's model.
    const widget = await admin.createWidget(t.deps.db, { workspace_id: A.tenant.workspaceId, data_model_id: A.dataModelId, kind: 'table' });
    await t.deps.db.updateTable('dashboard_widgets').set({ data_model_id: B.dataModelId }).where('id', '=', widget.id).execute();
    const strayFieldId = uuidv7();
    await t.deps.db
      .insertInto('data_model_fields')
      .values({
        id: strayFieldId,
        organization_id: B.tenant.organizationId,
        workspace_id: B.tenant.workspaceId,
        data_model_id: A.dataModelId,
        name: 'stray',
        label: 'stray',
        description: null,
        type: null,
        is_primary_key: false,
        is_required: false,
        constraints: null,
      })
      .execute();
    try {
      const w = await A.api.get(`${P}/dashboard_widgets/${widget.id}?include=data_model`);
      assert.equal(w.status, 200, w.text);
      assert.deepEqual(w.body.data.relationships.data_model, { data: null });
      assert.deepEqual(w.body.included, []);

      const dm = await A.api.get(`${P}/data_models/${A.dataModelId}?include=fields`);
      assert.equal(dm.status, 200, dm.text);
      assert.deepEqual(dm.body.data.relationships.fields.data, [{ type: 'data_model_field', id: A.fieldId }]);
      assert.deepEqual(
        dm.body.included.map((r: { id: string }) => r.id),
        [A.fieldId],
      );
      assert.ok(!dm.text.includes(strayFieldId));

      const fieldsOfA = await A.api.get(`${P}/data_model_fields?filter[data_model_id]=${A.dataModelId}`);
      assert.deepEqual(
        fieldsOfA.body.data.map((r: { id: string }) => r.id),
        [A.fieldId],
      );
      assert404(await A.api.get(`${P}/data_model_fields/${strayFieldId}`));
    } finally {
      await t.deps.db.deleteFrom('dashboard_widgets').where('id', '=', widget.id).execute();
      await t.deps.db.deleteFrom('data_model_fields').where('id', '=', strayFieldId).execute();
    }
  });
});

describe('updates', () => {
  for (const [collection, type] of [
    ['data_models', 'data_model'],
    ['data_model_fields', 'data_model_field'],
  ] as const) {
    test(`PATCH ${collection}/{id}: another tenant's id reads like a random and a malformed id, and changes nothing`, async () => {
      const attributes = collection === 'data_models' ? { name: 'Hijacked' } : { label: 'Hijacked' };
      const patch = (id: string) => A.api.patch(`${P}/${collection}/${id}`, { data: { type, id, attributes } });
      const foreignId = idsOf(B)[collection]!;
      const foreign = await patch(foreignId);
      const random = await patch(randomUUID());
      const malformed = await patch('not-a-uuid');
      for (const res of [foreign, random, malformed]) assert404(res);
      assert.deepEqual(withoutErrorIds(foreign), withoutErrorIds(random));
      assert.deepEqual(withoutErrorIds(malformed), withoutErrorIds(random));

      const still = await B.api.get(`${P}/${collection}/${foreignId}`);
      assert.equal(still.status, 200);
      assert.notEqual(still.body.data.attributes.name, 'Hijacked');
      assert.notEqual(still.body.data.attributes.label, 'Hijacked');

      // The own object with the same body is updated: the 404 above is not a body problem.
      const ownId = idsOf(A)[collection]!;
      const own = await A.api.patch(`${P}/${collection}/${ownId}`, { data: { type, id: ownId, attributes } });
      assert.equal(own.status, 200, own.text);
    });
  }
});

describe('creates naming foreign objects', () => {
  test("a field with B's data_model_id is 422 with the same text as a random id", async () => {
    const create = (dataModelId: string) =>
      A.api.post(`${P}/data_model_fields`, { data: { type: 'data_model_field', attributes: { data_model_id: dataModelId, name: 'probe' } } });
    const foreign = await create(B.dataModelId);
    const random = await create(randomUUID());
    const randomV7 = await create(uuidv7());
    const malformed = await create('not-a-uuid');
    for (const res of [foreign, random, randomV7, malformed]) {
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.errors[0].code, 'invalid_request');
      assert.deepEqual(res.body.errors[0].source, { pointer: '/data/attributes/data_model_id' });
    }
    assert.deepEqual(withoutErrorIds(foreign), withoutErrorIds(random));
    assert.deepEqual(withoutErrorIds(randomV7), withoutErrorIds(random));
    assert.deepEqual(withoutErrorIds(malformed), withoutErrorIds(random));
    const fields = await B.api.get(`${P}/data_model_fields?filter[name]=probe`);
    assert.deepEqual(fields.body.data, []);
  });

  test("a data model with B's organization_id is 422 at organization_id with the same text as a random org id", async () => {
    const create = (organizationId: string, slug: string) =>
      A.api.post(`${P}/data_models`, dataModelDoc({ name: 'Probe', slug, organization_id: organizationId }));
    const foreign = await create(B.tenant.organizationId, 'probe-foreign');
    const random = await create(randomUUID(), 'probe-random');
    const randomV7 = await create(uuidv7(), 'probe-random-v7');
    for (const res of [foreign, random, randomV7]) {
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.errors[0].code, 'invalid_request');
      assert.deepEqual(res.body.errors[0].source, { pointer: '/data/attributes/organization_id' });
    }
    assert.deepEqual(withoutErrorIds(foreign), withoutErrorIds(random));
    assert.deepEqual(withoutErrorIds(randomV7), withoutErrorIds(random));
    assert.equal((await B.api.get(`${P}/data_models?filter[slug]=probe-foreign`)).body.data.length, 0);
    assert.equal((await A.api.get(`${P}/data_models?filter[slug]=probe-foreign`)).body.data.length, 0);

    const own = await create(A.tenant.organizationId, 'probe-own');
    assert.equal(own.status, 201, own.text);
    assert.equal(own.body.data.attributes.organization_id, A.tenant.organizationId);
  });
});

describe('a second workspace of organization A', () => {
  let W2: Tenant;
  let w2Api: Api;
  let w2ModelId: string;
  let w2FieldId: string;
  let w2WidgetId: string;

  before(async () => {
    const ws = await admin.createWorkspace(t.deps.db, { organization_id: A.tenant.organizationId, name: 'Second' });
    W2 = await seedAccount(t.deps, { ...A.tenant, workspaceId: ws.id }, { role: 'owner' });
    w2Api = jsonApi(t, await tokenFor(t, W2));
    const dm = await w2Api.post(`${P}/data_models`, dataModelDoc({ name: 'Invoices', slug: 'invoices' }));
    assert.equal(dm.status, 201, dm.text);
    w2ModelId = dm.body.data.id;
    const field = await w2Api.post(`${P}/data_model_fields`, {
      data: { type: 'data_model_field', attributes: { data_model_id: w2ModelId, name: 'amount', type: 'float' } },
    });
    assert.equal(field.status, 201, field.text);
    w2FieldId = field.body.data.id;
    w2WidgetId = (await admin.createWidget(t.deps.db, { workspace_id: ws.id, data_model_id: w2ModelId, kind: 'bar', config: { groupBy: ['status'] } })).id;
  });

  test('its workspace objects are 404 to the first workspace, like random ids', async () => {
    const cases: [string, string][] = [
      ['data_models', w2ModelId],
      ['data_model_fields', w2FieldId],
      ['dashboard_widgets', w2WidgetId],
      ['credentials', W2.credentialId],
    ];
    for (const [collection, id] of cases) {
      assert.equal((await w2Api.get(`${P}/${collection}/${id}`)).status, 200, `${collection} is readable in its own workspace`);
      const foreign = await A.api.get(`${P}/${collection}/${id}`);
      assert404(foreign);
      assert.deepEqual(withoutErrorIds(foreign), withoutErrorIds(await A.api.get(`${P}/${collection}/${randomUUID()}`)));
      const list = await A.api.get(`${P}/${collection}?page[limit]=250`);
      assert.equal(list.status, 200);
      assert.ok(!list.text.includes(id), `${collection} list of workspace 1 shows ${id}`);
    }
    const patch = await A.api.patch(`${P}/data_models/${w2ModelId}`, { data: { type: 'data_model', id: w2ModelId, attributes: { name: 'Hijacked' } } });
    assert404(patch);
    const field = await A.api.post(`${P}/data_model_fields`, { data: { type: 'data_model_field', attributes: { data_model_id: w2ModelId, name: 'probe' } } });
    const random = await A.api.post(`${P}/data_model_fields`, {
      data: { type: 'data_model_field', attributes: { data_model_id: randomUUID(), name: 'probe' } },
    });
    assert.equal(field.status, 422);
    assert.deepEqual(withoutErrorIds(field), withoutErrorIds(random));
    // And the other way round.
    assert404(await w2Api.get(`${P}/data_models/${A.dataModelId}`));
    assert.ok(!(await w2Api.get(`${P}/data_models`)).text.includes(A.dataModelId));
  });

  test('organizations, memberships and users are shared within the organization', async () => {
    for (const api of [A.api, w2Api]) {
      const orgs = await api.get(`${P}/organizations`);
      assert.deepEqual(
        orgs.body.data.map((r: { id: string }) => r.id),
        [A.tenant.organizationId],
      );
      const members = await api.get(`${P}/org_memberships?page[limit]=250`);
      assert.deepEqual(new Set(members.body.data.map((r: { id: string }) => r.id)), new Set([A.tenant.membershipId, W2.membershipId]));
      const users = await api.get(`${P}/users?page[limit]=250`);
      assert.deepEqual(new Set(users.body.data.map((r: { id: string }) => r.id)), new Set([A.tenant.userId, W2.userId]));
    }
    assert.equal((await A.api.get(`${P}/org_memberships/${W2.membershipId}`)).status, 200);
    assert.equal((await A.api.get(`${P}/users/${W2.userId}`)).status, 200);
    assert.equal((await w2Api.get(`${P}/users/${A.tenant.userId}`)).status, 200);
    assert.equal((await w2Api.get(`${P}/organizations/${A.tenant.organizationId}`)).status, 200);
    assert404(await w2Api.get(`${P}/organizations/${B.tenant.organizationId}`));
  });

  test("a user who is a member of both organizations shows only the membership of the caller's organization", async () => {
    const both = await admin.addMember(t.deps.db, { organization_id: B.tenant.organizationId, user_id: W2.userId, role: 'member' });
    const user = await B.api.get(`${P}/users/${W2.userId}`);
    assert.equal(user.status, 200);
    const members = await A.api.get(`${P}/org_memberships?include=user&page[limit]=250`);
    assert.ok(!members.text.includes(both.id));
    assert.ok(!members.text.includes(B.tenant.organizationId));
    assert404(await A.api.get(`${P}/org_memberships/${both.id}`));
    assert.equal((await B.api.get(`${P}/org_memberships/${both.id}`)).status, 200);
  });
});
