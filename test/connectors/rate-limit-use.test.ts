/**
 * GET /external_connectors/{id}/rate_limit: the use of a connector's rate budget, read from
 * the sliding window its calls count in (memory on PGlite, the database on PostgreSQL
 * without Redis, Redis with REDIS_URL), without counting; also through the SDK. The budget
 * is ten calls a day: its first ten go at once.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createClient } from '../../packages/client/src/index.ts';
import { assertJsonApiError, jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
const DAY = 86_400;

async function connector(config: Record<string, unknown>): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: 'Calls', auth_type: 'none', type: 'http', direction: 'outbound', config: { base_url: mock.url, ...config } },
    },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

/** One run whose `n` http_request steps each call the connector once. */
async function callTimes(connectorId: string, n: number): Promise<void> {
  const steps = Array.from({ length: n }, (_, i) => ({
    key: `call${i}`,
    type: 'http_request',
    config: { connector_id: connectorId, method: 'GET', path: `/use/${i}` },
  }));
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ n }));
  assert.equal(d.status, 202, d.text);
  const run = await waitForRun(f, d.body.workflow_run_id);
  assert.equal(run.attributes.status, 'succeeded', JSON.stringify(run.attributes));
}

const use = (id: string) => f.api.get(`${API}/external_connectors/${id}/rate_limit`);

describe('a connector with a rate_limit', () => {
  it('answers used 0 before any call, then the calls made through it', async () => {
    const id = await connector({ rate_limit: { requests: 10, per_seconds: DAY } });
    const before = await use(id);
    assert.equal(before.status, 200, before.text);
    assert.equal(before.headers.get('content-type'), 'application/vnd.api+json');
    const { resets_at: resetsAt, ...fresh } = before.body.data.attributes;
    assert.deepEqual(before.body.data, { type: 'connector_rate_limit', id, attributes: { ...fresh, resets_at: resetsAt } });
    assert.deepEqual(fresh, { limited: true, requests: 10, per_seconds: DAY, used: 0, remaining: 10 });
    // Nothing counted: nothing to wait for.
    assert.ok(Math.abs(Date.parse(resetsAt) - Date.now()) < 60_000, resetsAt);
    assert.equal(before.body.links.self, `${API}/external_connectors/${id}/rate_limit`);

    await callTimes(id, 3);
    const after3 = (await use(id)).body.data.attributes;
    assert.deepEqual([after3.used, after3.remaining], [3, 7]);
    // The first call stops counting when its bucket (a tenth of the day) leaves the range: a day and 250 ms after the bucket's start.
    const freesAt = Date.parse(after3.resets_at);
    assert.equal((freesAt - 250) % ((DAY * 1000) / 10), 0, after3.resets_at);
    // That bucket ends after the call, so within a day and a bucket of now.
    assert.ok(freesAt > Date.now() - 60_000 + DAY * 1000 && freesAt <= Date.now() + DAY * 1000 + (DAY * 1000) / 10 + 250, after3.resets_at);
    // Reading does not count.
    assert.equal((await use(id)).body.data.attributes.used, 3);
    // A day's budget still lets its first ten calls go at once (none waits a tenth of a day).
    await callTimes(id, 7);
    const after10 = (await use(id)).body.data.attributes;
    assert.deepEqual([after10.used, after10.remaining], [10, 0]);

    const sdk = createClient({ baseUrl: f.t.url, clientId: f.tenant.clientId, clientSecret: f.tenant.clientSecret });
    const viaSdk = await sdk.connectorRateLimit(id);
    assert.equal(viaSdk.data.type, 'connector_rate_limit');
    assert.equal(viaSdk.data.attributes.used, 10);
  });
});

describe('a connector without a rate_limit', () => {
  it('answers limited false and null for the rest', async () => {
    const id = await connector({});
    const r = await use(id);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.data.attributes, { limited: false, requests: null, per_seconds: null, used: null, remaining: null, resets_at: null });
  });
});

describe('who may read it', () => {
  it("another workspace's connector and a malformed id are 404; without api_read 403", async () => {
    const id = await connector({ rate_limit: { requests: 1, per_seconds: 60 } });
    const stranger = await seedTenant(f.t.deps);
    assertJsonApiError(await jsonApi(f.t, await tokenFor(f.t, stranger)).get(`${API}/external_connectors/${id}/rate_limit`), 404, 'not_found');
    assertJsonApiError(await use('not-an-id'), 404, 'not_found');
    assertJsonApiError(await jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_write')).get(`${API}/external_connectors/${id}/rate_limit`), 403, 'forbidden');
    assert.equal((await jsonApi(f.t, undefined).get(`${API}/external_connectors/${id}/rate_limit`)).status, 401);
  });
});
