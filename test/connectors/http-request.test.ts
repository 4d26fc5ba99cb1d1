/**
 * Connectors that call out, end to end against a mock provider on loopback (the app runs
 * with ALLOW_PRIVATE_EGRESS=true): verification, the http_request step (operation_ref and
 * method + path), retries with Retry-After and one Idempotency-Key, permanent 4xx, oauth2
 * token caching and refresh, Standard Webhooks signing, the rate limit across two
 * workers, and the egress guard at connection time.
 */
import assert from 'node:assert/strict';
import os from 'node:os';
import dns from 'node:dns/promises';
import nodeDns from 'node:dns';
import { after, describe, it, mock as mocks } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { startWorker } from '../../src/worker/worker.ts';
import { marginMs } from '../../src/connectors/rate.ts';
import { httpClient } from '../../src/connectors/http.ts';
import { EgressRefused } from '../../src/connectors/errors.ts';
import { privateHostReason } from '../../src/egress.ts';
import { assertJsonApiError, jsonApi, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, builderState, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
await createModel(f, 'orders', [
  { name: 'order_id', type: 'string' },
  { name: 'status', type: 'string' },
]);
const KEY = `key_${'a'.repeat(40)}`;

async function connector(attributes: Record<string, unknown>): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'Orders', direction: 'outbound', ...attributes } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const ordersConnector = (extra: Record<string, unknown> = {}) =>
  connector({ provider_slug: 'tributary-orders', secret: KEY, config: { base_url: `${mock.url}/v1` }, ...extra });

/** Saves a one-trigger workflow with these steps, delivers `payload` and waits for the run. */
async function runWith(steps: unknown[], payload: unknown, timeoutMs = 15_000): Promise<any> {
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify(payload));
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(f, d.body.workflow_run_id, timeoutMs);
  return { id: run.id, ...run.attributes };
}

const createOrder = (connectorId: string) => ({
  key: 'call',
  type: 'http_request',
  config: {
    connector_id: connectorId,
    operation_ref: 'createOrder',
    body: '{"customer_id": payload.customer, "items": [{"sku": "A-1", "quantity": 1, "unit_price": {"amount": "9.50", "currency": "EUR"}}]}',
  },
});

describe('verify', () => {
  it('401 without a token; 403 for a member; 404 for another tenant', async () => {
    const id = await ordersConnector();
    assert.equal((await jsonApi(f.t, undefined).post(`${API}/external_connectors/${id}/verify`, undefined)).status, 401);
    const member = jsonApi(f.t, await tokenFor(f.t, await seedAccount(f.t.deps, f.tenant, { role: 'member' })));
    assertJsonApiError(await member.post(`${API}/external_connectors/${id}/verify`, undefined), 403, 'forbidden');
    const other = jsonApi(f.t, await tokenFor(f.t, await seedTenant(f.t.deps)));
    assertJsonApiError(await other.post(`${API}/external_connectors/${id}/verify`, undefined), 404, 'not_found');
  });

  it("calls the health operation with the connector's key: verified; refused: failing, with the reason and no secret", async () => {
    const id = await ordersConnector();
    mock.script('/v1/health', { status: 200, body: { status: 'up' } }, { status: 401, body: { error: `bad key ${KEY}` } });
    const ok = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.data.attributes.status, 'verified');
    assert.equal(ok.body.data.attributes.last_error, null);
    assert.ok(ok.body.data.attributes.last_verified_at);
    const call = mock.requests.at(-1)!;
    assert.equal(call.method, 'GET');
    assert.equal(call.path, '/v1/health');
    assert.equal(call.headers['x-api-key'], KEY);
    const bad = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    assert.equal(bad.body.data.attributes.status, 'failing');
    assert.equal(bad.body.data.attributes.last_error, `GET ${mock.url}/v1/health: The provider answered 401`);
    assert.ok(!bad.text.includes(KEY));
    const listed = await f.api.get(`${API}/external_connectors?filter[status]=failing`);
    assert.ok(listed.body.data.some((c: any) => c.id === id));
  });

  it('an unreachable provider is failing, saying so', async () => {
    const id = await connector({ auth_type: 'none', type: 'http', config: { base_url: 'http://127.0.0.1:9/' } });
    const r = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    assert.equal(r.body.data.attributes.status, 'failing');
    assert.match(r.body.data.attributes.last_error, /could not be reached \(ECONNREFUSED\)/);
  });
});

describe('saving an http_request step', () => {
  it('checks the connector, the operation and its required parameters, with pointers', async () => {
    const id = await ordersConnector();
    const bare = await connector({ auth_type: 'none', type: 'http', config: { base_url: mock.url } });
    const s3 = await connector({ auth_type: 'api_key', type: 's3' });
    const inbound = await connector({ auth_type: 'hmac', direction: 'inbound' });
    const at = '/data/attributes/step_params/0/config';
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ connector_id: '00000000-0000-7000-8000-000000000000', operation_ref: 'createOrder' }, `${at}/connector_id`, /outbound connector of this workspace/],
      [{ connector_id: inbound, operation_ref: 'createOrder' }, `${at}/connector_id`, /outbound connector/],
      [{ connector_id: s3, operation_ref: 'DeleteBucket' }, `${at}/operation_ref`, /performs HeadBucket, ListObjectsV2, GetObject, PutObject/],
      [{ connector_id: s3, method: 'GET', path: '/x' }, `${at}/connector_id`, /give one as operation_ref/],
      [{ connector_id: id, operation_ref: 'deleteEverything' }, `${at}/operation_ref`, /not an operation/],
      [{ connector_id: bare, operation_ref: 'createOrder' }, `${at}/operation_ref`, /no api_spec attached/],
      [{ connector_id: id, operation_ref: 'getOrder' }, `${at}/params`, /requires order_id \(path\)/],
      [{ connector_id: id, operation_ref: 'getOrder', params: { order_id: 'payload.id', nope: '1' } }, `${at}/params/nope`, /not a parameter/],
      [{ connector_id: id, method: 'GET', path: '/orders/{id}' }, `${at}/params`, /\{id\}/],
      [{ connector_id: id, method: 'BREW', path: '/x' }, `${at}/method`, /method must be one of/],
      [{ connector_id: id, method: 'GET', path: 'http://evil.example/x' }, `${at}/path`, /must start with \//],
      [{ connector_id: id, operation_ref: 'listOrders', headers: { Authorization: '"x"' } }, `${at}/headers/Authorization`, /cannot be set by a step/],
      [{ connector_id: id, operation_ref: 'listOrders', body: '$$$(' }, `${at}/body`, /body/],
      [{ connector_id: id, operation_ref: 'listOrders', method: 'GET', path: '/x' }, at, /either operation_ref or method and path/],
    ];
    for (const [config, pointer, pattern] of cases) {
      const r = await f.api.post(
        `${API}/workflows/save_builder_state`,
        builderState(f, { trigger_params: [], step_params: [{ key: 'call', type: 'http_request', config }] }),
      );
      assertJsonApiError(r, 422, 'invalid_request', { pointer });
      assert.match(r.body.errors[0].detail, pattern);
    }
  });
});

describe('running an http_request step', () => {
  it('operation_ref: the method, path, key, Idempotency-Key and JSON body; the answer is the output the next steps read', async () => {
    const id = await ordersConnector();
    mock.script('/v1/orders', { status: 201, body: { id: 'ord_12345678', status: 'open' } });
    const run = await runWith(
      [
        createOrder(id),
        {
          key: 'store',
          type: 'write_fact',
          config: { data_model_slug: 'orders', mapping: { order_id: 'steps.call.body.id', status: 'steps.call.body.status' } },
        },
      ],
      { customer: 'c-1' },
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    const req = mock.requests.at(-1)!;
    assert.equal(req.method, 'POST');
    assert.equal(req.path, '/v1/orders');
    assert.equal(req.headers['x-api-key'], KEY);
    assert.equal(req.headers['content-type'], 'application/json');
    assert.equal(req.headers['idempotency-key'], `${run.id}:call:0`);
    assert.equal(JSON.parse(req.body).customer_id, 'c-1');
    assert.equal(run.steps[0].output.status, 201);
    assert.deepEqual(run.steps[0].output.body, { id: 'ord_12345678', status: 'open' });
    assert.equal(run.steps[1].status, 'succeeded');
    assert.ok(!JSON.stringify(run).includes(KEY), 'the key is in no step record');
  });

  it('method + path: params fill the placeholders (encoded), query and headers are sent', async () => {
    const id = await ordersConnector();
    mock.script('/v1/orders/ord%2F1%20x', { status: 200, body: { id: 'x' } });
    const run = await runWith(
      [
        {
          key: 'get',
          type: 'http_request',
          config: {
            connector_id: id,
            method: 'GET',
            path: '/orders/{oid}',
            params: { oid: 'payload.id' },
            query: { expand: '"items"', n: '3' },
            headers: { 'X-Trace': 'payload.trace' },
          },
        },
      ],
      { id: 'ord/1 x', trace: 't-9' },
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    const req = mock.requests.at(-1)!;
    const url = new URL(req.path, mock.url);
    assert.equal(url.pathname, '/v1/orders/ord%2F1%20x');
    assert.deepEqual(Object.fromEntries(url.searchParams), { expand: 'items', n: '3' });
    assert.equal(req.headers['x-trace'], 't-9');
    assert.equal(req.headers['idempotency-key'], undefined, 'GET carries no Idempotency-Key');
  });

  it('a 503 with Retry-After is retried after it, with the same Idempotency-Key; a 429 too', async () => {
    const id = await ordersConnector();
    mock.script(
      '/v1/orders',
      { status: 503, headers: { 'retry-after': '1' } },
      { status: 429, body: { error: 'slow down' } },
      { status: 201, body: { id: 'ord_abcdefgh', status: 'open' } },
    );
    const before = mock.requests.length;
    const run = await runWith([createOrder(id)], { customer: 'c-2' });
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.equal(run.attempt, 3);
    const calls = mock.requests.slice(before).filter((r) => r.path === '/v1/orders');
    assert.equal(calls.length, 3);
    assert.equal(new Set(calls.map((c) => c.headers['idempotency-key'])).size, 1);
    assert.ok(calls[1]!.at - calls[0]!.at >= 950, `retried after ${calls[1]!.at - calls[0]!.at} ms, Retry-After was 1 s`);
  });

  it('a 4xx other than 429 fails the step at once, quoting the answer', async () => {
    const id = await ordersConnector();
    mock.script('/v1/orders', { status: 422, body: { error: 'items must not be empty' } });
    const run = await runWith([createOrder(id)], { customer: 'c-3' });
    assert.equal(run.status, 'failed');
    assert.equal(run.attempt, 1);
    assert.match(run.steps[0].error, /The provider answered 422: \{"error":"items must not be empty"\}/);
  });

  it('an answer holding text the database cannot store fails the step for good, and the run is recorded', async () => {
    const id = await ordersConnector();
    mock.script('/v1/orders', { status: 201, body: { id: 'ord_nul\u0000x', note: 'fine' } }, { status: 422, body: { error: 'bad \ud800 half' } });
    for (const expected of [
      /The provider's answer \(201\) cannot be kept: .*\\u0000 .*\(at \/id\)/,
      /The provider's answer \(422\) cannot be kept: .*\(at \/error\)/,
    ]) {
      const run = await runWith([createOrder(id)], { customer: 'c-nul' });
      assert.equal(run.status, 'failed', JSON.stringify(run));
      assert.equal(run.attempt, 1);
      assert.match(run.steps[0].error, expected);
    }
  });

  it('oauth2 client credentials: one token for many calls, fetched again once on a 401', async () => {
    let tokenFetches = 0;
    let valid = 'tok-1';
    mock.fallback = (req) => {
      if (req.path === '/oauth/token') {
        tokenFetches++;
        const form = new URLSearchParams(req.body);
        if (form.get('client_secret') !== 'cs-secret' || form.get('grant_type') !== 'client_credentials' || form.get('client_id') !== 'ledger-client')
          return { status: 401, body: { error: 'invalid_client' } };
        return { status: 200, body: { access_token: valid, token_type: 'Bearer', expires_in: 3600 } };
      }
      if (req.path.startsWith('/v2/accounts'))
        return req.headers.authorization === `Bearer ${valid}` ? { status: 200, body: [{ id: 'a1' }] } : { status: 401, body: { error: 'invalid_token' } };
      return { status: 200, body: { ok: true } };
    };
    try {
      const id = await connector({
        provider_slug: 'acme-ledger',
        secret: 'cs-secret',
        config: { base_url: `${mock.url}/v2`, token_url: `${mock.url}/oauth/token`, client_id: 'ledger-client', scopes: ['ledger.read'] },
      });
      const steps = [{ key: 'list', type: 'http_request', config: { connector_id: id, operation_ref: 'listAccounts' } }];
      for (let i = 0; i < 3; i++) assert.equal((await runWith(steps, { i })).status, 'succeeded');
      assert.equal(tokenFetches, 1);
      const scope = new URLSearchParams(mock.requests.find((r) => r.path === '/oauth/token')!.body).get('scope');
      assert.equal(scope, 'ledger.read');
      valid = 'tok-2';
      const run = await runWith(steps, { i: 4 });
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.equal(run.attempt, 1);
      assert.equal(tokenFetches, 2);
    } finally {
      mock.fallback = () => ({ status: 200, body: { ok: true } });
    }
  });

  it('basic_auth sends config.username and the secret; bearer_token sends the secret as a bearer token', async () => {
    const basic = await connector({ auth_type: 'basic_auth', type: 'http', secret: 'p@ss:word', config: { base_url: mock.url, username: 'loader' } });
    const bearer = await connector({ auth_type: 'bearer_token', type: 'http', secret: 'tok-123', config: { base_url: mock.url } });
    const run = await runWith(
      [
        { key: 'a', type: 'http_request', config: { connector_id: basic, method: 'GET', path: '/basic' } },
        { key: 'b', type: 'http_request', config: { connector_id: bearer, method: 'GET', path: '/bearer' } },
      ],
      {},
    );
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.equal(mock.requests.find((r) => r.path === '/basic')!.headers.authorization, `Basic ${Buffer.from('loader:p@ss:word').toString('base64')}`);
    assert.equal(mock.requests.find((r) => r.path === '/bearer')!.headers.authorization, 'Bearer tok-123');
    const noUser = await connector({ auth_type: 'basic_auth', type: 'http', secret: 'x', config: { base_url: mock.url } });
    const failed = await runWith([{ key: 'a', type: 'http_request', config: { connector_id: noUser, method: 'GET', path: '/basic' } }], {});
    assert.equal(failed.status, 'failed');
    assert.match(failed.steps[0].error, /needs config.username/);
  });

  it('hmac: the request is signed the Standard Webhooks way', async () => {
    const secret = `whsec_${Buffer.from('s'.repeat(32)).toString('base64')}`;
    const id = await connector({ auth_type: 'hmac', type: 'http', secret, config: { base_url: mock.url } });
    mock.script('/hooks/orders', { status: 204 });
    const run = await runWith([{ key: 'send', type: 'http_request', config: { connector_id: id, method: 'POST', path: '/hooks/orders', body: 'payload' } }], {
      order: 7,
    });
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    const req = mock.requests.at(-1)!;
    const verified = new Webhook(secret).verify(req.body, req.headers as Record<string, string>);
    assert.deepEqual(verified, { order: 7 });
    assert.equal(req.headers['webhook-id'], req.headers['idempotency-key']);
  });

  it('rate_limit holds across two workers: at most its requests in any span of per_seconds, and nothing fails', async () => {
    const limit = { requests: 4, perSeconds: 1 };
    const id = await connector({ auth_type: 'none', type: 'http', config: { base_url: mock.url, rate_limit: { requests: 4, per_seconds: 1 } } });
    const { tokens } = await saveOk(f, {
      step_params: [{ key: 'ping', type: 'http_request', config: { connector_id: id, method: 'POST', path: '/limited' } }],
    });
    // The service's own send times, as the budget lets both workers go: the provider's
    // arrivals add the network's and the event loop's jitter, which the margin is for.
    const counter = f.t.deps.connectors.counter;
    const slide = counter.slide.bind(counter);
    const sends: number[] = [];
    counter.slide = async (key, range, now, max) => {
      const r = await slide(key, range, now, max);
      if (r.taken && key.startsWith(`connector:${id}:`)) sends.push(now);
      return r;
    };
    const second = startWorker(f.t.deps);
    try {
      const before = mock.requests.length;
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push((await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ i }))).body.workflow_run_id);
      for (const runId of ids) assert.equal((await waitForRun(f, runId, 30_000)).attributes.status, 'succeeded');
      const hits = mock.requests.slice(before).filter((r) => r.path === '/limited');
      assert.equal(hits.length, 12);
      // One send time per call, and any 4 + 1 of them more than a second and the margin apart.
      assert.equal(sends.length, 12);
      sends.sort((a, b) => a - b);
      for (let i = 0; i + limit.requests < sends.length; i++) assert.ok(sends[i + limit.requests]! - sends[i]! > 1000 + marginMs(limit), JSON.stringify(sends));
      // And no call reached the provider before its time.
      assert.ok(hits.every((h) => h.at >= sends[0]! - 1));
    } finally {
      counter.slide = slide;
      await second.stop(1000);
    }
  });
});

describe('path parameters stay in their placeholders', () => {
  const shopSpec = JSON.stringify({
    openapi: '3.0.3',
    info: { title: 'Shops', version: '1' },
    paths: {
      '/shops/{shop_id}/orders': {
        post: {
          operationId: 'createOrder',
          parameters: [{ name: 'shop_id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 201: { description: 'created' } },
        },
      },
      '/{tenant}/items': {
        get: {
          operationId: 'listItems',
          parameters: [{ name: 'tenant', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: { description: 'ok' } },
        },
      },
    },
  });

  async function shopConnector(): Promise<string> {
    const id = await connector({ auth_type: 'api_key', type: 'http', secret: KEY, config: { base_url: `${mock.url}/v1` } });
    const spec = await f.api.post(`${API}/api_specs`, {
      data: { type: 'api_spec', attributes: { name: 'Shops', format: 'json', raw_document: shopSpec, external_connector_id: id } },
    });
    assert.equal(spec.status, 201, spec.text);
    return id;
  }

  it('a value of . or .. in any encoding fails the step, naming the parameter, and the provider receives nothing', async () => {
    const id = await shopConnector();
    const steps = [
      { key: 'call', type: 'http_request', config: { connector_id: id, operation_ref: 'createOrder', params: { shop_id: 'payload.shop' }, body: '{"n": 1}' } },
    ];
    const { tokens } = await saveOk(f, { step_params: steps });
    for (const shop of ['..', '.', '%2e%2e', '%2E%2e', '.%2E', '%2e.', '%2e', '%252e%252e', '%25252E%25252e', '']) {
      const before = mock.requests.length;
      const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ shop }));
      assert.equal(d.status, 202, d.text);
      const run = (await waitForRun(f, d.body.workflow_run_id)).attributes;
      assert.equal(run.status, 'failed', `${shop}: ${JSON.stringify(run)}`);
      assert.equal(run.attempt, 1, shop);
      assert.match(run.steps[0].error, /The path parameter shop_id (is empty|is ".*", a dot segment)/, shop);
      assert.deepEqual(mock.requests.slice(before), [], `${shop} reached the provider`);
    }
  });

  it('a method + path step and a placeholder in the first segment cannot leave the base URL path either', async () => {
    const id = await shopConnector();
    for (const step of [
      { connector_id: id, operation_ref: 'listItems', params: { tenant: 'payload.v' } },
      { connector_id: id, method: 'POST', path: '/shops/{sid}/orders', params: { sid: 'payload.v' } },
    ]) {
      const before = mock.requests.length;
      const run = await runWith([{ key: 'call', type: 'http_request', config: step }], { v: '..' });
      assert.equal(run.status, 'failed', JSON.stringify(run));
      assert.match(run.steps[0].error, /The path parameter (tenant|sid) is "\.\.", a dot segment/);
      assert.deepEqual(mock.requests.slice(before), []);
    }
  });

  it('other values are one encoded segment: / and \\ cannot add a segment, dots inside a value are kept', async () => {
    const id = await shopConnector();
    const steps = [
      { key: 'call', type: 'http_request', config: { connector_id: id, operation_ref: 'createOrder', params: { shop_id: 'payload.shop' }, body: '{"n": 1}' } },
    ];
    for (const [shop, received] of [
      ['a/b', '/v1/shops/a%2Fb/orders'],
      ['../..', '/v1/shops/..%2F../orders'],
      ['..\\x', '/v1/shops/..%5Cx/orders'],
      ['...', '/v1/shops/.../orders'],
      ['v1.2', '/v1/shops/v1.2/orders'],
      ['%2e%2e%2f', '/v1/shops/%252e%252e%252f/orders'],
    ] as const) {
      const run = await runWith(steps, { shop });
      assert.equal(run.status, 'succeeded', `${shop}: ${JSON.stringify(run)}`);
      const req = mock.requests.at(-1)!;
      assert.equal(req.method, 'POST');
      assert.equal(req.path, received);
    }
  });

  it('the built URL keeps the base path and the template shape', async () => {
    const { buildUrl } = await import('../../src/connectors/runtime.ts');
    const { RequestProblem } = await import('../../src/connectors/errors.ts');
    assert.equal(buildUrl('http://p.example/v1', '/shops/s1/orders', { a: '1' }, '/shops/{shop_id}/orders').href, 'http://p.example/v1/shops/s1/orders?a=1');
    assert.equal(buildUrl('http://p.example/v1/', '', undefined).href, 'http://p.example/v1/');
    assert.throws(
      () => buildUrl('http://p.example/v1', '/../admin', undefined),
      (e: unknown) => e instanceof RequestProblem && /leaves the base URL's path \/v1\//.test((e as Error).message),
    );
    assert.throws(() => buildUrl('http://p.example/v1', '/shops/%2e%2e/orders', undefined, '/shops/{shop_id}/orders/{x}'), /does not keep the shape/);
    assert.throws(() => buildUrl('http://p.example/v1', '/shops/a/b/orders', undefined, '/shops/{shop_id}/orders'), /does not keep the shape/);
    assert.throws(() => buildUrl('http://p.example/v1', '/shops/./orders', undefined, '/shops/{shop_id}/orders'), /does not keep the shape/);
    const { buildCall } = await import('../../src/connectors/operations.ts');
    const parts = (params: Record<string, string>) => ({ params, query: {}, headers: {}, body: undefined });
    // A placeholder in a query the path carries is a query value: dots and empty values are fine there.
    assert.equal(buildCall({ method: 'GET', path: '/find/{a}?q={b}' }, parts({ a: 'x', b: '..' }), 'k').path, '/find/x?q=..');
    assert.throws(
      () => buildCall({ method: 'GET', path: '/find/{a}?q={b}' }, parts({ a: '%2E%2E', b: 'x' }), 'k'),
      (e: unknown) => e instanceof RequestProblem && /path parameter a is "%2E%2E"/.test((e as Error).message),
    );
  });
});

describe('egress at connection time', () => {
  it('a name that resolves to a private address is refused when the connection is made', async (t) => {
    const name = os.hostname();
    const addresses = await dns.lookup(name, { all: true }).catch(() => []);
    if (addresses.length === 0 || !addresses.every((a) => privateHostReason(a.address) !== undefined))
      return t.skip(`${name} does not resolve to a private address here`);
    const client = httpClient({ allowPrivateEgress: false });
    try {
      await assert.rejects(
        client.send({ method: 'GET', url: new URL(`http://${name}:${new URL(mock.url).port}/`), headers: {} }),
        (err: unknown) => err instanceof EgressRefused && /resolves to/.test(err.message),
      );
      await assert.rejects(client.send({ method: 'GET', url: new URL(`${mock.url}/`), headers: {} }), EgressRefused);
      await assert.rejects(client.send({ method: 'GET', url: new URL('http://[::ffff:7f00:1]/'), headers: {} }), EgressRefused);
      await assert.rejects(client.send({ method: 'GET', url: new URL('http://0x7f.1/'), headers: {} }), EgressRefused);
    } finally {
      await client.close();
    }
  });

  it('a step whose connector points at a private address fails permanently where egress is not allowed', async () => {
    const strict = await startFlow();
    const id = (
      await strict.api.post(`${API}/external_connectors`, {
        data: {
          type: 'external_connector',
          attributes: { name: 'x', auth_type: 'none', type: 'http', direction: 'outbound', config: { base_url: 'https://api.example.com' } },
        },
      })
    ).body.data.id;
    // Stored before the rule applied (or by an operator): the call is still refused.
    await strict.t.deps.db
      .updateTable('external_connectors')
      .set({ config: JSON.stringify({ base_url: mock.url }) })
      .where('id', '=', id)
      .execute();
    const { tokens } = await saveOk(strict, { step_params: [{ key: 'x', type: 'http_request', config: { connector_id: id, method: 'GET', path: '/' } }] });
    const d = await deliver(strict, `/api/v1/webhooks/${tokens.hook}`, '{}');
    const run = (await waitForRun(strict, d.body.workflow_run_id)).attributes;
    assert.equal(run.status, 'failed');
    assert.equal(run.attempt, 1);
    assert.match(run.steps[0].error, /127\.0\.0\.1 is a loopback/);
  });
});

describe('egress everywhere a connector may call', () => {
  it('token_url, endpoint and access_url on private addresses are refused at write, in any spelling', async () => {
    const strict = await startFlow();
    for (const [name, url] of [
      ['token_url', 'http://0x7f.1/token'],
      ['endpoint', 'http://[::ffff:169.254.169.254]/'],
      ['access_url', 'http://017700000001/'],
      ['token_url', 'http://metadata.google.internal/'],
    ] as const) {
      const r = await strict.api.post(`${API}/external_connectors`, {
        data: { type: 'external_connector', attributes: { name: 'x', auth_type: 'oauth2', type: 'http', config: { [name]: url } } },
      });
      assertJsonApiError(r, 422, 'invalid_request', { pointer: `/data/attributes/config/${name}` });
    }
  });

  it("a specification's server and an OAuth2 token URL are checked when they are called", async () => {
    const { connectorRuntime, callHttp } = await import('../../src/connectors/runtime.ts');
    const deps = f.t.deps;
    const rt = connectorRuntime({ ...deps, config: { ...deps.config, allowPrivateEgress: false } });
    try {
      const row = {
        id: 'c1',
        auth_type: 'none',
        type: 'http',
        direction: 'outbound',
        config: {},
        secret_ciphertext: null,
        updated_at: new Date(),
        operations: [],
        servers: [{ url: 'http://169.254.169.254/latest' }],
      };
      await assert.rejects(callHttp(rt, row, { method: 'GET', path: '/meta-data' }), EgressRefused);
      const oauth = {
        ...row,
        auth_type: 'oauth2',
        config: { base_url: 'https://api.example.com', token_url: 'http://[::ffff:127.0.0.1]/token', client_id: 'x' },
        servers: [],
      };
      const { sealSecret } = await import('../../src/secret-box.ts');
      await assert.rejects(
        callHttp(rt, { ...oauth, secret_ciphertext: sealSecret(deps.connectorKey, 's') }, { method: 'GET', path: '/' }),
        /token_url must not point at/,
      );
    } finally {
      await rt.close();
    }
  });

  it('a redirect is returned to the step, never followed', async () => {
    const id = await connector({ auth_type: 'none', type: 'http', config: { base_url: mock.url } });
    mock.script('/moved', { status: 302, headers: { location: `${mock.url}/internal-only` } });
    const run = await runWith([{ key: 'get', type: 'http_request', config: { connector_id: id, method: 'GET', path: '/moved' } }], {});
    assert.equal(run.status, 'succeeded', JSON.stringify(run));
    assert.equal(run.steps[0].output.status, 302);
    assert.ok(!mock.requests.some((r) => r.path === '/internal-only'));
  });
});

describe('egress: documentation ranges, IPv6 carriers and this machine (issue 19)', () => {
  const post = (s: Flow, attributes: Record<string, unknown>) =>
    s.api.post(`${API}/external_connectors`, {
      data: { type: 'external_connector', attributes: { name: 'x', auth_type: 'none', type: 'http', direction: 'outbound', ...attributes } },
    });

  it('is 422 at write, with a pointer: base_url, token_url, endpoint and access_url, a specification server, a Snowflake account', async () => {
    const s = await startFlow();
    for (const [name, url] of [
      ['base_url', 'http://192.0.2.2:8080'],
      ['base_url', 'https://198.51.100.7/v1'],
      ['base_url', 'http://[::127.0.0.1]/'],
      ['token_url', 'http://203.0.113.9/token'],
      ['endpoint', 'http://[64:ff9b:1::a00:1]/'],
      ['access_url', 'http://[2002:c0a8:101::1]/'],
      ['base_url', 'http://[::ffff:0:7f00:1]/'],
      ['base_url', 'http://[100::1]/'],
    ] as const) {
      const r = await post(s, { config: { [name]: url } });
      assertJsonApiError(r, 422, 'invalid_request', { pointer: `/data/attributes/config/${name}` });
      assert.match(r.body.errors[0].detail, /must not point at a loopback, private, link-local or reserved address/);
    }
    for (const account of ['192.0.2.2', '0xc0.0.2.2', 'evil.example/x', 'evil.example:443', 'me@evil.example']) {
      const r = await post(s, { type: 'snowflake', auth_type: 'basic_auth', config: { account, username: 'u' } });
      assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/config/account' });
    }
    const ok = await post(s, { type: 'snowflake', auth_type: 'basic_auth', config: { account: 'xy12345.eu-central-1', username: 'u' } });
    assert.equal(ok.status, 201, ok.text);
    // An http connector whose config already holds an address as account cannot become a snowflake one.
    const other = (await post(s, { config: { account: '10.0.0.1' } })).body.data.id;
    const turned = await s.api.patch(`${API}/external_connectors/${other}`, {
      data: { type: 'external_connector', id: other, attributes: { type: 'snowflake' } },
    });
    assertJsonApiError(turned, 422, 'invalid_request', { pointer: '/data/attributes/config/account' });
    const spec = JSON.stringify({ openapi: '3.0.3', info: { title: 't', version: '1' }, servers: [{ url: 'http://203.0.113.5/api' }], paths: {} });
    const r = await s.api.post(`${API}/api_specs`, { data: { type: 'api_spec', attributes: { name: 'x', format: 'json', raw_document: spec } } });
    assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
    assert.match(r.body.errors[0].detail, /points at a loopback, private, link-local or reserved address/);
  });

  it('a name that resolves to a documentation address: verification, a step and an OAuth2 token request never reach the listener there', async () => {
    const s = await startFlow();
    const listener = await mockProvider('0.0.0.0');
    const lookup = nodeDns.lookup as (hostname: string, options: nodeDns.LookupOptions, callback: (...a: any[]) => void) => void;
    const port = new URL(listener.url).port;
    // The service resolves names with node:dns; this name points at this machine's documentation address.
    const m = mocks.method(nodeDns, 'lookup', (hostname: string, options: unknown, callback: (...a: unknown[]) => void) =>
      hostname === 'provider.example.test'
        ? callback(null, [{ address: '192.0.2.2', family: 4 }])
        : lookup.call(nodeDns, hostname, options as nodeDns.LookupOptions, callback),
    );
    try {
      const plain = (await post(s, { config: { base_url: `http://provider.example.test:${port}/v1` } })).body.data.id;
      const oauth = (
        await post(s, {
          auth_type: 'oauth2',
          secret: 'cs-secret',
          config: { base_url: 'https://api.example.com', token_url: `http://provider.example.test:${port}/token`, client_id: 'c' },
        })
      ).body.data.id;
      const verified = await s.api.post(`${API}/external_connectors/${plain}/verify`, undefined);
      assert.equal(verified.body.data.attributes.status, 'failing', verified.text);
      assert.match(verified.body.data.attributes.last_error, /provider\.example\.test resolves to a loopback, private, link-local or reserved address/);
      for (const id of [plain, oauth]) {
        const { tokens } = await saveOk(s, { step_params: [{ key: 'x', type: 'http_request', config: { connector_id: id, method: 'GET', path: '/orders' } }] });
        const d = await deliver(s, `/api/v1/webhooks/${tokens.hook}`, '{}');
        const run = (await waitForRun(s, d.body.workflow_run_id)).attributes;
        assert.equal(run.status, 'failed', JSON.stringify(run));
        assert.equal(run.attempt, 1);
        assert.match(run.steps[0].error, /provider\.example\.test resolves to a loopback, private, link-local or reserved address/);
      }
      assert.deepEqual(listener.requests, []);
    } finally {
      m.mock.restore();
      await listener.close();
    }
  });
});

describe('connector secrets', () => {
  it('are in no log line and nowhere in the database in plain form, whatever the provider answers', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const { capturingLogger } = await import('../helpers/app.ts');
    const g = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', LOG_LEVEL: 'trace' }, { worker: true, log: capturingLogger(lines, 'trace') });
    const secret = `sk_live_${'z'.repeat(40)}`;
    const c = await g.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: { name: 'x', auth_type: 'bearer_token', type: 'http', direction: 'outbound', secret, config: { base_url: mock.url } },
      },
    });
    assert.equal(c.status, 201, c.text);
    mock.script('/echo', { status: 401, body: { error: `token ${secret} is not valid` } }, { status: 200, body: { echoed: secret } });
    for (let i = 0; i < 2; i++) {
      const { tokens } = await saveOk(g, {
        step_params: [{ key: 'call', type: 'http_request', config: { connector_id: c.body.data.id, method: 'POST', path: '/echo', body: 'payload' } }],
      });
      const d = await deliver(g, `/api/v1/webhooks/${tokens.hook}`, '{"n": 1}');
      await waitForRun(g, d.body.workflow_run_id);
    }
    assert.equal(mock.requests.filter((r) => r.path === '/echo' && r.headers.authorization === `Bearer ${secret}`).length, 2);
    assert.ok(lines.length > 0);
    const runs = (await g.api.get(`${API}/workflow_runs`)).text;
    assert.match(runs, /\[redacted\]/);
    assert.ok(!runs.includes(secret));
    assert.ok(!JSON.stringify(lines).includes(secret), 'a log line holds the secret');
    const { sql } = await import('kysely');
    // The provider quoted the secret in an error and echoed it in an answer: the run keeps neither.
    for (const table of ['external_connectors', 'api_specs', 'workflows', 'workflow_versions', 'workflow_runs']) {
      const rows = await sql<{ t: string }>`select t::text as t from ${sql.table(table)} as t`.execute(g.t.deps.db);
      assert.ok(!rows.rows.some((r) => r.t.includes(secret)), `${table} holds the secret in plain form`);
    }
  });
});
