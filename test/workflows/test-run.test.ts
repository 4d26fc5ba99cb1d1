/**
 * Test runs (POST workflows/:id/test_run): a version run on a given payload through the
 * worker's own steps against the dry effects (src/steps/effects.ts). They store nothing (every table a run could touch is
 * counted before and after), show the would-be facts with every validation problem, show
 * the request an http_request would send with the connector's secret redacted, and call the
 * provider only for a safe method when asked, without spending the connector's rate budget.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { assertJsonApiError, jsonApi, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, createModel, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from '../connectors/mock-provider.ts';
import { rateUse } from '../../src/connectors/rate.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', WEBHOOK_MAX_BODY_BYTES: '4096' }, {});
const mock: MockProvider = await mockProvider();
after(() => mock.close());
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'status', type: 'string', is_required: true },
]);
const KEY = `key_${'t'.repeat(40)}`;

const c = await f.api.post(`${API}/external_connectors`, {
  data: {
    type: 'external_connector',
    attributes: {
      name: 'Orders',
      direction: 'outbound',
      provider_slug: 'tributary-orders',
      secret: KEY,
      config: { base_url: `${mock.url}/v1`, rate_limit: { requests: 100, per_seconds: 3600 } },
    },
  },
});
assert.equal(c.status, 201, c.text);
const connectorId: string = c.body.data.id;

const TABLES = ['facts', 'fact_current', 'workflow_runs', 'delivery_guards', 'rate_windows', 'idempotency_keys', 'workflow_versions'] as const;

async function counts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) {
    const { rows } = await sql<{ n: string }>`select count(*)::text as n from ${sql.table(t)}`.execute(f.t.deps.db);
    out[t] = Number(rows[0]!.n);
  }
  return out;
}

async function workflow(steps: unknown[]): Promise<string> {
  const { workflow } = await saveOk(f, { step_params: steps });
  return workflow.id;
}

const testRunDoc = (attributes: Record<string, unknown>) => ({ data: { type: 'workflow_test_run', attributes } });
const testRun = (id: string, attributes: Record<string, unknown>, api = f.api) => api.post(`${API}/workflows/${id}/test_run`, testRunDoc(attributes));

const ORDER_STEPS = [
  { key: 'shape', type: 'transform', config: { expression: '{"order_id": payload.id, "status": payload.status}' } },
  { key: 'known', type: 'condition', config: { expression: 'steps.shape.order_id' } },
  {
    key: 'fetch',
    type: 'http_request',
    config: { connector_id: connectorId, method: 'GET', path: '/orders/{id}', params: { id: 'steps.shape.order_id' }, headers: { 'X-Trace': '"t-1"' } },
  },
  { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'steps.shape.order_id', status: 'steps.shape.status' } } },
  {
    key: 'notify',
    type: 'http_request',
    config: { connector_id: connectorId, method: 'POST', path: '/orders', body: '{"id": steps.shape.order_id, "seen": steps.fetch}' },
  },
];
const orders = await workflow(ORDER_STEPS);

describe('a test run', () => {
  it('stores nothing and shows the facts and the requests, the secret redacted', async () => {
    const before = await counts();
    const calls = mock.requests.length;
    const r = await testRun(orders, { payload: { id: 'o-1', status: 'paid' } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await counts(), before);
    assert.equal(mock.requests.length, calls, 'call "none" sends nothing');
    assert.ok(!r.text.includes(KEY), 'the secret is not in the answer');
    const d = r.body.data;
    assert.equal(d.type, 'workflow_test_run');
    assert.match(d.id, /^[0-9a-f-]{36}$/);
    const a = d.attributes;
    assert.equal(a.workflow_id, orders);
    assert.equal(a.workflow_version, 1);
    assert.equal(a.status, 'succeeded');
    assert.equal(a.outcome, 'completed');
    assert.equal(a.facts_would_write, 1);
    assert.equal(a.error, null);
    assert.deepEqual(
      a.steps.map((s: any) => [s.key, s.type, s.status]),
      ORDER_STEPS.map((s) => [s.key, s.type, 'succeeded']),
    );
    const [shape, known, fetch, store, notify] = a.steps;
    assert.deepEqual(shape.input, {
      payload: { id: 'o-1', status: 'paid' },
      steps: {},
      run: { id: d.id, attempt: 1 },
      trigger: { key: null },
      delivery: null,
      state: null,
    });
    assert.deepEqual(shape.output, { order_id: 'o-1', status: 'paid' });
    assert.equal(known.value, 'o-1');
    assert.equal(known.output, true);
    assert.equal(fetch.request.method, 'GET');
    assert.equal(fetch.request.url, `${mock.url}/v1/orders/o-1`);
    assert.equal(fetch.request.headers['x-api-key'], '[redacted]');
    assert.equal(fetch.request.headers['x-trace'], 't-1');
    assert.equal(fetch.output, null);
    assert.equal(fetch.response, undefined);
    assert.match(fetch.note, /not sent/i);
    assert.equal(store.input.steps.fetch, null, 'the next steps see null');
    assert.equal(store.facts.length, 1);
    assert.match(store.facts[0].observed_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(store.facts[0].data, { order_id: 'o-1', status: 'paid' });
    assert.equal(store.facts[0].entity_id, 'o-1');
    assert.deepEqual(store.problems, []);
    assert.equal(notify.request.method, 'POST');
    assert.deepEqual(notify.request.body, { id: 'o-1', seen: null });
    assert.equal(notify.request.headers['content-type'], 'application/json');
    assert.equal(notify.request.headers['idempotency-key'], `${d.id}:notify:0`);
  });

  it('with call "safe": one GET to the provider, no POST, no rate budget spent, nothing stored', async () => {
    mock.script('/v1/orders/o-2', { status: 200, body: { id: 'o-2', total: 12 } });
    const before = await counts();
    const calls = mock.requests.length;
    const r = await testRun(orders, { payload: { id: 'o-2', status: 'paid' }, call: 'safe' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await counts(), before);
    const sent = mock.requests.slice(calls);
    assert.deepEqual(
      sent.map((q) => `${q.method} ${q.path}`),
      ['GET /v1/orders/o-2'],
    );
    assert.equal(sent[0]!.headers['x-api-key'], KEY, 'the provider got the real key');
    assert.ok(!r.text.includes(KEY));
    const steps = r.body.data.attributes.steps;
    const fetch = steps.find((s: any) => s.key === 'fetch');
    assert.equal(fetch.response.status, 200);
    assert.deepEqual(fetch.response.body, { id: 'o-2', total: 12 });
    assert.deepEqual(fetch.output, fetch.response);
    const notify = steps.find((s: any) => s.key === 'notify');
    assert.deepEqual(notify.request.body, { id: 'o-2', seen: fetch.response });
    assert.equal(notify.output, null);
    assert.match(notify.note, /only GET, HEAD and OPTIONS/);
    // The test run took none of the budget.
    assert.equal((await rateUse(f.t.deps.connectors.counter, connectorId, { requests: 100, perSeconds: 3600 }, f.t.deps.clock())).used, 0);
  });

  it('a failing transform shows its error and the rest skipped with reasons', async () => {
    const id = await workflow([
      { key: 'a', type: 'transform', config: { expression: '$error("no amount in " & payload.id)' } },
      { key: 'b', type: 'transform', config: { expression: 'steps.a' } },
      { key: 'c', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.b' } },
    ]);
    const r = await testRun(id, { payload: { id: 'x-9' }, trigger_key: 'hook' });
    assert.equal(r.status, 200, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.status, 'failed');
    assert.equal(a.outcome, 'failed');
    assert.equal(a.facts_would_write, 0);
    assert.match(a.error, /Step a failed: .*no amount in x-9/);
    assert.equal(a.steps[0].status, 'failed');
    assert.match(a.steps[0].error, /no amount in x-9/);
    assert.deepEqual(a.steps[0].input.trigger, { key: 'hook' });
    for (const s of a.steps.slice(1)) {
      assert.equal(s.status, 'skipped');
      assert.equal(s.reason, 'step a failed');
      assert.equal(s.input, null);
    }
  });

  it('a false condition shows its value and stops the run', async () => {
    const id = await workflow([
      { key: 'any', type: 'condition', config: { expression: '$count(payload.items)' } },
      { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'payload.items[0]' } },
    ]);
    const r = await testRun(id, { payload: { items: [] } });
    assert.equal(r.status, 200, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.status, 'succeeded');
    assert.equal(a.outcome, 'stopped_at_condition');
    assert.equal(a.steps[0].value, 0);
    assert.equal(a.steps[0].output, false);
    assert.equal(a.steps[1].status, 'skipped');
    assert.equal(a.steps[1].reason, 'condition false at step any');
  });

  it('shows every validation problem with its item and pointer, and the would-be facts', async () => {
    const id = await workflow([
      {
        key: 'store',
        type: 'write_fact',
        config: { data_model_slug: 'orders', for_each: 'payload.items', mapping: { order_id: 'item.id', status: 'item.status' } },
      },
    ]);
    const before = await counts();
    const r = await testRun(id, { payload: { items: [{ id: 'a', status: 'paid' }, { id: 'b' }, { id: 'c', status: 7 }] } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await counts(), before);
    const a = r.body.data.attributes;
    assert.equal(a.status, 'failed');
    const store = a.steps[0];
    assert.equal(store.status, 'failed');
    assert.equal(store.facts.length, 3);
    assert.deepEqual(store.facts[1].data, { order_id: 'b' });
    assert.deepEqual(
      store.problems.map((p: any) => [p.item, p.pointer]),
      [
        [1, '/data/status'],
        [2, '/data/status'],
      ],
    );
    for (const p of store.problems) assert.equal(typeof p.detail, 'string');
  });

  it('stays bounded: a large input is a preview, at most 100 facts and problems are listed', async () => {
    const id = await workflow([
      { key: 'pad', type: 'transform', config: { expression: '$pad("", 20000, "y")' } },
      {
        key: 'shape',
        type: 'transform',
        // 150 items of about 340 bytes: within the step output cap (64 KiB), so the next step gets them all.
        config: { expression: '[0..149].{"id": "o-" & $string($), "status": $ % 2 = 0 ? "paid" : $, "filler": $pad("", 300, "x")}' },
      },
      {
        key: 'store',
        type: 'write_fact',
        config: { data_model_slug: 'orders', for_each: 'steps.shape', mapping: { order_id: 'item.id', status: 'item.status' } },
      },
    ]);
    const r = await testRun(id, { payload: {} });
    assert.equal(r.status, 200, r.text);
    const [, shape, store] = r.body.data.attributes.steps;
    assert.equal(shape.input_truncated, undefined);
    assert.equal(shape.output_truncated, undefined);
    // The store step's input holds pad's output and the 150 items of shape's output.
    assert.equal(store.input_truncated, true);
    assert.equal(typeof store.input, 'string');
    assert.ok(store.input_bytes > 65_536);
    assert.equal(store.facts.length, 100);
    assert.equal(store.facts_not_shown, 50);
    assert.equal(store.problems.length, 75);
    assert.equal(store.problems_not_shown, undefined);
  });

  it('runs the version asked for', async () => {
    const id = await workflow([{ key: 'v', type: 'transform', config: { expression: '"one"' } }]);
    const again = await f.api.get(`${API}/workflows/${id}`);
    const r2 = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: true,
          workflow_id: id,
          lock_version: again.body.data.attributes.lock_version,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'Orders', is_active: true },
          step_params: [{ key: 'v', type: 'transform', config: { expression: '"two"' } }],
          trigger_params: again.body.data.attributes.triggers.map((t: any) => ({
            id: t.id,
            key: t.key,
            type: t.type,
            service_account_id: f.tenant.credentialId,
          })),
        },
      },
    });
    assert.equal(r2.status, 201, r2.text);
    const current = await testRun(id, { payload: null });
    assert.equal(current.body.data.attributes.workflow_version, 2);
    assert.equal(current.body.data.attributes.steps[0].output, 'two');
    const first = await testRun(id, { payload: null, version: 1 });
    assert.equal(first.body.data.attributes.workflow_version, 1);
    assert.equal(first.body.data.attributes.steps[0].output, 'one');
    assertJsonApiError(await testRun(id, { payload: null, version: 9 }), 404, 'not_found');
  });
});

describe('who may test', () => {
  it("404 for another workspace's workflow and for an unknown id", async () => {
    const other = jsonApi(f.t, await tokenFor(f.t, await seedTenant(f.t.deps)));
    assertJsonApiError(await testRun(orders, { payload: {} }, other), 404, 'not_found');
    assertJsonApiError(await testRun('00000000-0000-4000-8000-000000000000', { payload: {} }), 404, 'not_found');
    assertJsonApiError(await testRun('nope', { payload: {} }), 404, 'not_found');
  });

  it('403 without api_write; a member may test without calling out, not with call "safe"', async () => {
    const reader = jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_read'));
    assertJsonApiError(await testRun(orders, { payload: {} }, reader), 403, 'forbidden');
    const member = jsonApi(f.t, await tokenFor(f.t, await seedAccount(f.t.deps, f.tenant, { role: 'member' })));
    const calls = mock.requests.length;
    assertJsonApiError(await testRun(orders, { payload: { id: 'o-3', status: 'paid' }, call: 'safe' }, member), 403, 'forbidden');
    const none = await testRun(orders, { payload: { id: 'o-3', status: 'paid' } }, member);
    assert.equal(none.status, 200, none.text);
    assert.ok(!none.text.includes(KEY));
    assert.equal(mock.requests.length, calls);
  });
});

describe('bad documents', () => {
  const post = (body: unknown) => f.api.post(`${API}/workflows/${orders}/test_run`, body);
  it('422 with a pointer (409 for another type, as every JSON:API write)', async () => {
    assertJsonApiError(await post(testRunDoc({})), 422, 'invalid_request', { pointer: '/data/attributes/payload' });
    assertJsonApiError(await post(testRunDoc({ payload: {}, call: 'all' })), 422, 'invalid_request', { pointer: '/data/attributes/call' });
    assertJsonApiError(await post(testRunDoc({ payload: {}, version: 'x' })), 422, 'invalid_request', { pointer: '/data/attributes/version' });
    assertJsonApiError(await post(testRunDoc({ payload: {}, extra: 1 })), 422, 'invalid_request', { pointer: '/data/attributes/extra' });
    assertJsonApiError(await post({ data: { type: 'workflow_run', attributes: { payload: {} } } }), 409, 'type_mismatch', { pointer: '/data/type' });
    assertJsonApiError(await post({ data: { type: 'workflow_test_run' } }), 422, 'invalid_request');
    assertJsonApiError(await post([]), 422, 'invalid_request');
    assertJsonApiError(await post(testRunDoc({ payload: { text: 'x'.repeat(5000) } })), 422, 'invalid_request', { pointer: '/data/attributes/payload' });
  });
});

describe('the request shown', () => {
  it('redacts every auth type and fetches no oauth2 token without call "safe"', async () => {
    const SECRET = `s3cr3t_${'q'.repeat(30)}`;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ auth_type: 'bearer_token' }, 'authorization'],
      [{ auth_type: 'basic_auth', config: { username: 'ops' } }, 'authorization'],
      [{ auth_type: 'oauth2', config: { token_url: `${mock.url}/oauth/token`, client_id: 'cid' } }, 'authorization'],
      [{ auth_type: 'hmac', secret: `whsec_${Buffer.from(SECRET).toString('base64')}` }, 'webhook-signature'],
    ];
    for (const [attrs, header] of cases) {
      const { config, ...rest } = attrs as { config?: Record<string, unknown>; auth_type: string };
      const made = await f.api.post(`${API}/external_connectors`, {
        data: {
          type: 'external_connector',
          attributes: { name: `C ${rest.auth_type}`, direction: 'outbound', secret: SECRET, ...rest, config: { base_url: `${mock.url}/v2`, ...config } },
        },
      });
      assert.equal(made.status, 201, made.text);
      const id = await workflow([
        { key: 'send', type: 'http_request', config: { connector_id: made.body.data.id, method: 'PUT', path: '/things/1', body: '{"n": 1}' } },
      ]);
      const calls = mock.requests.length;
      const r = await testRun(id, { payload: {}, call: 'safe' });
      assert.equal(r.status, 200, r.text);
      assert.equal(mock.requests.length, calls, `${rest.auth_type}: nothing sent`);
      const request = r.body.data.attributes.steps[0].request;
      assert.equal(request.headers[header], '[redacted]', `${rest.auth_type}: ${JSON.stringify(request.headers)}`);
      assert.equal(request.url, `${mock.url}/v2/things/1`);
      assert.deepEqual(request.body, { n: 1 });
      for (const spelling of [SECRET, Buffer.from(SECRET).toString('base64'), Buffer.from(`ops:${SECRET}`).toString('base64')])
        assert.ok(!r.text.includes(spelling), `${rest.auth_type}: the secret is not in the answer`);
    }
  });
});
