/**
 * Connectors kept by a worker between runs (src/connectors/connector-cache.ts): a kept
 * connector serves the next runs without a read, and a change (secret rotated, base URL
 * changed, connector deleted, a row changed by hand in SQL) is used by the first call after
 * the change answered: in the process that made it and, on PostgreSQL, in another one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { closeDeps, createDeps, type Deps } from '../../src/deps.ts';
import { sealSecret } from '../../src/secret-box.ts';
import { startWorker, type Worker } from '../../src/worker/worker.ts';
import { connectorCache } from '../../src/connectors/connector-cache.ts';
import type { ConnectorRow } from '../../src/connectors/connectors.sql.ts';
import { ENGINE } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

// No worker in the app: each test says which process runs the runs.
const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' }, { worker: false });
const mock: MockProvider = await mockProvider();
after(() => mock.close());

const KEY_1 = `key_${'1'.repeat(40)}`;
const KEY_2 = `key_${'2'.repeat(40)}`;
const KEY_3 = `key_${'3'.repeat(40)}`;

async function connector(): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: { name: 'Orders', direction: 'outbound', auth_type: 'api_key', type: 'http', secret: KEY_1, config: { base_url: `${mock.url}/v1` } },
    },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

async function patch(id: string, attributes: Record<string, unknown>): Promise<void> {
  const r = await f.api.patch(`${API}/external_connectors/${id}`, { data: { type: 'external_connector', id, attributes } });
  assert.equal(r.status, 200, r.text);
}

/** A workflow of two calls through the connector; returns its hook's path. */
async function twoCalls(id: string): Promise<string> {
  const call = (key: string) => ({ key, type: 'http_request', config: { connector_id: id, method: 'POST', path: '/orders', body: 'payload' } });
  const { tokens } = await saveOk(f, { step_params: [call('a'), call('b')] });
  return `/api/v1/webhooks/${tokens.hook}`;
}

/** One run through the hook, waited for; with the requests the provider got from it. */
let deliveries = 0;
async function run(hook: string): Promise<{ attributes: any; calls: MockProvider['requests'] }> {
  // A payload of its own: the same body again would be a duplicate delivery.
  const d = await deliver(f, hook, JSON.stringify({ n: ++deliveries }));
  assert.equal(d.status, 202, d.text);
  const r = await waitForRun(f, d.body.workflow_run_id);
  return { attributes: r.attributes, calls: mock.requests.filter((q) => String(q.headers['idempotency-key']).startsWith(`${r.id}:`)) };
}

/** Runs executed by `deps`'s worker alone while `fn` runs. */
async function withWorker<T>(deps: Deps, fn: () => Promise<T>): Promise<T> {
  const w: Worker = startWorker(deps);
  try {
    return await fn();
  } finally {
    await w.stop(1000);
  }
}

function assertCalls(r: Awaited<ReturnType<typeof run>>, key: string, pathName = '/v1/orders'): void {
  assert.equal(r.attributes.status, 'succeeded', JSON.stringify(r.attributes));
  assert.equal(r.calls.length, 2);
  for (const c of r.calls) {
    assert.equal(c.headers['x-api-key'], key);
    assert.equal(c.path, pathName);
  }
}

const deps = f.t.deps;
const counts = () => ({ ...deps.connectors!.kept.counts });

describe('connectors kept by the worker', () => {
  it('a kept connector serves the next runs without reading it again', async () => {
    const id = await connector();
    const hook = await twoCalls(id);
    await withWorker(deps, async () => {
      const c0 = counts();
      assertCalls(await run(hook), KEY_1);
      const c1 = counts();
      assert.equal(c1.read - c0.read, 1, 'the first run reads the connector');
      for (let i = 0; i < 3; i++) assertCalls(await run(hook), KEY_1);
      const c2 = counts();
      assert.equal(c2.read - c1.read, 0, 'the next runs read it no more');
      assert.equal(c2.kept - c1.kept, 3);
    });
  });

  it('a rotated secret, a new base URL and a deletion are used by the next call in the same process', async () => {
    const id = await connector();
    const hook = await twoCalls(id);
    await withWorker(deps, async () => {
      assertCalls(await run(hook), KEY_1);
      assertCalls(await run(hook), KEY_1);
      await patch(id, { secret: KEY_2 });
      const rotated = await run(hook);
      assertCalls(rotated, KEY_2);
      assert.ok(!JSON.stringify(rotated.calls).includes(KEY_1), 'the old secret is sent no more');
      await patch(id, { config: { base_url: `${mock.url}/v2` } });
      assertCalls(await run(hook), KEY_2, '/v2/orders');
      await sql`update api_specs set external_connector_id = null where external_connector_id = ${id}`.execute(deps.db);
      await sql`delete from external_connectors where id = ${id}`.execute(deps.db);
      const gone = await run(hook);
      assert.equal(gone.attributes.status, 'failed');
      assert.equal(gone.calls.length, 0);
      assert.match(gone.attributes.error, /no longer exists/);
    });
  });

  it('a secret changed by hand in SQL (updated_at untouched) is used by the next call', async () => {
    const id = await connector();
    const hook = await twoCalls(id);
    await withWorker(deps, async () => {
      assertCalls(await run(hook), KEY_1);
      await sql`update external_connectors set secret_ciphertext = ${sealSecret(deps.connectorKey, KEY_3)} where id = ${id}`.execute(deps.db);
      assertCalls(await run(hook), KEY_3);
    });
  });

  it('a spec detached from the connector is seen by the next call: its operations go with it', async () => {
    const r = await f.api.post(`${API}/external_connectors`, {
      data: {
        type: 'external_connector',
        attributes: { name: 'Orders', direction: 'outbound', provider_slug: 'tributary-orders', secret: KEY_1, config: { base_url: `${mock.url}/v1` } },
      },
    });
    assert.equal(r.status, 201, r.text);
    const id = r.body.data.id;
    const call = (key: string) => ({
      key,
      type: 'http_request',
      config: {
        connector_id: id,
        operation_ref: 'createOrder',
        body: '{"customer_id": "c-1", "items": [{"sku": "A-1", "quantity": 1, "unit_price": {"amount": "9.50", "currency": "EUR"}}]}',
      },
    });
    const { tokens } = await saveOk(f, { step_params: [call('a'), call('b')] });
    const hook = `/api/v1/webhooks/${tokens.hook}`;
    await withWorker(deps, async () => {
      assertCalls(await run(hook), KEY_1);
      assertCalls(await run(hook), KEY_1);
      await sql`update api_specs set external_connector_id = null where external_connector_id = ${id}`.execute(deps.db);
      const detached = await run(hook);
      assert.equal(detached.attributes.status, 'failed', JSON.stringify(detached.attributes));
      assert.equal(detached.calls.length, 0);
      assert.match(detached.attributes.error, /createOrder/);
    });
  });

  describe('another process on the same database', { skip: ENGINE !== 'postgres' && 'PostgreSQL only: PGlite is one process' }, () => {
    let other: Deps;
    let dir: string;
    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-test-'));
      const vars: Record<string, string> = { DATA_DIR: dir, DATABASE_URL: f.t.config.databaseUrl!, LOG_LEVEL: 'silent', ALLOW_PRIVATE_EGRESS: 'true' };
      if (process.env.REDIS_URL) vars.REDIS_URL = process.env.REDIS_URL;
      other = await createDeps(loadConfig(vars), { dataDir: dir });
    });
    after(async () => {
      await closeDeps(other);
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('sees a rotation, a new base URL and a deletion made through this process at its next call', async () => {
      const id = await connector();
      const hook = await twoCalls(id);
      await withWorker(other, async () => {
        const c0 = { ...other.connectors!.kept.counts };
        assertCalls(await run(hook), KEY_1);
        assertCalls(await run(hook), KEY_1);
        assert.equal(other.connectors!.kept.counts.read - c0.read, 1, 'the other process keeps the connector too');
        await patch(id, { secret: KEY_2 });
        assertCalls(await run(hook), KEY_2);
        await patch(id, { config: { base_url: `${mock.url}/v2` } });
        assertCalls(await run(hook), KEY_2, '/v2/orders');
        await sql`update external_connectors set secret_ciphertext = ${sealSecret(deps.connectorKey, KEY_3)} where id = ${id}`.execute(deps.db);
        assertCalls(await run(hook), KEY_3, '/v2/orders');
        await sql`update api_specs set external_connector_id = null where external_connector_id = ${id}`.execute(deps.db);
        await sql`delete from external_connectors where id = ${id}`.execute(deps.db);
        const gone = await run(hook);
        assert.equal(gone.attributes.status, 'failed');
        assert.equal(gone.calls.length, 0);
      });
    });
  });
});

describe('connectors kept while in use', () => {
  it('a connector no step used since the last look is dropped, its opened secret with it', () => {
    const cache = connectorCache();
    const row = (id: string) => ({ id, version: 'v1' }) as ConnectorRow;
    cache.set('w', row('busy'));
    cache.set('w', row('idle'));
    cache.forgetIdle();
    assert.equal(cache.size(), 2, 'both were used (set) since the last look');
    assert.ok(cache.get('w', 'busy', 'v1'));
    cache.forgetIdle();
    assert.ok(cache.get('w', 'busy', 'v1'), 'used since the last look: kept');
    assert.equal(cache.get('w', 'idle', 'v1'), undefined, 'unused since the last look: dropped');
    assert.equal(cache.get('w', 'busy', 'v2'), undefined, 'another version is not a use');
    cache.forgetIdle();
    cache.forgetIdle();
    assert.equal(cache.size(), 0);
  });
});
