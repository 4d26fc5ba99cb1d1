/**
 * A run shows the headers of the delivery that made it (workflow_run.delivery_headers):
 * secrets redacted by name and by value, hop-by-hop headers left out, bounded; a replay
 * keeps the original's. A real signed delivery's signature and bearer token appear nowhere
 * in the run's JSON:API answer.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { signatureHeaders } from '../../src/connectors/signature-schemes.ts';
import { deliveryHeaders, MAX_HEADERS, MAX_VALUE_CHARS } from '../../src/triggers/delivery-headers.ts';
import { API, deliver, saveOk, startFlow, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000' }, { worker: false });
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];
const R = '[redacted]';

async function hookWith(authType: string, secret: string, config: Record<string, unknown>): Promise<string> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: `inbound-${authType}`, auth_type: authType, direction: 'inbound', secret, config } },
  });
  assert.equal(c.status, 201, c.text);
  const { tokens } = await saveOk(f, {
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: c.body.data.id }],
  });
  return `/api/v1/webhooks/${tokens.hook}`;
}

describe('deliveryHeaders', () => {
  it('redacts credentials by name, keeps the delivery ids, leaves out hop-by-hop headers', () => {
    const kept = deliveryHeaders(
      {
        host: 'example.test',
        'content-type': 'application/json',
        authorization: 'Bearer abc',
        'proxy-authorization': 'Basic abc',
        cookie: 'session=abc',
        'x-hub-signature-256': 'sha256=00',
        'x-client-secret': 's',
        'x-auth-user': 'u',
        'x-api-key': 'k',
        'x-password': 'p',
        'x-credentials': 'c',
        'x-shopify-hmac-sha256': 'h',
        'x-my-token': 't',
        'x-hook-pass': 'the key',
        'idempotency-key': 'order-1',
        'x-gamma-idempotency-token': 'g-1',
        'user-agent': 'sender/1.0',
        connection: 'keep-alive, X-Trace',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        te: 'trailers',
        upgrade: 'h2c',
        'x-trace': 'named by Connection',
        'x-forwarded-for': ['10.0.0.1', '10.0.0.2'] as unknown as string,
      },
      ['X-Hook-Pass'],
    );
    assert.deepEqual(kept, {
      host: 'example.test',
      'content-type': 'application/json',
      authorization: R,
      'proxy-authorization': R,
      cookie: R,
      'x-hub-signature-256': R,
      'x-client-secret': R,
      'x-auth-user': R,
      'x-api-key': R,
      'x-password': R,
      'x-credentials': R,
      'x-shopify-hmac-sha256': R,
      'x-my-token': R,
      'x-hook-pass': R,
      'idempotency-key': 'order-1',
      'x-gamma-idempotency-token': 'g-1',
      'user-agent': 'sender/1.0',
      'x-forwarded-for': '10.0.0.1, 10.0.0.2',
    });
  });

  it('redacts a value that looks like a key under any name', () => {
    const kept = deliveryHeaders({
      'x-note': `Bearer tbat_${randomBytes(24).toString('base64url')}`,
      'x-other': randomBytes(30).toString('base64url') + 'aA1',
    });
    assert.deepEqual(kept, { 'x-note': R, 'x-other': R });
  });

  it(`keeps at most ${MAX_HEADERS} headers, each cut to ${MAX_VALUE_CHARS} characters`, () => {
    const many = Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`x-h${i}`, 'v'.repeat(3000)]));
    const kept = deliveryHeaders(many);
    assert.equal(Object.keys(kept).length, MAX_HEADERS);
    assert.deepEqual(Object.keys(kept).slice(0, 2), ['x-h0', 'x-h1']);
    for (const v of Object.values(kept)) assert.equal(v.length, MAX_VALUE_CHARS);
  });

  it('keeps a header named __proto__ as its own property', () => {
    const headers = JSON.parse('{"__proto__": "x", "x-a": "1"}');
    const kept = deliveryHeaders(headers);
    assert.equal(Object.getPrototypeOf(kept), Object.prototype);
    assert.deepEqual(JSON.parse(JSON.stringify(kept)), JSON.parse('{"__proto__": "x", "x-a": "1"}'));
  });
});

describe('a run made by a delivery', () => {
  it('shows the delivery headers without the signature, the bearer token or other secrets; a replay keeps them', async () => {
    const secret = randomBytes(16).toString('hex');
    const path = await hookWith('hmac', secret, { signature_scheme: 'github' });
    const body = JSON.stringify({ id: 'evt_1', total: 3 });
    const signed = signatureHeaders('github', secret, body, randomUUID(), Math.floor(Date.now() / 1000));
    const deliveryId = `order-${randomUUID()}`;
    const cookie = `session=${randomUUID()}`;
    const vendor = `vendor-${randomUUID()}`;
    const d = await deliver(f, path, body, { ...signed, 'idempotency-key': deliveryId, cookie, 'x-shop': 'north', 'x-vendor-token': vendor });
    assert.equal(d.status, 202, d.text);
    const runId = d.body.workflow_run_id as string;

    const r = await f.api.get(`${API}/workflow_runs/${runId}`);
    assert.equal(r.status, 200, r.text);
    const headers = r.body.data.attributes.delivery_headers;
    assert.equal(headers['x-hub-signature-256'], R);
    assert.equal(headers.authorization, R);
    assert.equal(headers.cookie, R);
    assert.equal(headers['x-vendor-token'], R);
    assert.equal(headers['idempotency-key'], deliveryId, 'the delivery id, shown as delivery_id too');
    assert.equal(r.body.data.attributes.delivery_id, deliveryId);
    assert.equal(headers['x-github-delivery'], signed['x-github-delivery']);
    assert.equal(headers['x-shop'], 'north');
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers.connection, undefined, 'hop-by-hop');
    // Nowhere in the answer, in any form.
    const sig = signed['x-hub-signature-256']!;
    for (const secretText of [sig, sig.slice('sha256='.length), f.bearer, cookie, vendor, secret])
      assert.ok(!r.text.includes(secretText), 'a secret in the answer');
    // Nor in the list.
    const list = await f.api.get(`${API}/workflow_runs?filter[delivery_id]=${deliveryId}`);
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.data.length, 1);
    assert.ok(!list.text.includes(sig.slice('sha256='.length)) && !list.text.includes(f.bearer));

    const replay = await f.api.post(`${API}/workflow_runs/${runId}/replay`, { meta: { version: 'original' } });
    assert.equal(replay.status, 201, replay.text);
    assert.deepEqual(replay.body.data.attributes.delivery_headers, headers);
    assert.equal(replay.body.data.attributes.delivery_id, null);
  });

  it('redacts the header an api_key connector reads its key from, whatever its name', async () => {
    const key = `k-${randomUUID()}`;
    const path = await hookWith('api_key', key, { header_name: 'X-Hook-Pass' });
    const d = await deliver(f, path, JSON.stringify({ a: 1 }), { 'x-hook-pass': key });
    assert.equal(d.status, 202, d.text);
    const r = await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`);
    assert.equal(r.body.data.attributes.delivery_headers['x-hook-pass'], R);
    assert.ok(!r.text.includes(key));
  });

  it('keeps at most 50 headers of a delivery, each value cut to 1,024 characters', async () => {
    const { tokens } = await saveOk(f, { step_params: STEPS });
    // Within the server's header size limit (16 KiB in all).
    const extra = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`x-extra-${String(i).padStart(2, '0')}`, i === 0 ? 'v'.repeat(2000) : 'v']));
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ a: 1 }), extra);
    assert.equal(d.status, 202, d.text);
    const r = await f.api.get(`${API}/workflow_runs/${d.body.workflow_run_id}`);
    const headers = r.body.data.attributes.delivery_headers as Record<string, string>;
    assert.equal(Object.keys(headers).length, 50);
    assert.equal(headers['x-extra-00'], 'v'.repeat(1024));

    // A bulk replay keeps them too (it replays finished runs: this one is marked so, no worker runs here).
    await f.t.deps.db.updateTable('workflow_runs').set({ status: 'succeeded' }).where('id', '=', d.body.workflow_run_id).execute();
    const bulk = await f.api.post(`${API}/workflow_runs/replay?filter[delivery_id]=${encodeURIComponent(r.body.data.attributes.delivery_id)}`, undefined);
    assert.equal(bulk.status, 201, bulk.text);
    const replayed = await f.api.get(`${API}/workflow_runs/${bulk.body.data[0].id}`);
    assert.deepEqual(replayed.body.data.attributes.delivery_headers, headers);
  });
});
