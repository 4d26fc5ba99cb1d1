/**
 * The access table (auth/access.ts): every operation the surfaces offer has its row, and
 * authorize refuses in the words each rule gives. Credentials, the one type whose rows
 * depend on the caller's role, read that role in their visibility clause as stored now.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ACCESS, authorize, permits, typePermission, type Permission } from '../../src/auth/access.ts';
import { AppError } from '../../src/errors.ts';
import type { Principal } from '../../src/auth/principal.ts';
import type { Scope } from '../../src/auth/tokens.ts';
import type { Role } from '../../src/db/tables.ts';
import { RESOURCE_TYPES } from '../../src/resources/types.ts';
import { jsonApi, seedAccount, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

/** Operations that are not a JSON:API type's. */
const OTHER_SUBJECTS = new Set(['provider', 'facts', 'webhooks']);

const principal = (role: Role, scopes: Scope[]): Principal => ({
  credentialId: '00000000-0000-4000-8000-000000000001',
  organizationId: '00000000-0000-4000-8000-000000000002',
  workspaceId: '00000000-0000-4000-8000-000000000003',
  membershipId: '00000000-0000-4000-8000-000000000004',
  userId: '00000000-0000-4000-8000-000000000005',
  role,
  scopes: new Set(scopes),
});

function refusal(fn: () => void): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof AppError && err.code === 'forbidden', String(err));
    return err.detail;
  }
}

describe('the access table', () => {
  test('every JSON:API type has its read row, and every row names a type or another surface', () => {
    for (const type of RESOURCE_TYPES.values()) assert.doesNotThrow(() => typePermission(type.type, 'read'), type.type);
    for (const permission of Object.keys(ACCESS)) {
      const subject = permission.slice(0, permission.indexOf('.'));
      assert.ok(RESOURCE_TYPES.has(subject) || OTHER_SUBJECTS.has(subject), `${permission} names no type`);
    }
    // A type whose routes would need a row it lacks is refused when the routes are built.
    assert.throws(() => typePermission('no_such_type', 'read'), /no access rule for no_such_type\.read/);
    assert.throws(() => typePermission('organization', 'write'), /no access rule for organization\.write/);
  });

  test('a type with write routes has its write row, and its finer actions need the write scope too', () => {
    for (const type of ['data_model', 'data_model_field', 'external_connector', 'api_spec', 'workflow', 'workflow_run']) {
      assert.equal(ACCESS[typePermission(type, 'write')].scope, 'api_write', type);
    }
    for (const [permission, rule] of Object.entries(ACCESS)) {
      const [subject, action] = permission.split('.');
      if (action !== 'read' && action !== 'write' && RESOURCE_TYPES.has(subject!)) assert.equal(rule.scope, 'api_write', permission);
    }
  });

  test('authorize checks the scope first, then the role, in the words of today', () => {
    assert.equal(
      refusal(() => authorize(principal('owner', ['api_read']), 'data_model.write')),
      'This operation requires the api_write scope',
    );
    assert.equal(
      refusal(() => authorize(principal('member', ['api_read']), 'external_connector.create')),
      'This operation requires the api_write scope',
    );
    const texts: Record<string, string> = {
      'external_connector.create': 'Only an admin or owner may create external connectors',
      'external_connector.update': 'Only an admin or owner may change external connectors',
      'external_connector.verify': 'Only an admin or owner may verify external connectors',
      'workflow.save_http_request':
        "Only an admin or owner may save a workflow with http_request steps (they call out with an external connector's credentials)",
    };
    for (const [permission, detail] of Object.entries(texts)) {
      assert.equal(
        refusal(() => authorize(principal('member', ['api_write']), permission as Permission)),
        detail,
      );
      for (const role of ['admin', 'owner'] as const)
        assert.equal(
          refusal(() => authorize(principal(role, ['api_write']), permission as Permission)),
          undefined,
        );
    }
    assert.equal(
      refusal(() => authorize(principal('member', ['api_write']), 'facts.query')),
      'This operation requires the api_read scope',
    );
    assert.equal(permits(principal('member', ['webhooks']), 'webhooks.ingest'), true);
    assert.equal(permits(principal('owner', ['api_read', 'api_write']), 'webhooks.ingest'), false);
  });
});

describe('credentials: the caller role in the visibility clause', () => {
  let t: TestApp;
  let owner: Tenant;
  let member: Tenant;

  before(async () => {
    t = await startApp();
    owner = await seedTenant(t.deps);
    member = await seedAccount(t.deps, owner, { role: 'member', scopes: ['api_read'] });
  });
  after(async () => {
    await t.close();
  });

  const ids = (res: { body: any }) => (res.body.data as { id: string }[]).map((r) => r.id).sort();

  test('a member lists and reads only its own account; an admin or owner, the workspace’s; a role change counts on the next request', async () => {
    const ownerApi = jsonApi(t, await tokenFor(t, owner));
    const memberApi = jsonApi(t, await tokenFor(t, member));
    const P = '/api/json/v1/credentials';
    assert.deepEqual(ids(await ownerApi.get(P)), [owner.credentialId, member.credentialId].sort());
    assert.deepEqual(ids(await memberApi.get(P)), [member.credentialId]);
    assert.equal((await memberApi.get(`${P}/${member.credentialId}`)).status, 200);
    assert.equal((await memberApi.get(`${P}/${owner.credentialId}`)).status, 404);

    await t.deps.db.updateTable('org_memberships').set({ role: 'admin' }).where('id', '=', member.membershipId).execute();
    assert.deepEqual(ids(await memberApi.get(P)), [owner.credentialId, member.credentialId].sort());
    assert.equal((await memberApi.get(`${P}/${owner.credentialId}`)).status, 200);

    await t.deps.db.updateTable('org_memberships').set({ role: 'member' }).where('id', '=', member.membershipId).execute();
    assert.deepEqual(ids(await memberApi.get(P)), [member.credentialId]);
    assert.equal((await memberApi.get(`${P}/${owner.credentialId}`)).status, 404);
  });
});
