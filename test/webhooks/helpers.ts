/** Shared setup of the webhook and workflow tests: a tenant, a data model, a saved workflow, deliveries. */
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { jsonApi, seedTenant, startApp, tokenFor, type ApiResponse, type StartOptions, type Tenant, type TestApp } from '../helpers/app.ts';

export const API = '/api/json/v1';

export interface Flow {
  t: TestApp;
  tenant: Tenant;
  api: ReturnType<typeof jsonApi>;
  /** A bearer token of the tenant's account (all scopes). */
  bearer: string;
}

export async function startFlow(env: Record<string, string> = {}, opts: StartOptions = { worker: true }): Promise<Flow> {
  const t = await startApp({ RUN_RETRY_SCHEDULE: '20ms', ...env }, opts);
  after(() => t.close());
  const tenant = await seedTenant(t.deps);
  const bearer = await tokenFor(t, tenant);
  return { t, tenant, api: jsonApi(t, bearer), bearer };
}

/** A data model `slug` with these fields (the first is the primary key). */
export async function createModel(f: Flow, slug: string, fields: Array<{ name: string; type: string; is_required?: boolean }>): Promise<string> {
  const m = await f.api.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name: slug, slug } } });
  assert.equal(m.status, 201, m.text);
  for (const [i, field] of fields.entries()) {
    const r = await f.api.post(`${API}/data_model_fields`, {
      data: { type: 'data_model_field', attributes: { data_model_id: m.body.data.id, is_primary_key: i === 0, ...field } },
    });
    assert.equal(r.status, 201, r.text);
  }
  return m.body.data.id;
}

export function builderState(
  f: Flow,
  attrs: {
    workflow_id?: string | null;
    lock_version?: string | null;
    is_new_version?: boolean;
    wf_params?: unknown;
    step_params: unknown[];
    on_failure_params?: unknown[];
    trigger_params?: unknown[];
  },
) {
  return {
    data: {
      type: 'workflow_builder_state',
      attributes: {
        is_new_version: false,
        organization_id: f.tenant.organizationId,
        wf_params: { name: 'Orders', is_active: true },
        trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId }],
        ...attrs,
      },
    },
  };
}

export async function save(f: Flow, attrs: Parameters<typeof builderState>[1]): Promise<ApiResponse> {
  return f.api.post(`${API}/workflows/save_builder_state`, builderState(f, attrs));
}

/** Saves and expects 201; returns the workflow document's data and the tokens of new triggers. */
export async function saveOk(f: Flow, attrs: Parameters<typeof builderState>[1]): Promise<{ workflow: any; tokens: Record<string, string> }> {
  const r = await save(f, attrs);
  assert.equal(r.status, 201, r.text);
  return { workflow: r.body.data, tokens: r.body.meta?.trigger_tokens ?? {} };
}

export interface Delivery {
  status: number;
  body: any;
  headers: Headers;
  text: string;
}

export async function deliver(
  f: Flow,
  path: string,
  body: string | Buffer | undefined,
  headers: Record<string, string> = {},
  bearer: string | null = f.bearer,
): Promise<Delivery> {
  const h: Record<string, string> = { 'content-type': 'application/json', ...headers };
  if (bearer !== null) h.authorization = `Bearer ${bearer}`;
  const res = await fetch(`${f.t.url}${path}`, { method: 'POST', headers: h, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** Polls the run until it is finished (succeeded or failed). */
export async function waitForRun(f: Flow, runId: string, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await f.api.get(`${API}/workflow_runs/${runId}`);
    assert.equal(r.status, 200, r.text);
    const a = r.body.data.attributes;
    if (a.status === 'succeeded' || a.status === 'failed') return r.body.data;
    if (Date.now() > deadline) assert.fail(`run ${runId} still ${a.status} after ${timeoutMs} ms: ${r.text}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
