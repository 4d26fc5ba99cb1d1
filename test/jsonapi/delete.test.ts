/**
 * DELETE on the JSON:API surface (docs/api.md, "Deleting"): 204 then 404 for each deletable
 * type; the roles of the type's writes; another workspace's id is 404; a deleted workflow's
 * triggers answer 404 at once and its schedules never fire again, its runs stay readable;
 * a connector, data model, field or specification still used by a saved version of a
 * workflow is 409 naming the workflows; a data model's facts, fields and widgets go with it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as admin from '../../src/admin/service.ts';
import { assertJsonApiError, jsonApi, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, createModel, deliver, save, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { fireTicks, loadSchedules } from '../../src/triggers/schedule.sql.ts';
import { startSchedules } from '../../src/worker/schedules.ts';
import { countWorkflows } from '../../src/quotas/quotas.sql.ts';
import { buildOpenApiDocument } from '../../src/http/jsonapi/openapi.ts';
import { RESOURCE_TYPES } from '../../src/resources/types.ts';

const f: Flow = await startFlow({ SCHEDULE_MIN_INTERVAL_SECONDS: '1' });
const del = (path: string, headers?: Record<string, string>, api = f.api) => api.request('DELETE', path, undefined, headers);
const echo = { key: 'echo', type: 'transform', config: { expression: 'payload' } };

async function connector(attrs: Record<string, unknown> = {}): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: 'Billing', auth_type: 'none', type: 'http', direction: 'outbound', config: { base_url: 'https://api.billing.example/v2' }, ...attrs },
    },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

async function inbound(): Promise<string> {
  return connector({ name: 'Shop hooks', auth_type: 'hmac', direction: 'inbound', secret: `whsec_${'s'.repeat(40)}`, config: undefined });
}

async function spec(connectorId: string | null = null): Promise<string> {
  const raw = JSON.stringify({
    openapi: '3.1.0',
    info: { title: 'T', version: '1' },
    paths: { '/x': { get: { operationId: 'getX', responses: { 200: { description: 'ok' } } } } },
  });
  const r = await f.api.post(`${API}/api_specs`, {
    data: { type: 'api_spec', attributes: { name: 'T', format: 'json', raw_document: raw, external_connector_id: connectorId } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

async function widget(dataModelId: string): Promise<string> {
  const w = await admin.createWidget(f.t.deps.db, { workspace_id: f.tenant.workspaceId, data_model_id: dataModelId, kind: 'table' });
  return w.id;
}

/** 204 with no body, then the id reads 404 and deletes 404. */
async function deletedOnce(path: string): Promise<void> {
  const r = await del(path);
  assert.equal(r.status, 204, r.text);
  assert.equal(r.text, '');
  assertJsonApiError(await f.api.get(path), 404, 'not_found');
  assertJsonApiError(await del(path), 404, 'not_found');
}

describe('204, then 404', () => {
  it('for each of the six types', async () => {
    const { workflow } = await saveOk(f, { step_params: [echo] });
    const modelId = await createModel(f, 'plain', [
      { name: 'id', type: 'string' },
      { name: 'note', type: 'string' },
    ]);
    const fields = await f.api.get(`${API}/data_model_fields?filter[data_model_id]=${modelId}&sort=name`);
    const note = fields.body.data.find((x: any) => x.attributes.name === 'note');
    const widgetId = await widget(modelId);
    const specId = await spec();
    const connectorId = await connector();
    await deletedOnce(`${API}/workflows/${workflow.id}`);
    await deletedOnce(`${API}/data_model_fields/${note.id}`);
    await deletedOnce(`${API}/dashboard_widgets/${widgetId}`);
    await deletedOnce(`${API}/data_models/${modelId}`);
    await deletedOnce(`${API}/api_specs/${specId}`);
    await deletedOnce(`${API}/external_connectors/${connectorId}`);
    assert.ok(!(await f.api.get(`${API}/workflows`)).body.data.some((w: any) => w.id === workflow.id), 'not listed');
  });

  it('a malformed id is 404, as on reads; organizations and memberships have no DELETE (405 with Allow)', async () => {
    assertJsonApiError(await del(`${API}/workflows/not-an-id`), 404, 'not_found');
    const org = await del(`${API}/organizations/${f.tenant.organizationId}`);
    assertJsonApiError(org, 405, 'method_not_allowed');
    assert.equal(org.headers.get('allow'), 'GET, HEAD');
    assertJsonApiError(await del(`${API}/org_memberships/${f.tenant.membershipId}`), 405, 'method_not_allowed');
    assert.equal((await f.api.get(`${API}/org_memberships/${f.tenant.membershipId}`)).status, 200);
  });

  it('Idempotency-Key: a retry with the same key replays the 204; without it the second DELETE is 404', async () => {
    const { workflow } = await saveOk(f, { step_params: [echo] });
    const path = `${API}/workflows/${workflow.id}`;
    const first = await del(path, { 'idempotency-key': `del-${workflow.id}` });
    assert.equal(first.status, 204);
    const again = await del(path, { 'idempotency-key': `del-${workflow.id}` });
    assert.equal(again.status, 204);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assertJsonApiError(await del(path, { 'idempotency-key': `other-${workflow.id}` }), 404, 'not_found');
  });

  it('the published OpenAPI document lists DELETE for exactly the deletable types', () => {
    const doc = buildOpenApiDocument({ apiSpecMaxBytes: 1_000_000 } as never) as { paths: Record<string, Record<string, any>> };
    const deletable = [...RESOURCE_TYPES.values()].filter((t) => t.deletable).map((t) => t.path);
    assert.deepEqual(deletable.sort(), ['api_specs', 'dashboard_widgets', 'data_model_fields', 'data_models', 'external_connectors', 'workflows']);
    for (const t of RESOURCE_TYPES.values()) {
      const op = doc.paths[`${API}/${t.path}/{id}`]?.delete;
      assert.equal(op !== undefined, t.deletable === true, t.type);
      if (op) assert.deepEqual(Object.keys(op.responses).sort(), ['204', '400', '401', '403', '404', '406', '409', '429', '503']);
    }
  });
});

describe('who may', () => {
  it('a member deletes workflows, models, fields and specs, not connectors or widgets; api_read alone deletes nothing', async () => {
    const member = jsonApi(f.t, await tokenFor(f.t, await seedAccount(f.t.deps, f.tenant, { role: 'member' })));
    const connectorId = await connector();
    const modelId = await createModel(f, 'member-model', [{ name: 'id', type: 'string' }]);
    const widgetId = await widget(modelId);
    const c = await del(`${API}/external_connectors/${connectorId}`, undefined, member);
    assertJsonApiError(c, 403, 'forbidden');
    assert.match(c.body.errors[0].detail, /admin or owner/);
    assertJsonApiError(await del(`${API}/dashboard_widgets/${widgetId}`, undefined, member), 403, 'forbidden');
    const reader = jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_read'));
    const { workflow } = await saveOk(f, { step_params: [echo] });
    const r = await del(`${API}/workflows/${workflow.id}`, undefined, reader);
    assertJsonApiError(r, 403, 'forbidden');
    assert.match(r.body.errors[0].detail, /api_write/);
    assert.equal((await f.api.get(`${API}/workflows/${workflow.id}`)).status, 200, 'still there');
    assert.equal((await del(`${API}/workflows/${workflow.id}`, undefined, member)).status, 204);
    assert.equal((await del(`${API}/data_models/${modelId}`, undefined, member)).status, 204);
    assert.equal((await f.api.get(`${API}/external_connectors/${connectorId}`)).status, 200);
  });

  it("another workspace's ids are 404, and stay", async () => {
    const stranger = jsonApi(f.t, await tokenFor(f.t, await seedTenant(f.t.deps)));
    const { workflow } = await saveOk(f, { step_params: [echo] });
    const connectorId = await connector();
    const modelId = await createModel(f, 'not-yours', [{ name: 'id', type: 'string' }]);
    const widgetId = await widget(modelId);
    const specId = await spec();
    const fieldId = (await f.api.get(`${API}/data_model_fields?filter[data_model_id]=${modelId}`)).body.data[0].id;
    for (const path of [
      `workflows/${workflow.id}`,
      `external_connectors/${connectorId}`,
      `data_models/${modelId}`,
      `data_model_fields/${fieldId}`,
      `dashboard_widgets/${widgetId}`,
      `api_specs/${specId}`,
    ]) {
      assertJsonApiError(await del(`${API}/${path}`, undefined, stranger), 404, 'not_found');
      assert.equal((await f.api.get(`${API}/${path}`)).status, 200, path);
    }
  });
});

describe('a deleted workflow', () => {
  it('its trigger answers 404 at once (also from the admission cache); its runs stay readable; its slot in the quota is freed', async () => {
    const { workflow, tokens } = await saveOk(f, { wf_params: { name: 'Throwaway', is_active: true }, step_params: [echo] });
    const hook = `/api/v1/webhooks/${tokens.hook}`;
    const d1 = await deliver(f, hook, '{"n":1}');
    assert.equal(d1.status, 202, d1.text);
    // A second delivery: its admission is now in this process's cache.
    const d2 = await deliver(f, hook, '{"n":2}');
    assert.equal(d2.status, 202, d2.text);
    await waitForRun(f, d1.body.workflow_run_id);
    const before = await countWorkflows(f.t.deps.db, f.tenant.workspaceId, 10_000);
    assert.equal((await del(`${API}/workflows/${workflow.id}`)).status, 204);
    const gone = await deliver(f, hook, '{"n":3}');
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { error: 'Trigger not found' });
    assert.equal(await countWorkflows(f.t.deps.db, f.tenant.workspaceId, 10_000), before - 1);
    const over = await save(f, { workflow_id: workflow.id, step_params: [echo] });
    assertJsonApiError(over, 404, 'not_found', { pointer: '/data/attributes/workflow_id' });

    // The run names its workflow's id; include= treats the deleted workflow as any row the caller cannot see.
    const run = await f.api.get(`${API}/workflow_runs/${d1.body.workflow_run_id}`);
    assert.equal(run.status, 200, run.text);
    assert.equal(run.body.data.attributes.workflow_id, workflow.id);
    assert.deepEqual(run.body.data.relationships.workflow.data, { type: 'workflow', id: workflow.id });
    const included = await f.api.get(`${API}/workflow_runs/${d1.body.workflow_run_id}?include=workflow`);
    assert.equal(included.body.data.relationships.workflow.data, null);
    assert.deepEqual(included.body.included ?? [], [], 'the deleted workflow is not included');
    const listed = await f.api.get(`${API}/workflow_runs?filter[workflow_id]=${workflow.id}`);
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.body.data.length, 2);
    const second = await waitForRun(f, d2.body.workflow_run_id);
    assert.equal(second.attributes.status, 'succeeded', 'a run accepted before the delete finishes');
    const replay = await f.api.post(`${API}/workflow_runs/${d1.body.workflow_run_id}/replay`, undefined);
    assertJsonApiError(replay, 409, 'conflict');
    assert.match(replay.body.errors[0].detail, /workflow of this run was deleted/);
    // A bulk replay leaves its runs out, and says there is nothing more.
    const bulk = await f.api.post(`${API}/workflow_runs/replay?filter[workflow_id]=${workflow.id}`, { meta: {} });
    assert.equal(bulk.status, 200, bulk.text);
    assert.deepEqual(bulk.body.meta, { replayed: 0, has_more: false });
    const testRun = await f.api.post(`${API}/workflows/${workflow.id}/test_run`, { data: { type: 'workflow_test_run', attributes: { payload: {} } } });
    assertJsonApiError(testRun, 404, 'not_found');
  });

  it('its schedule never fires again, on any process', async (t) => {
    const loop = startSchedules(f.t.deps);
    t.after(() => loop.stop());
    const { workflow } = await saveOk(f, {
      step_params: [echo],
      trigger_params: [{ key: 'tick', type: 'schedule', cron: '* * * * * *' }],
    });
    const runs = async () => (await f.t.deps.db.selectFrom('workflow_runs').select('id').where('workflow_id', '=', workflow.id).execute()).length;
    const deadline = Date.now() + 15_000;
    while ((await runs()) === 0) {
      if (Date.now() > deadline) assert.fail('the schedule never fired');
      await sleep(50);
    }
    const triggerId = workflow.attributes.triggers[0].id;
    assert.equal((await del(`${API}/workflows/${workflow.id}`)).status, 204);
    const made = await runs();
    assert.ok(!(await loadSchedules(f.t.deps.db)).some((s) => s.id === triggerId), 'no process loads it again');
    // A process that loaded it before the delete tries a tick of it: nothing is made.
    const tick = new Date(Math.ceil(Date.now() / 1000) * 1000 + 1000);
    const fired = await fireTicks(
      f.t.deps.db,
      [
        {
          runId: crypto.randomUUID(),
          triggerId,
          cron: '* * * * * *',
          timezone: 'UTC',
          tick,
          payloadJson: '{}',
          trace: { traceparent: null, tracestate: null },
        },
      ],
      new Date(),
      3,
    );
    assert.equal(fired.size, 0);
    await sleep(2500);
    assert.equal(await runs(), made, 'no tick after the delete');
  });
});

describe('409 while a saved workflow uses it', () => {
  it('a connector of an http_request step or of a trigger, naming the workflows; free once they are deleted', async () => {
    const out = await connector();
    const inc = await inbound();
    const caller = await saveOk(f, {
      wf_params: { name: 'Calls billing', is_active: true },
      step_params: [{ key: 'call', type: 'http_request', config: { connector_id: out, method: 'GET', path: '/ping' } }],
    });
    // A later version without the step: the first version still uses the connector (a replay may run it).
    await saveOk(f, { workflow_id: caller.workflow.id, is_new_version: true, wf_params: { name: 'Calls billing', is_active: true }, step_params: [echo] });
    const r = await del(`${API}/external_connectors/${out}`);
    assertJsonApiError(r, 409, 'conflict');
    assert.match(r.body.errors[0].detail, new RegExp(`"Calls billing" \\(${caller.workflow.id}\\)`));
    const hooked = await saveOk(f, {
      wf_params: { name: 'Shop in', is_active: true },
      step_params: [echo],
      trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: inc }],
    });
    const ri = await del(`${API}/external_connectors/${inc}`);
    assertJsonApiError(ri, 409, 'conflict');
    assert.match(ri.body.errors[0].detail, new RegExp(`"Shop in" \\(${hooked.workflow.id}\\)`));
    assert.equal((await del(`${API}/workflows/${caller.workflow.id}`)).status, 204);
    assert.equal((await del(`${API}/workflows/${hooked.workflow.id}`)).status, 204);
    assert.equal((await del(`${API}/external_connectors/${out}`)).status, 204);
    assert.equal((await del(`${API}/external_connectors/${inc}`)).status, 204);
  });

  it("a connector's specification stays, detached; the last specification of a connector called by operation_ref is 409", async () => {
    const c = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: {
          name: 'Orders',
          direction: 'outbound',
          provider_slug: 'tributary-orders',
          secret: `key_${'r'.repeat(40)}`,
          config: { base_url: 'https://orders.example/v1' },
        },
      },
    });
    assert.equal(c.status, 201, c.text);
    const specs = await f.api.get(`${API}/api_specs?filter[external_connector_id]=${c.body.data.id}`);
    assert.equal(specs.body.data.length, 1, specs.text);
    const specId = specs.body.data[0].id;
    const { workflow } = await saveOk(f, {
      wf_params: { name: 'Orders out', is_active: true },
      step_params: [
        {
          key: 'call',
          type: 'http_request',
          config: { connector_id: c.body.data.id, operation_ref: 'createOrder', body: '{"customer_id": "c", "items": []}' },
        },
      ],
    });
    const r = await del(`${API}/api_specs/${specId}`);
    assertJsonApiError(r, 409, 'conflict');
    assert.match(r.body.errors[0].detail, /"Orders out"/);
    assert.equal((await del(`${API}/workflows/${workflow.id}`)).status, 204);
    assert.equal((await del(`${API}/external_connectors/${c.body.data.id}`)).status, 204);
    const kept = await f.api.get(`${API}/api_specs/${specId}`);
    assert.equal(kept.status, 200);
    assert.equal(kept.body.data.attributes.external_connector_id, null);
  });

  it('a data model of a write_fact step, and a field its mapping names; once free, its facts, fields and widgets go with it and the slug is free', async () => {
    const modelId = await createModel(f, 'orders', [
      { name: 'order_id', type: 'string' },
      { name: 'amount', type: 'float' },
      { name: 'note', type: 'string' },
    ]);
    const fields = (await f.api.get(`${API}/data_model_fields?filter[data_model_id]=${modelId}`)).body.data as any[];
    const byName = (n: string) => fields.find((x) => x.attributes.name === n).id;
    const indexed = await f.api.patch(`${API}/data_model_fields/${byName('amount')}`, {
      data: { type: 'data_model_field', id: byName('amount'), attributes: { is_indexed: true } },
    });
    assert.equal(indexed.status, 200, indexed.text);
    const widgetId = await widget(modelId);
    const { workflow, tokens } = await saveOk(f, {
      wf_params: { name: 'Orders in', is_active: true },
      step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id', amount: 'payload.amount' } } }],
    });
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{"id":"o1","amount":3}');
    assert.equal(d.status, 202, d.text);
    assert.equal((await waitForRun(f, d.body.workflow_run_id)).attributes.status, 'succeeded');

    const m = await del(`${API}/data_models/${modelId}`);
    assertJsonApiError(m, 409, 'conflict');
    assert.match(m.body.errors[0].detail, new RegExp(`"Orders in" \\(${workflow.id}\\)`));
    assertJsonApiError(await del(`${API}/data_model_fields/${byName('amount')}`), 409, 'conflict');
    const pk = await del(`${API}/data_model_fields/${byName('order_id')}`);
    assertJsonApiError(pk, 409, 'conflict');
    assert.equal((await del(`${API}/data_model_fields/${byName('note')}`)).status, 204, 'a field no mapping names');

    assert.equal((await del(`${API}/workflows/${workflow.id}`)).status, 204);
    const pkFree = await del(`${API}/data_model_fields/${byName('order_id')}`);
    assertJsonApiError(pkFree, 409, 'conflict');
    assert.match(pkFree.body.errors[0].detail, /primary-key field of a data model with facts/);
    const db = f.t.deps.db;
    assert.equal((await db.selectFrom('facts').select('id').where('data_model_id', '=', modelId).execute()).length, 1);
    const factQuery = async () => {
      const res = await fetch(`${f.t.url}/api/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ factQuery(dataModelSlug: "orders") { count } }' }),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    // Read once, so this process remembers the model (graphql/model-cache.ts).
    assert.equal((await factQuery()).body.data.factQuery.count, 1);
    assert.equal((await del(`${API}/data_models/${modelId}`)).status, 204);
    const after = await factQuery();
    assert.ok(after.status < 500, JSON.stringify(after.body));
    assert.ok(after.body.errors?.length > 0, `a deleted model is not read from the cache: ${JSON.stringify(after.body)}`);
    assert.equal((await db.selectFrom('facts').select('id').where('data_model_id', '=', modelId).execute()).length, 0);
    assert.equal((await db.selectFrom('fact_current').select('fact_id').where('data_model_id', '=', modelId).execute()).length, 0);
    assert.equal((await db.selectFrom('data_model_fields').select('id').where('data_model_id', '=', modelId).execute()).length, 0);
    assertJsonApiError(await f.api.get(`${API}/dashboard_widgets/${widgetId}`), 404, 'not_found');
    const { rows } = await (
      await import('kysely')
    ).sql<{
      n: number;
    }>`select count(*)::int as n from pg_indexes where indexname like ${`fact_current_field_${byName('amount').replaceAll('-', '')}%`}`.execute(db);
    assert.equal(rows[0]!.n, 0, 'the indexed field’s indexes are dropped');
    // The run of the deleted workflow is still readable, and the slug can be taken again.
    assert.equal((await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`)).status, 200);
    const again = await createModel(f, 'orders', [{ name: 'order_id', type: 'string' }]);
    assert.notEqual(again, modelId);
  });
});
