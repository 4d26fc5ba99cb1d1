/**
 * Services take the database or a transaction first, so a caller composes several in one
 * transaction: all of it commits, or none of it does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Principal } from '../../src/auth/principal.ts';
import * as admin from '../../src/admin/service.ts';
import { createDataModel } from '../../src/resources/data_models/service.ts';
import { createField } from '../../src/resources/data_model_fields/service.ts';
import { seedTenant, startApp, type Tenant } from '../helpers/app.ts';

const t = await startApp();
test.after(() => t.close());
const tenant = await seedTenant(t.deps);

function principalOf(x: Tenant): Principal {
  return {
    credentialId: x.credentialId,
    organizationId: x.organizationId,
    workspaceId: x.workspaceId,
    membershipId: x.membershipId,
    userId: x.userId,
    role: 'owner',
    scopes: new Set(['api_read', 'api_write']),
  };
}

const modelsNamed = (slug: string) =>
  t.deps.db.selectFrom('data_models').select('id').where('workspace_id', '=', tenant.workspaceId).where('slug', '=', slug).execute();

test('a data model and its field created in one transaction that fails leave nothing behind', async () => {
  const principal = principalOf(tenant);
  await assert.rejects(
    t.deps.db.transaction().execute(async (trx) => {
      const model = await createDataModel(trx, principal, { name: 'Orders', slug: 'rolled-back' });
      await createField(trx, principal, { data_model_id: model.id, name: 'order_id', type: 'string', is_primary_key: true });
      assert.equal((await trx.selectFrom('data_model_fields').select('id').where('data_model_id', '=', model.id).execute()).length, 1, 'seen inside');
      throw new Error('the caller gives up');
    }),
    /the caller gives up/,
  );
  assert.deepEqual(await modelsNamed('rolled-back'), []);
});

test('the same two services in a transaction that commits: both rows exist', async () => {
  const principal = principalOf(tenant);
  const model = await t.deps.db.transaction().execute(async (trx) => {
    const m = await createDataModel(trx, principal, { name: 'Orders', slug: 'committed' });
    await createField(trx, principal, { data_model_id: m.id, name: 'order_id', type: 'string', is_primary_key: true });
    return m;
  });
  assert.equal((await modelsNamed('committed')).length, 1);
  const fields = await t.deps.db.selectFrom('data_model_fields').select('name').where('data_model_id', '=', model.id).execute();
  assert.deepEqual(fields, [{ name: 'order_id' }]);
});

test('admin services compose too: an organization whose workspace fails is not created', async () => {
  await assert.rejects(
    t.deps.db.transaction().execute(async (trx) => {
      const org = await admin.createOrganization(trx, { name: 'Half made', domain: 'half-made.example' });
      await admin.createWorkspace(trx, { organization_id: org.id, name: '' });
    }),
    (err: { code?: string }) => err.code === 'invalid_request',
  );
  const orgs = await t.deps.db.selectFrom('organizations').select('id').where('domain', '=', 'half-made.example').execute();
  assert.deepEqual(orgs, []);
});
