/**
 * The read-only JSON:API types: organizations, org_memberships, users, credentials and
 * dashboard_widgets. Each suite opens with 401, 403 (token minted with api_write only)
 * and another tenant's object (404).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import * as admin from '../../src/admin/service.ts';
import {
  dataModelDoc,
  jsonApi,
  seedAccount,
  seedTenant,
  startApp,
  tokenFor,
  type ApiResponse,
  type Tenant,
  type TestApp,
  assertJsonApiError,
} from '../helpers/app.ts';

const P = '/api/json/v1';
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DEFAULT_PREFERENCES = { theme: 'system', locale: 'en-US', week_start: 'monday', notifications: { email: true } };

type Api = ReturnType<typeof jsonApi>;

let t: TestApp;
/** Owner of organization A. */
let A: Tenant;
let api: Api;
let writeOnly: Api;
let B: Tenant;
let bApi: Api;

before(async () => {
  t = await startApp();
  A = await seedTenant(t.deps);
  api = jsonApi(t, await tokenFor(t, A));
  writeOnly = jsonApi(t, await tokenFor(t, A, 'api_write'));
  B = await seedTenant(t.deps);
  bApi = jsonApi(t, await tokenFor(t, B));
});

after(async () => {
  await t.close();
});

const assertError = assertJsonApiError;

const ids = (res: ApiResponse): string[] => res.body.data.map((r: { id: string }) => r.id);

/** 401, 403 and other-tenant 404 for one collection; `own`/`foreign` are ids of A and B. */
function openers(collection: string, own: () => string, foreign: () => string): void {
  test('401 without a token', async () => {
    const anon = jsonApi(t, undefined);
    for (const res of [await anon.get(`${P}/${collection}`), await anon.get(`${P}/${collection}/${own()}`)]) {
      assertError(res, 401, 'unauthorized');
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
      assert.ok(!res.text.includes(own()));
    }
    const expired = jsonApi(t, 'tbat_e30.AAAA');
    assertError(await expired.get(`${P}/${collection}`), 401, 'unauthorized');
  });

  test('403 with a token minted for api_write only', async () => {
    assertError(await writeOnly.get(`${P}/${collection}`), 403, 'forbidden');
    assertError(await writeOnly.get(`${P}/${collection}/${own()}`), 403, 'forbidden');
    assert.equal((await api.get(`${P}/${collection}/${own()}`)).status, 200);
  });

  test("another tenant's object is 404, like a random id", async () => {
    assert.equal((await bApi.get(`${P}/${collection}/${foreign()}`)).status, 200, 'the foreign id exists');
    const res = await api.get(`${P}/${collection}/${foreign()}`);
    assertError(res, 404, 'not_found');
    const random = await api.get(`${P}/${collection}/${randomUUID()}`);
    assertError(random, 404, 'not_found');
    assert.equal(res.body.errors[0].detail, random.body.errors[0].detail);
    assert.equal(res.body.errors[0].title, random.body.errors[0].title);
    const list = await api.get(`${P}/${collection}?page[limit]=250`);
    assert.equal(list.status, 200);
    assert.ok(!ids(list).includes(foreign()));
  });
}

describe('organizations', () => {
  openers(
    'organizations',
    () => A.organizationId,
    () => B.organizationId,
  );

  test('list and by id show the own organization with its public attributes', async () => {
    const list = await api.get(`${P}/organizations`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(ids(list), [A.organizationId]);
    const org = list.body.data[0];
    assert.equal(org.type, 'organization');
    assert.deepEqual(Object.keys(org.attributes).sort(), ['domain', 'inserted_at', 'name', 'updated_at']);
    assert.match(org.attributes.domain, /^org-.*\.example$/);
    assert.match(org.attributes.name, /^Org /);
    assert.match(org.attributes.inserted_at, ISO_Z);
    assert.equal(org.links.self, `${P}/organizations/${A.organizationId}`);
    const one = await api.get(`${P}/organizations/${A.organizationId}`);
    assert.deepEqual(one.body.data, org);
    assert.deepEqual(ids(await api.get(`${P}/organizations?filter[domain]=${org.attributes.domain}`)), [A.organizationId]);
    assert.deepEqual(
      ids(await api.get(`${P}/organizations?filter[domain]=${(await bApi.get(`${P}/organizations/${B.organizationId}`)).body.data.attributes.domain}`)),
      [],
    );
  });
});

describe('org_memberships', () => {
  let extra: Tenant;

  before(async () => {
    extra = await seedAccount(t.deps, A, { role: 'member' });
  });

  openers(
    'org_memberships',
    () => A.membershipId,
    () => B.membershipId,
  );

  test('list and by id with include=user,organization', async () => {
    const list = await api.get(`${P}/org_memberships?include=user,organization`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(new Set(ids(list)), new Set([A.membershipId, extra.membershipId]));
    const mine = list.body.data.find((r: any) => r.id === A.membershipId);
    const { inserted_at, updated_at, ...attrs } = mine.attributes;
    assert.deepEqual(attrs, { is_active: true, role: 'owner' });
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assert.deepEqual(mine.relationships, {
      user: { data: { type: 'user', id: A.userId } },
      organization: { data: { type: 'organization', id: A.organizationId } },
    });
    assert.deepEqual(
      new Set(list.body.included.map((r: any) => `${r.type}:${r.id}`)),
      new Set([`user:${A.userId}`, `user:${extra.userId}`, `organization:${A.organizationId}`]),
    );

    const one = await api.get(`${P}/org_memberships/${extra.membershipId}?include=user,organization`);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.data.attributes.role, 'member');
    assert.deepEqual(one.body.data.relationships.user, { data: { type: 'user', id: extra.userId } });
    const user = one.body.included.find((r: any) => r.type === 'user');
    assert.equal(user.id, extra.userId);
    assert.deepEqual(user.attributes.preferences, DEFAULT_PREFERENCES);
    assert.equal(one.body.included.length, 2);
    assert.deepEqual(ids(await api.get(`${P}/org_memberships?filter[role]=member`)), [extra.membershipId]);
    assertError(await api.get(`${P}/org_memberships?filter[role]=boss`), 400, 'invalid_query', { parameter: 'filter[role]' });
    assertError(await api.get(`${P}/org_memberships?filter[user_id]=${A.userId}`), 400, 'invalid_query', { parameter: 'filter[user_id]' });
  });

  test('a deactivated membership is retained for audit and found with filter[is_active]=false', async () => {
    const gone = await seedAccount(t.deps, A, { role: 'admin' });
    assert.deepEqual(ids(await api.get(`${P}/org_memberships?filter[is_active]=false`)), []);
    const row = await admin.deactivateMember(t.deps.db, gone.membershipId, new Date(t.deps.clock()));
    assert.equal(row.is_active, false);

    const inactive = await api.get(`${P}/org_memberships?filter[is_active]=false&include=user`);
    assert.equal(inactive.status, 200, inactive.text);
    assert.deepEqual(ids(inactive), [gone.membershipId]);
    assert.equal(inactive.body.data[0].attributes.is_active, false);
    assert.equal(inactive.body.data[0].attributes.role, 'admin');
    assert.deepEqual(
      inactive.body.included.map((r: { id: string }) => r.id),
      [gone.userId],
    );
    const active = await api.get(`${P}/org_memberships?filter[is_active]=true`);
    assert.ok(!ids(active).includes(gone.membershipId));
    assert.ok(ids(active).includes(A.membershipId));
    const one = await api.get(`${P}/org_memberships/${gone.membershipId}`);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.data.attributes.is_active, false);
    // The user of an inactive membership is still visible within the organization.
    assert.equal((await api.get(`${P}/users/${gone.userId}`)).status, 200);
    assertError(await api.get(`${P}/org_memberships?filter[is_active]=no`), 400, 'invalid_query', { parameter: 'filter[is_active]' });
  });
});

describe('users', () => {
  openers(
    'users',
    () => A.userId,
    () => B.userId,
  );

  test('list and by id: public attributes, preferences defaults', async () => {
    const named = await admin.createUser(t.deps.db, {
      email: `named-${randomUUID()}@example.com`,
      first_name: 'Ada',
      last_name: 'Lovelace',
      timezone: 'Europe/London',
      phone_number: '+44 20 7946 0000',
    });
    await admin.addMember(t.deps.db, { organization_id: A.organizationId, user_id: named.id, role: 'member' });
    const outsider = await admin.createUser(t.deps.db, { email: `outsider-${randomUUID()}@example.com` });

    const list = await api.get(`${P}/users?page[limit]=250`);
    assert.equal(list.status, 200, list.text);
    assert.ok(ids(list).includes(A.userId));
    assert.ok(ids(list).includes(named.id));
    assert.ok(!ids(list).includes(outsider.id), 'a user without a membership in the organization is not listed');
    assert.ok(!ids(list).includes(B.userId));
    assertError(await api.get(`${P}/users/${outsider.id}`), 404, 'not_found');

    const one = await api.get(`${P}/users/${named.id}`);
    assert.equal(one.status, 200, one.text);
    const { inserted_at, updated_at, ...attrs } = one.body.data.attributes;
    assert.deepEqual(attrs, {
      email: named.email,
      first_name: 'Ada',
      last_name: 'Lovelace',
      phone_number: '+44 20 7946 0000',
      preferences: DEFAULT_PREFERENCES,
      timezone: 'Europe/London',
    });
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assert.equal(one.body.data.type, 'user');
    assertError(await api.get(`${P}/users?filter[preferences]=x`), 400, 'invalid_query', { parameter: 'filter[preferences]' });
    assert.deepEqual(ids(await api.get(`${P}/users?filter[last_name]=Lovelace`)), [named.id]);
  });

  test('stored preferences are deep-merged over the defaults', async () => {
    const u = await seedAccount(t.deps, A);
    await t.deps.db
      .updateTable('users')
      .set({ preferences: JSON.stringify({ theme: 'dark', notifications: { sms: true } }) })
      .where('id', '=', u.userId)
      .execute();
    const res = await api.get(`${P}/users/${u.userId}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.data.attributes.preferences, { theme: 'dark', locale: 'en-US', week_start: 'monday', notifications: { email: true, sms: true } });

    // Stored values win, also false ones and nested ones; unknown keys are kept.
    await t.deps.db
      .updateTable('users')
      .set({ preferences: JSON.stringify({ locale: 'de-DE', notifications: { email: false }, extra: { a: 1 } }) })
      .where('id', '=', u.userId)
      .execute();
    const again = await api.get(`${P}/users/${u.userId}`);
    assert.deepEqual(again.body.data.attributes.preferences, {
      theme: 'system',
      locale: 'de-DE',
      week_start: 'monday',
      notifications: { email: false },
      extra: { a: 1 },
    });
    // A list presents the same values, and the defaults object itself is never mutated.
    const list = await api.get(`${P}/users?page[limit]=250`);
    assert.deepEqual(list.body.data.find((r: any) => r.id === u.userId).attributes.preferences, again.body.data.attributes.preferences);
    assert.deepEqual(list.body.data.find((r: any) => r.id === A.userId).attributes.preferences, DEFAULT_PREFERENCES);
  });
});

describe('credentials', () => {
  let member: Tenant;
  let memberApi: Api;

  before(async () => {
    member = await seedAccount(t.deps, A, { role: 'member', scopes: ['api_read'] });
    memberApi = jsonApi(t, await tokenFor(t, member));
  });

  openers(
    'credentials',
    () => A.credentialId,
    () => B.credentialId,
  );

  test('never exposes secret_hash or client_secret', async () => {
    const list = await api.get(`${P}/credentials?page[limit]=250&include=run_as_membership`);
    assert.equal(list.status, 200, list.text);
    // Earlier suites added accounts to A's workspace; B's are never listed.
    assert.ok(ids(list).includes(A.credentialId) && ids(list).includes(member.credentialId));
    assert.ok(!ids(list).includes(B.credentialId));
    const hashes = await t.deps.db.selectFrom('service_accounts').select('secret_hash').execute();
    for (const res of [list, await api.get(`${P}/credentials/${A.credentialId}`), await memberApi.get(`${P}/credentials`)]) {
      assert.ok(!/secret/i.test(res.text), res.text);
      assert.ok(!res.text.includes(A.clientSecret));
      assert.ok(!res.text.includes(member.clientSecret));
      for (const { secret_hash } of hashes) assert.ok(!res.text.includes(secret_hash));
    }
    const mine = list.body.data.find((r: any) => r.id === A.credentialId);
    const { inserted_at, updated_at, ...attrs } = mine.attributes;
    assert.deepEqual(attrs, {
      client_id: A.clientId,
      is_active: true,
      name: mine.attributes.name,
      scopes: ['api_read', 'api_write', 'webhooks', 'embed'],
      workspace_id: A.workspaceId,
    });
    assert.match(mine.attributes.name, /^sa /);
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assertError(await api.get(`${P}/credentials?fields[credential]=secret_hash`), 400, 'invalid_query', { parameter: 'fields[credential]' });
    assertError(await api.get(`${P}/credentials?filter[secret_hash]=x`), 400, 'invalid_query', { parameter: 'filter[secret_hash]' });
  });

  test('include=run_as_membership', async () => {
    const res = await api.get(`${P}/credentials/${A.credentialId}?include=run_as_membership`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.data.relationships, {
      workspace: { data: { type: 'workspace', id: A.workspaceId } },
      run_as_membership: { data: { type: 'org_membership', id: A.membershipId } },
    });
    assert.equal(res.body.included.length, 1);
    assert.equal(res.body.included[0].type, 'org_membership');
    assert.equal(res.body.included[0].id, A.membershipId);
    assert.equal(res.body.included[0].attributes.role, 'owner');
    const deep = await api.get(`${P}/credentials/${member.credentialId}?include=run_as_membership.user`);
    assert.deepEqual(
      new Set(deep.body.included.map((r: any) => `${r.type}:${r.id}`)),
      new Set([`org_membership:${member.membershipId}`, `user:${member.userId}`]),
    );
    assert.deepEqual(ids(await api.get(`${P}/credentials?filter[scopes][contains]=webhooks`)), [A.credentialId]);
    assert.deepEqual(ids(await api.get(`${P}/credentials?filter[client_id]=${member.clientId}`)), [member.credentialId]);
    // The console finds the workspace an account acts in from its client id.
    const ws = await api.get(`${P}/credentials?filter[client_id]=${A.clientId}&include=workspace`);
    assert.deepEqual(
      ws.body.included.map((r: any) => `${r.type}:${r.id}`),
      [`workspace:${A.workspaceId}`],
    );
  });

  test('a member sees only its own credential', async () => {
    const list = await memberApi.get(`${P}/credentials`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(ids(list), [member.credentialId]);
    assert.equal((await memberApi.get(`${P}/credentials/${member.credentialId}`)).status, 200);
    const hidden = await memberApi.get(`${P}/credentials/${A.credentialId}`);
    assertError(hidden, 404, 'not_found');
    assert.equal(hidden.body.errors[0].detail, (await memberApi.get(`${P}/credentials/${randomUUID()}`)).body.errors[0].detail);
    const own = await memberApi.get(`${P}/credentials/${member.credentialId}?include=run_as_membership`);
    assert.equal(own.body.included[0].id, member.membershipId);
    // The member still reads the organization's memberships (not hidden by role).
    assert.ok(ids(await memberApi.get(`${P}/org_memberships`)).includes(A.membershipId));
  });
});

describe('dashboard_widgets', () => {
  let dataModelId: string;
  let plainId: string;
  let customId: string;
  let bWidgetId: string;

  before(async () => {
    const dm = await api.post(`${P}/data_models`, dataModelDoc({ name: 'Sales', slug: 'sales' }));
    assert.equal(dm.status, 201, dm.text);
    dataModelId = dm.body.data.id;
    plainId = (await admin.createWidget(t.deps.db, { workspace_id: A.workspaceId, data_model_id: dataModelId, kind: 'table' })).id;
    customId = (
      await admin.createWidget(t.deps.db, {
        workspace_id: A.workspaceId,
        data_model_id: dataModelId,
        kind: 'line',
        title: 'Revenue',
        dashboard: 'finance',
        position: { x: 4, y: 0, w: 8, h: 6 },
        config: { mode: 'timeline', bucket: 'week', measures: [{ op: 'sum', field: 'amount' }], colors: ['#0b5cad'] },
      })
    ).id;
    const bdm = await bApi.post(`${P}/data_models`, dataModelDoc({ name: 'Sales', slug: 'sales' }));
    assert.equal(bdm.status, 201, bdm.text);
    bWidgetId = (await admin.createWidget(t.deps.db, { workspace_id: B.workspaceId, data_model_id: bdm.body.data.id, kind: 'table' })).id;
  });

  openers(
    'dashboard_widgets',
    () => plainId,
    () => bWidgetId,
  );

  test('attributes: dashboard defaults to home, kind, title, data_model_id, position, config', async () => {
    const plain = await api.get(`${P}/dashboard_widgets/${plainId}`);
    assert.equal(plain.status, 200, plain.text);
    assert.equal(plain.body.data.type, 'dashboard_widget');
    const { inserted_at, updated_at, ...attrs } = plain.body.data.attributes;
    assert.deepEqual(attrs, { dashboard: 'home', kind: 'table', title: null, data_model_id: dataModelId, position: { x: 0, y: 0, w: 4, h: 3 }, config: {} });
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assert.deepEqual(plain.body.data.relationships, { data_model: { data: { type: 'data_model', id: dataModelId } } });

    const custom = await api.get(`${P}/dashboard_widgets/${customId}`);
    const { inserted_at: _i, updated_at: _u, ...customAttrs } = custom.body.data.attributes;
    assert.deepEqual(customAttrs, {
      dashboard: 'finance',
      kind: 'line',
      title: 'Revenue',
      data_model_id: dataModelId,
      position: { x: 4, y: 0, w: 8, h: 6 },
      config: { mode: 'timeline', bucket: 'week', measures: [{ op: 'sum', field: 'amount' }], colors: ['#0b5cad'] },
    });

    const list = await api.get(`${P}/dashboard_widgets`);
    assert.deepEqual(ids(list), [customId, plainId]);
    assert.deepEqual(ids(await api.get(`${P}/dashboard_widgets?filter[dashboard]=home`)), [plainId]);
    assert.deepEqual(ids(await api.get(`${P}/dashboard_widgets?filter[kind]=line`)), [customId]);
    assert.deepEqual(ids(await api.get(`${P}/dashboard_widgets?filter[title][is_null]=true`)), [plainId]);
    assertError(await api.get(`${P}/dashboard_widgets?filter[position]=x`), 400, 'invalid_query', { parameter: 'filter[position]' });
  });

  test('include=data_model', async () => {
    const one = await api.get(`${P}/dashboard_widgets/${customId}?include=data_model`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body.data.relationships.data_model, { data: { type: 'data_model', id: dataModelId } });
    assert.equal(one.body.included.length, 1);
    assert.equal(one.body.included[0].id, dataModelId);
    assert.equal(one.body.included[0].attributes.slug, 'sales');
    const list = await api.get(`${P}/dashboard_widgets?include=data_model`);
    assert.equal(list.body.included.length, 1, 'the shared model is included once');
    const sparse = await api.get(`${P}/dashboard_widgets?include=data_model&fields[dashboard_widget]=title&fields[data_model]=name`);
    for (const w of sparse.body.data) {
      assert.deepEqual(Object.keys(w.attributes), ['title']);
      assert.equal(w.relationships, undefined);
    }
    assert.deepEqual(sparse.body.included[0].attributes, { name: 'Sales' });
  });
});
