/**
 * @tributary/client against a real server: token exchange (one in flight) and renewal, one
 * re-exchange after the server stops taking its token, pages, typed create/update/get/delete, a test
 * run and a replay, factQuery, and webhook sending with the same delivery id.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createClient, TributaryError, type ClientOptions } from '../../packages/client/src/index.ts';
import { adminCall } from '../helpers/app.ts';
import { mockProvider, type MockProvider } from '../connectors/mock-provider.ts';
import { createModel, saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
const { t, tenant } = f;

/** A client whose clock the test moves, and a log of the requests it made (method and path). */
function client(extra: Partial<ClientOptions> = {}) {
  let offset = 0;
  const sent: Array<{ method: string; path: string; headers: Headers }> = [];
  const c = createClient({
    baseUrl: t.url,
    clientId: tenant.clientId,
    clientSecret: tenant.clientSecret,
    clock: () => Date.now() + offset,
    fetch: (input, init) => {
      sent.push({ method: init?.method ?? 'GET', path: new URL(String(input)).pathname, headers: new Headers(init?.headers) });
      return fetch(input, init);
    },
    ...extra,
  });
  return { c, sent, advance: (ms: number) => (offset += ms) };
}

/** Polls the run through the SDK (the tests revoke tokens, so the shared bearer of the helpers would be refused). */
async function waitForRun(c: ReturnType<typeof createClient>, id: string) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const run = (await c.get('workflow_runs', id)).data;
    if (run.attributes?.status === 'succeeded' || run.attributes?.status === 'failed') return run;
    if (Date.now() > deadline) assert.fail(`run ${id} still ${run.attributes?.status}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const exchangesIn = (sent: Array<{ path: string }>) => sent.filter((s) => s.path === '/api/v1/oauth/token').length;

await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'amount', type: 'float', is_required: true },
]);
const saved = await saveOk(f, {
  step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', mapping: { order_id: 'payload.id', amount: 'payload.amount' } } }],
});
const triggerToken: string = saved.tokens.hook!;
const workflowId: string = saved.workflow.id;

describe('tokens', () => {
  it('concurrent calls share one exchange; renewal after 80% of the lifetime, a new exchange after expiry', async () => {
    const { c, sent, advance } = client();
    const pages = await Promise.all(Array.from({ length: 8 }, () => c.list('data_models')));
    assert.equal(pages.length, 8);
    assert.equal(exchangesIn(sent), 1);
    assert.equal(c.exchanges, 1);
    // TOKEN_TTL_SECONDS is 900: past 80% the token still serves while a renewal runs in the background.
    const bearer = () => sent.at(-1)!.headers.get('authorization');
    const firstToken = bearer();
    advance(0.8 * 900_000 + 1000);
    await c.list('data_models');
    assert.equal(c.exchanges, 2);
    assert.equal(bearer(), firstToken, 'the old token serves while the renewal runs');
    // The renewed token is used once its exchange is done (bounded: the exchange is one local request).
    for (let i = 0; i < 200 && bearer() === firstToken; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      await c.list('data_models');
    }
    assert.notEqual(bearer(), firstToken);
    assert.equal(c.exchanges, 2);
    advance(900_000 + 1000);
    await Promise.all(Array.from({ length: 5 }, () => c.list('data_models')));
    assert.equal(c.exchanges, 3);
    assert.equal(exchangesIn(sent), 3);
  });

  it('a token the server stopped taking (401) is exchanged once more and the call goes on', async () => {
    const { c, sent } = client();
    await c.list('data_models');
    const revoked = await adminCall(t, 'PATCH', `/credentials/${tenant.credentialId}`, { revoke_tokens: true });
    assert.equal(revoked.status, 200, revoked.text);
    const page = await c.list('data_models');
    assert.ok(page.data.length >= 1);
    assert.equal(c.exchanges, 2);
    assert.deepEqual(
      sent.map((s) => `${s.method} ${s.path}`),
      ['POST /api/v1/oauth/token', 'GET /api/json/v1/data_models', 'GET /api/json/v1/data_models', 'POST /api/v1/oauth/token', 'GET /api/json/v1/data_models'],
    );
  });

  it('a refused account is a TributaryError with the OAuth code, never the secret', async () => {
    const { c } = client({ clientSecret: 'tbcs_wrong-secret-value' });
    await assert.rejects(c.list('data_models'), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 401);
      assert.equal(err.code, 'invalid_client');
      assert.ok(!err.message.includes('tbcs_wrong-secret-value'));
      return true;
    });
  });
});

describe('JSON:API resources', () => {
  it('creates, reads and updates a data model, typed; a bad one is a TributaryError with a pointer and a request id', async () => {
    const { c } = client();
    const created = await c.create('data_models', { type: 'data_model', attributes: { name: 'Shipments', slug: 'shipments' } });
    assert.equal(created.data.type, 'data_model');
    assert.equal(created.data.attributes?.slug, 'shipments');
    const id = created.data.id;
    const updated = await c.update('data_models', id, { type: 'data_model', attributes: { description: 'Parcels' } });
    assert.equal(updated.data.attributes?.description, 'Parcels');
    const read = await c.get('data_models', id);
    assert.equal(read.data.attributes?.name, 'Shipments');
    assert.equal(read.data.attributes?.description, 'Parcels');
    await assert.rejects(c.create('data_models', { type: 'data_model', attributes: { name: 'x', slug: 'Bad Slug' } }), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 422);
      assert.equal(err.code, 'invalid_request');
      assert.equal(err.pointer, '/data/attributes/slug');
      assert.match(err.requestId ?? '', /.+/);
      return true;
    });
    await assert.rejects(c.get('data_models', '00000000-0000-4000-8000-000000000000'), { status: 404, code: 'not_found' });
    assert.equal(await c.delete('data_models', id, { idempotencyKey: `delete-${id}` }), undefined);
    // The same call retried (its one key) replays the 204; a new call is 404.
    assert.equal(await c.delete('data_models', id, { idempotencyKey: `delete-${id}` }), undefined);
    await assert.rejects(c.delete('data_models', id), { status: 404, code: 'not_found' });
    await assert.rejects(c.get('data_models', id), { status: 404, code: 'not_found' });
  });

  it('iterates every page of a list, following links.next', async () => {
    const { c, sent } = client();
    for (let i = 0; i < 7; i++) await c.create('data_models', { type: 'data_model', attributes: { name: `Model ${i}`, slug: `model-${i}` } });
    const seen: string[] = [];
    for await (const m of c.iterate('data_models', { filter: { slug: { contains: 'model-' } }, sort: 'slug', page: { limit: 3 } }))
      seen.push(m.attributes?.slug ?? '');
    assert.deepEqual(seen, ['model-0', 'model-1', 'model-2', 'model-3', 'model-4', 'model-5', 'model-6']);
    assert.equal(sent.filter((s) => s.method === 'GET').length, 3);
    const first = await c.list('data_models', { filter: { slug: { contains: 'model-' } }, page: { limit: 3 } });
    assert.equal(first.data.length, 3);
    assert.equal(typeof first.links.next, 'string');
  });

  it('sends an Idempotency-Key on an unsafe call: the same key twice creates once', async () => {
    const { c, sent } = client();
    const a = await c.create('data_models', { type: 'data_model', attributes: { name: 'Once', slug: 'once' } }, { idempotencyKey: 'create-once-1' });
    const b = await c.create('data_models', { type: 'data_model', attributes: { name: 'Once', slug: 'once' } }, { idempotencyKey: 'create-once-1' });
    assert.equal(a.data.id, b.data.id);
    const posts = sent.filter((s) => s.method === 'POST' && s.path.endsWith('/data_models'));
    assert.deepEqual(
      posts.map((s) => s.headers.get('idempotency-key')),
      ['create-once-1', 'create-once-1'],
    );
    await c.create('data_models', { type: 'data_model', attributes: { name: 'Twice', slug: 'twice' } });
    assert.match(sent.at(-1)!.headers.get('idempotency-key') ?? '', /^[0-9a-f-]{36}$/);
  });
});

describe('runs, facts and webhooks', () => {
  let runId = '';

  it('sends a webhook: accepted, then the same delivery id is a duplicate', async () => {
    const { c, sent } = client();
    const first = await c.sendWebhook(triggerToken, { id: 'o-1', amount: 12.5 }, { deliveryId: 'delivery-o-1' });
    assert.equal(first.status, 'accepted');
    assert.equal(first.deliveryId, 'delivery-o-1');
    assert.ok(first.status === 'accepted' && typeof first.workflow_run_id === 'string');
    runId = first.workflow_run_id;
    const again = await c.sendWebhook(triggerToken, { id: 'o-1', amount: 12.5 }, { deliveryId: 'delivery-o-1' });
    assert.equal(again.status, 'duplicate');
    const hooks = sent.filter((s) => s.path.startsWith('/api/v1/webhooks/'));
    assert.deepEqual(
      hooks.map((s) => s.headers.get('idempotency-key')),
      ['delivery-o-1', 'delivery-o-1'],
    );
    const run = await waitForRun(c, runId);
    assert.equal(run.attributes?.status, 'succeeded');
  });

  it('a webhook to an unknown trigger is a 404 TributaryError, not retried', async () => {
    const { c, sent } = client();
    await assert.rejects(c.sendWebhook('tbwh_unknown-token-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', { id: 1 }), { status: 404, code: 'Trigger not found' });
    assert.equal(sent.filter((s) => s.path.startsWith('/api/v1/webhooks/')).length, 1);
  });

  it("a webhook 401 carries the server's text in detail: the documented text, or what it says beyond it", async () => {
    const { c, sent } = client();
    // The trigger has no verifying connector, so asking for verification is refused.
    await assert.rejects(c.sendWebhook(triggerToken, { id: 'o-401' }, { headers: { 'tributary-require-verification': 'true' } }), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.status, 401);
      assert.equal(err.code, 'Unauthorized');
      assert.equal(err.detail, 'Unauthorized');
      assert.match(err.message, /^HTTP 401 Unauthorized: Unauthorized$/);
      return true;
    });
    assert.equal(sent.filter((s) => s.path.startsWith('/api/v1/webhooks/')).length, 1, 'an Unauthorized is not re-exchanged');
    // A bearer token the server cannot read: missing_credentials, with the reason in detail.
    const raw = await fetch(`${t.url}/api/v1/webhooks/${encodeURIComponent(triggerToken)}`, {
      method: 'POST',
      headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json' },
      body: '{}',
    });
    const said = (await raw.json()) as { error: string; detail?: string };
    assert.equal(raw.status, 401);
    assert.equal(said.error, 'missing_credentials');
    assert.ok(typeof said.detail === 'string' && said.detail.length > 0, JSON.stringify(said));
    const bad = createClient({
      baseUrl: t.url,
      clientId: tenant.clientId,
      clientSecret: tenant.clientSecret,
      fetch: (input, init) => {
        const url = String(input);
        if (!url.includes('/api/v1/oauth/token')) return fetch(input, init);
        return Promise.resolve(new Response(JSON.stringify({ access_token: 'not-a-token', token_type: 'bearer', expires_in: 900 }), { status: 200 }));
      },
    });
    await assert.rejects(bad.sendWebhook(triggerToken, { id: 'o-401' }), { status: 401, code: 'missing_credentials', detail: said.detail });
  });

  it('a webhook sent with a revoked token is exchanged once more and sent again with the same delivery id', async () => {
    const { c, sent } = client();
    await c.list('data_models');
    const revoked = await adminCall(t, 'PATCH', `/credentials/${tenant.credentialId}`, { revoke_tokens: true });
    assert.equal(revoked.status, 200, revoked.text);
    const r = await c.sendWebhook(triggerToken, { id: 'o-2', amount: 3 });
    assert.equal(r.status, 'accepted');
    const hooks = sent.filter((s) => s.path.startsWith('/api/v1/webhooks/'));
    assert.equal(hooks.length, 2);
    assert.equal(hooks[0]!.headers.get('idempotency-key'), r.deliveryId);
    assert.equal(hooks[1]!.headers.get('idempotency-key'), r.deliveryId);
    assert.notEqual(hooks[0]!.headers.get('authorization'), hooks[1]!.headers.get('authorization'));
    assert.equal(c.exchanges, 2);
    if (r.status === 'accepted') await waitForRun(c, r.workflow_run_id);
  });

  it('queries the facts the run wrote with factQuery', async () => {
    const { c } = client();
    const data = await c.factQuery(
      'query Q($dataModelSlug: String!, $filters: String) { factQuery(dataModelSlug: $dataModelSlug, filters: $filters) { count results { entityId data } } }',
      { dataModelSlug: 'orders', filters: [{ field: 'order_id', op: 'eq', value: 'o-1' }] },
    );
    assert.equal(data.factQuery?.count, 1);
    assert.equal(data.factQuery?.results?.[0]?.entityId, 'o-1');
    assert.deepEqual(JSON.parse(data.factQuery?.results?.[0]?.data ?? '{}'), { order_id: 'o-1', amount: 12.5 });
    await assert.rejects(c.factQuery('query { factQuery(dataModelSlug: "nope") { count } }', { dataModelSlug: 'nope' }), (err: unknown) => {
      assert.ok(err instanceof TributaryError);
      assert.equal(err.code, 'graphql_validation');
      return true;
    });
  });

  it('test-runs the workflow on a sample payload and replays a run on its original and the current version', async () => {
    const { c } = client();
    const tr = await c.testRun(workflowId, { payload: { id: 'o-9', amount: 1 } });
    assert.equal(tr.data?.type, 'workflow_test_run');
    const attrs = tr.data?.attributes as Record<string, unknown>;
    assert.equal(attrs.status, 'succeeded');
    assert.equal(attrs.facts_would_write, 1);
    const original = await c.replay(runId);
    assert.equal(original.data.attributes?.replay_of, runId);
    const current = await c.replay(runId, 'current');
    assert.equal(current.data.attributes?.replay_of, runId);
    assert.notEqual(current.data.id, original.data.id);
    const replays = await c.list('workflow_runs', { filter: { replay_of: runId } });
    assert.equal(replays.data.length, 2);
    const bulk = await c.bulkReplay({ workflow_id: workflowId, status: 'succeeded' }, { version: 'current', limit: 1 });
    assert.equal(bulk.meta?.replayed, 1);
    assert.equal(bulk.data?.length, 1);
    assert.equal(bulk.data?.[0]?.type, 'workflow_run');
    const made = await c.get('workflow_runs', bulk.data![0]!.id);
    assert.equal(typeof made.data.attributes?.replay_of, 'string');
  });

  it('verifies a connector against its provider', async () => {
    const { c } = client();
    const secret = `sk_live_${'v'.repeat(40)}`;
    const created = await c.create('external_connectors', {
      type: 'external_connector',
      attributes: { name: 'Shop', auth_type: 'bearer_token', config: { base_url: `${mock.url}/shop` }, secret },
    });
    assert.equal(created.data.attributes?.status, 'unverified');
    mock.script('/shop/', { status: 200, body: {} });
    const verified = await c.verifyConnector(created.data.id);
    assert.equal(verified.data.attributes?.status, 'verified');
    assert.equal(mock.requests.at(-1)!.headers.authorization, `Bearer ${secret}`);
  });
});
