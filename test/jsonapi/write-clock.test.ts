/**
 * A write's updated_at is the deps clock's reading, not the machine's: each JSON:API write
 * that changes a row is made with the clock moved to an instant the machine is not at.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonApi, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

const API = '/api/json/v1';

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
});
after(() => t.close());

/** Runs `write` with the clock a fixed minute ahead (tokens stay valid), and returns that instant. */
async function atMovedClock(write: () => Promise<void>): Promise<Date> {
  const real = t.deps.clock;
  const at = Math.floor(real() / 1000) * 1000 + 60_000;
  t.deps.clock = () => at;
  try {
    await write();
  } finally {
    t.deps.clock = real;
  }
  return new Date(at);
}

async function updatedAt(table: 'data_models' | 'data_model_fields' | 'external_connectors' | 'workflows', id: string): Promise<Date> {
  const row = await t.deps.db.selectFrom(table).select('updated_at').where('id', '=', id).executeTakeFirstOrThrow();
  return row.updated_at;
}

test('PATCH of a data model, a field and a connector sets updated_at from the clock', async () => {
  const api = jsonApi(t, await tokenFor(t, tenant));
  const model = await api.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name: 'Orders', slug: 'clock-orders' } } });
  assert.equal(model.status, 201, model.text);
  const field = await api.post(`${API}/data_model_fields`, {
    data: { type: 'data_model_field', attributes: { data_model_id: model.body.data.id, name: 'order_id', type: 'string' } },
  });
  assert.equal(field.status, 201, field.text);
  const connector = await api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: 'Billing', auth_type: 'none', type: 'http', direction: 'outbound', config: { base_url: 'https://api.billing.example/v2' } },
    },
  });
  assert.equal(connector.status, 201, connector.text);

  const writes = [
    { table: 'data_models', path: 'data_models', type: 'data_model', id: model.body.data.id, attributes: { name: 'All orders' } },
    { table: 'data_model_fields', path: 'data_model_fields', type: 'data_model_field', id: field.body.data.id, attributes: { label: 'Order' } },
    { table: 'external_connectors', path: 'external_connectors', type: 'external_connector', id: connector.body.data.id, attributes: { name: 'Billing 2' } },
  ] as const;
  for (const w of writes) {
    const at = await atMovedClock(async () => {
      const res = await api.patch(`${API}/${w.path}/${w.id}`, { data: { type: w.type, id: w.id, attributes: w.attributes } });
      assert.equal(res.status, 200, res.text);
    });
    assert.deepEqual(await updatedAt(w.table, w.id), at, w.table);
  }
});

test('a save that changes a workflow sets its updated_at from the clock', async () => {
  const api = jsonApi(t, await tokenFor(t, tenant));
  const state = (workflowId: string | null, expression: string) => ({
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: tenant.organizationId,
        workflow_id: workflowId,
        wf_params: { name: 'Clock' },
        step_params: [{ key: 'shape', type: 'transform', config: { expression } }],
        trigger_params: [],
      },
    },
  });
  const created = await api.post(`${API}/workflows/save_builder_state`, state(null, 'payload'));
  assert.equal(created.status, 201, created.text);
  const id = created.body.data.id;
  const at = await atMovedClock(async () => {
    const saved = await api.post(`${API}/workflows/save_builder_state`, state(id, 'payload.order'));
    assert.equal(saved.status, 201, saved.text);
  });
  assert.deepEqual(await updatedAt('workflows', id), at);
});

test("the admin API's deactivation sets the membership's updated_at from the clock", async () => {
  const other = await seedTenant(t.deps);
  const at = await atMovedClock(async () => {
    const res = await fetch(`${t.url}/admin/v1/memberships/${other.membershipId}/deactivate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.adminToken}` },
    });
    assert.equal(res.status, 200, await res.text());
  });
  const row = await t.deps.db.selectFrom('org_memberships').select(['is_active', 'updated_at']).where('id', '=', other.membershipId).executeTakeFirstOrThrow();
  assert.deepEqual(row, { is_active: false, updated_at: at });
});
