/**
 * The read-only `workspace` type: the workspaces of the caller's organization, so that
 * their ids are found through the API (issue 11 item 9).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as admin from '../../src/admin/service.ts';
import { assertJsonApiError, jsonApi, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

const WORKSPACES = '/api/json/v1/workspaces';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let api: ReturnType<typeof jsonApi>;
let secondId: string;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  other = await seedTenant(t.deps);
  secondId = (await admin.createWorkspace(t.deps.db, { organization_id: tenant.organizationId, name: 'Analytics' })).id;
  api = jsonApi(t, await tokenFor(t, tenant));
});
after(() => t.close());

describe('workspace', () => {
  test('401 without a token, 403 without api_read', async () => {
    assertJsonApiError(await jsonApi(t, undefined).get(WORKSPACES), 401, 'unauthorized');
    assertJsonApiError(await jsonApi(t, undefined).get(`${WORKSPACES}/${tenant.workspaceId}`), 401, 'unauthorized');
    const writer = await seedTenant(t.deps, { scopes: ['api_write'] });
    const w = jsonApi(t, await tokenFor(t, writer));
    assertJsonApiError(await w.get(WORKSPACES), 403, 'forbidden');
    assertJsonApiError(await w.get(`${WORKSPACES}/${writer.workspaceId}`), 403, 'forbidden');
  });

  test('a workspace of another organization is 404, like an id that does not exist', async () => {
    for (const id of [other.workspaceId, '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', 'not-a-uuid']) {
      assertJsonApiError(await api.get(`${WORKSPACES}/${id}`), 404, 'not_found');
    }
  });

  test('the list holds every workspace of the organization and nothing else', async () => {
    const res = await api.get(WORKSPACES);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.data.map((d: any) => d.id).sort(), [tenant.workspaceId, secondId].sort());
    for (const d of res.body.data) {
      assert.equal(d.type, 'workspace');
      assert.deepEqual(Object.keys(d.attributes).sort(), ['inserted_at', 'name', 'organization_id', 'updated_at']);
      assert.equal(d.attributes.organization_id, tenant.organizationId);
      assert.deepEqual(d.relationships.organization.data, { type: 'organization', id: tenant.organizationId });
    }
  });

  test('by id, with its organization included', async () => {
    const res = await api.get(`${WORKSPACES}/${secondId}?include=organization`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.id, secondId);
    assert.equal(res.body.data.attributes.name, 'Analytics');
    assert.match(res.body.data.attributes.inserted_at, /Z$/);
    assert.equal(res.body.data.links.self, `${WORKSPACES}/${secondId}`);
    assert.deepEqual(
      res.body.included.map((r: any) => [r.type, r.id]),
      [['organization', tenant.organizationId]],
    );
  });

  test('filter and sort', async () => {
    const byName = await api.get(`${WORKSPACES}?filter[name]=Analytics`);
    assert.deepEqual(
      byName.body.data.map((d: any) => d.id),
      [secondId],
    );
    const byOrg = await api.get(`${WORKSPACES}?filter[organization_id]=${other.organizationId}`);
    assert.deepEqual(byOrg.body.data, []);
    const sorted = await api.get(`${WORKSPACES}?sort=-name`);
    assert.deepEqual(
      sorted.body.data.map((d: any) => d.attributes.name),
      ['Main', 'Analytics'],
    );
    const bad = await api.get(`${WORKSPACES}?filter[nope]=1`);
    assertJsonApiError(bad, 400, 'invalid_query', { parameter: 'filter[nope]' });
  });

  test('read-only: writes are 405', async () => {
    const res = await api.post(WORKSPACES, { data: { type: 'workspace', attributes: { name: 'x' } } });
    assertJsonApiError(res, 405, 'method_not_allowed');
    assert.equal(res.headers.get('allow'), 'GET, HEAD');
  });
});
