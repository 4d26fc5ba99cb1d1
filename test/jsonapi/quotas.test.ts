/**
 * Per-workspace quotas (quotas/quotas.ts), each set small: past it a create is 422
 * invalid_request naming the setting and its value; another workspace is not affected;
 * removing what is counted frees the slot; concurrent creates at the last slot pass once.
 * Also SCHEDULE_MIN_INTERVAL_SECONDS at save.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { assertJsonApiError, jsonApi, seedTenant, startApp, tokenFor, type ApiResponse, type Tenant } from '../helpers/app.ts';

const API = '/api/json/v1';
const SAVE = `${API}/workflows/save_builder_state`;
const t = await startApp({
  QUOTA_WORKFLOWS: '3',
  QUOTA_WEBHOOK_TRIGGERS: '4',
  QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW: '2',
  QUOTA_SCHEDULE_TRIGGERS: '2',
  QUOTA_CONNECTORS: '2',
  QUOTA_DATA_MODELS: '2',
  QUOTA_FIELDS_PER_DATA_MODEL: '2',
  SCHEDULE_MIN_INTERVAL_SECONDS: '60',
});
after(() => t.close());

const STEP = { key: 'shape', type: 'transform', config: { expression: 'payload' } };
const EVERY_MINUTE = '* * * * *';

async function tenant(): Promise<{ who: Tenant; api: ReturnType<typeof jsonApi> }> {
  const who = await seedTenant(t.deps);
  return { who, api: jsonApi(t, await tokenFor(t, who)) };
}

function saveDoc(who: Tenant, triggers: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) {
  const trigger_params = triggers.map((tr) => (tr.type === 'webhook' ? { service_account_id: who.credentialId, ...tr } : tr));
  return {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: who.organizationId,
        wf_params: { name: 'Orders', is_active: true },
        step_params: [STEP],
        trigger_params,
        ...extra,
      },
    },
  };
}

const hooks = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `hook${i}`, type: 'webhook' }));
const schedules = (n: number, cron = EVERY_MINUTE) => Array.from({ length: n }, (_, i) => ({ key: `tick${i}`, type: 'schedule', cron }));

/** A 422 invalid_request whose detail names the setting and its value. */
function assertQuota(res: ApiResponse, setting: string, value: number, pointer?: string): void {
  assertJsonApiError(res, 422, 'invalid_request', pointer === undefined ? undefined : { pointer });
  const detail: string = res.body.errors[0].detail;
  assert.ok(detail.includes(`(${setting} = ${value})`), detail);
}

describe('workflows (QUOTA_WORKFLOWS)', () => {
  it('the fourth new workflow is 422 naming the limit; saving an existing one still works; another workspace is not affected', async () => {
    const a = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await a.api.post(SAVE, saveDoc(a.who, []));
      assert.equal(r.status, 201, r.text);
      ids.push(r.body.data.id);
    }
    assertQuota(await a.api.post(SAVE, saveDoc(a.who, [])), 'QUOTA_WORKFLOWS', 3, '/data/attributes/workflow_id');
    const again = await a.api.post(SAVE, saveDoc(a.who, [], { workflow_id: ids[0], wf_params: { name: 'Renamed', is_active: true } }));
    assert.equal(again.status, 201, again.text);
    const b = await tenant();
    assert.equal((await b.api.post(SAVE, saveDoc(b.who, []))).status, 201);
  });

  it('concurrent creates at the last slot: exactly the free slots pass', async () => {
    const a = await tenant();
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, []))).status, 201);
    const answers = await Promise.all(Array.from({ length: 6 }, () => a.api.post(SAVE, saveDoc(a.who, []))));
    const statuses = answers.map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 201, 422, 422, 422, 422], answers.map((r) => r.text).join('\n'));
    const list = await a.api.get(`${API}/workflows`);
    assert.equal(list.body.data.length, 3);
  });
});

describe('triggers', () => {
  it('webhook triggers per workflow (QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW)', async () => {
    const a = await tenant();
    assertQuota(await a.api.post(SAVE, saveDoc(a.who, hooks(3))), 'QUOTA_WEBHOOK_TRIGGERS_PER_WORKFLOW', 2, '/data/attributes/trigger_params');
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, hooks(2)))).status, 201);
  });

  it('webhook triggers per workspace (QUOTA_WEBHOOK_TRIGGERS): removing one frees its slot; another workspace is not affected', async () => {
    const a = await tenant();
    const first = await a.api.post(SAVE, saveDoc(a.who, hooks(2)));
    assert.equal(first.status, 201, first.text);
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, hooks(2)))).status, 201);
    assertQuota(await a.api.post(SAVE, saveDoc(a.who, hooks(1))), 'QUOTA_WEBHOOK_TRIGGERS', 4, '/data/attributes/trigger_params');
    // The first workflow keeps one of its two hooks: the third workflow's hook fits.
    const kept = first.body.data.attributes.triggers.find((tr: { key: string }) => tr.key === 'hook0');
    const fewer = await a.api.post(
      SAVE,
      saveDoc(a.who, [{ key: 'hook0', type: 'webhook', id: kept.id }], {
        workflow_id: first.body.data.id,
        lock_version: first.body.data.attributes.lock_version,
      }),
    );
    assert.equal(fewer.status, 201, fewer.text);
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, hooks(1)))).status, 201);
    const b = await tenant();
    assert.equal((await b.api.post(SAVE, saveDoc(b.who, hooks(2)))).status, 201);
  });

  it('schedule triggers are counted apart (QUOTA_SCHEDULE_TRIGGERS)', async () => {
    const a = await tenant();
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, schedules(2)))).status, 201);
    assertQuota(await a.api.post(SAVE, saveDoc(a.who, schedules(1))), 'QUOTA_SCHEDULE_TRIGGERS', 2, '/data/attributes/trigger_params');
    // Webhook triggers have their own quota.
    assert.equal((await a.api.post(SAVE, saveDoc(a.who, hooks(1)))).status, 201);
    const b = await tenant();
    assert.equal((await b.api.post(SAVE, saveDoc(b.who, schedules(2)))).status, 201);
  });

  it('a schedule firing more often than SCHEDULE_MIN_INTERVAL_SECONDS is 422 at save, naming the setting', async () => {
    const a = await tenant();
    for (const cron of ['* * * * * *', '*/20 * * * * *', '0,30 * * * * *', '0,30 0 * * * *']) {
      const r = await a.api.post(SAVE, saveDoc(a.who, [{ key: 'tick', type: 'schedule', cron }]));
      assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/trigger_params/0/cron' });
      assert.match(r.body.errors[0].detail, /SCHEDULE_MIN_INTERVAL_SECONDS = 60/, cron);
    }
    for (const cron of ['* * * * *', '0 * * * * *', '0 0,1 * * * *', '0 3 * * *']) {
      const a = await tenant(); // one workspace each: its quotas of workflows and schedules are small
      const r = await a.api.post(SAVE, saveDoc(a.who, [{ key: 'tick', type: 'schedule', cron }]));
      assert.equal(r.status, 201, `${cron}: ${r.text}`);
    }
  });
});

describe('connectors, data models and fields', () => {
  const connector = (name: string) => ({
    data: {
      type: 'external_connector',
      attributes: { name, auth_type: 'api_key', type: 'http', direction: 'outbound', config: { base_url: 'https://api.billing.example/v2' } },
    },
  });
  const model = (slug: string) => ({ data: { type: 'data_model', attributes: { name: slug, slug } } });
  const field = (dataModelId: string, name: string) => ({
    data: { type: 'data_model_field', attributes: { data_model_id: dataModelId, name, type: 'string' } },
  });

  it('external connectors (QUOTA_CONNECTORS)', async () => {
    const a = await tenant();
    for (const name of ['One', 'Two']) assert.equal((await a.api.post(`${API}/external_connectors`, connector(name))).status, 201);
    assertQuota(await a.api.post(`${API}/external_connectors`, connector('Three')), 'QUOTA_CONNECTORS', 2);
    const b = await tenant();
    assert.equal((await b.api.post(`${API}/external_connectors`, connector('One'))).status, 201);
  });

  it('concurrent connector creates at the last slot: one passes', async () => {
    const a = await tenant();
    assert.equal((await a.api.post(`${API}/external_connectors`, connector('One'))).status, 201);
    const answers = await Promise.all(['Two', 'Three', 'Four', 'Five'].map((n) => a.api.post(`${API}/external_connectors`, connector(n))));
    assert.deepEqual(answers.map((r) => r.status).sort(), [201, 422, 422, 422], answers.map((r) => r.text).join('\n'));
  });

  it('data models (QUOTA_DATA_MODELS) and fields per data model (QUOTA_FIELDS_PER_DATA_MODEL)', async () => {
    const a = await tenant();
    const m = await a.api.post(`${API}/data_models`, model('orders'));
    assert.equal(m.status, 201, m.text);
    assert.equal((await a.api.post(`${API}/data_models`, model('refunds'))).status, 201);
    assertQuota(await a.api.post(`${API}/data_models`, model('payouts')), 'QUOTA_DATA_MODELS', 2);
    for (const name of ['order_id', 'amount']) assert.equal((await a.api.post(`${API}/data_model_fields`, field(m.body.data.id, name))).status, 201);
    assertQuota(
      await a.api.post(`${API}/data_model_fields`, field(m.body.data.id, 'currency')),
      'QUOTA_FIELDS_PER_DATA_MODEL',
      2,
      '/data/attributes/data_model_id',
    );
    const b = await tenant();
    assert.equal((await b.api.post(`${API}/data_models`, model('orders'))).status, 201);
  });
});
