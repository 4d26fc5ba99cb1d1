/**
 * What an inbound connector may hold (issue 34 item 7): the same secret rules at create and
 * PATCH (a scheme, mode or direction change re-checks the stored secret), a minimum length
 * for every scheme, no whitespace at either end; config.header_name an HTTP field name the
 * service does not read itself, 422 at create and PATCH; and a connector stored before the
 * rules with what they refuse answers 401, never a 500, and never shows its key.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { sealSecret } from '../../src/secret-box.ts';
import { API, deliver, saveOk, startFlow, type Flow } from './helpers.ts';

const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '100000' }, { worker: false });
const PATH = `${API}/external_connectors`;
const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;

const create = (attributes: Record<string, unknown>) =>
  f.api.post(PATH, { data: { type: 'external_connector', attributes: { name: 'in', direction: 'inbound', ...attributes } } });
const patch = (id: string, attributes: Record<string, unknown>) => f.api.patch(`${PATH}/${id}`, { data: { type: 'external_connector', id, attributes } });
const refusedAt = (r: { status: number; body: any; text: string }, pointer: string) => {
  assert.equal(r.status, 422, r.text);
  assert.equal(r.body.errors[0].source.pointer, pointer, r.text);
};
async function hookFor(connectorId: string): Promise<string> {
  const { tokens } = await saveOk(f, {
    step_params: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }],
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: connectorId }],
  });
  return `/api/v1/webhooks/${tokens.hook}`;
}
/** What a connector written before these rules may hold: set in the database, as an older version stored it. */
async function storeAsBefore(id: string, values: { secret?: string; config?: Record<string, unknown> }) {
  const set: Record<string, unknown> = {};
  if (values.secret !== undefined) set.secret_ciphertext = sealSecret(f.t.deps.connectorKey, values.secret);
  if (values.config !== undefined) set.config = JSON.stringify(values.config);
  await f.t.deps.db.updateTable('external_connectors').set(set).where('id', '=', id).execute();
}

describe('secrets', () => {
  const SCHEMES = ['github', 'stripe', 'shopify', 'slack'] as const;

  it('hmac schemes and inbound api_key: whitespace-only, padded and short secrets are 422 at create', async () => {
    const modes = [...SCHEMES.map((scheme) => ({ auth_type: 'hmac', config: { signature_scheme: scheme } })), { auth_type: 'api_key', config: null }];
    for (const mode of modes) {
      for (const secret of [' ', '                    ', '\t'.repeat(20), ` ${'k'.repeat(20)}`, `${'k'.repeat(20)}\n`, 'k'.repeat(15), 'abcd']) {
        refusedAt(await create({ ...mode, secret }), '/data/attributes/secret');
      }
      const ok = await create({ ...mode, secret: 'k'.repeat(16) });
      assert.equal(ok.status, 201, `${JSON.stringify(mode)}: ${ok.text}`);
    }
    refusedAt(await create({ auth_type: 'api_key', secret: `${'k'.repeat(10)}\u0001${'k'.repeat(10)}` }), '/data/attributes/secret');
    // Standard Webhooks as before: a whsec_ key of 24 to 64 bytes.
    refusedAt(await create({ auth_type: 'hmac', secret: `whsec_${Buffer.alloc(16).toString('base64')}` }), '/data/attributes/secret');
    assert.equal((await create({ auth_type: 'hmac', secret: whsec() })).status, 201);
    // An outbound key is the provider's to choose: no minimum.
    const outbound = await create({
      auth_type: 'api_key',
      direction: 'outbound',
      secret: 'abcd',
      config: { base_url: 'https://api.example.com', header_name: 'Authorization' },
    });
    assert.equal(outbound.status, 201, outbound.text);
  });

  it('PATCH: the same rules, and a change of scheme, mode or direction re-checks the stored secret', async () => {
    // A 20-byte GitHub secret is no Standard Webhooks key.
    const gh = await create({ auth_type: 'hmac', secret: 'g'.repeat(20), config: { signature_scheme: 'github' } });
    assert.equal(gh.status, 201, gh.text);
    const id = gh.body.data.id;
    refusedAt(await patch(id, { config: { signature_scheme: 'standard_webhooks' } }), '/data/attributes/secret');
    refusedAt(await patch(id, { config: null }), '/data/attributes/secret');
    refusedAt(await patch(id, { secret: ' ' }), '/data/attributes/secret');
    // The scheme and a fitting secret together pass.
    assert.equal((await patch(id, { config: { signature_scheme: 'standard_webhooks' }, secret: whsec() })).status, 200);
    // An outbound bearer token 'abcd' turned into an inbound hmac or api_key connector.
    const bearer = await create({ auth_type: 'bearer_token', direction: 'outbound', secret: 'abcd', config: { base_url: 'https://api.example.com' } });
    assert.equal(bearer.status, 201, bearer.text);
    refusedAt(await patch(bearer.body.data.id, { auth_type: 'hmac', direction: 'inbound', config: { signature_scheme: 'github' } }), '/data/attributes/secret');
    refusedAt(await patch(bearer.body.data.id, { auth_type: 'hmac', direction: 'inbound', config: null }), '/data/attributes/secret');
    const short = await create({ auth_type: 'api_key', direction: 'outbound', secret: 'abcd', config: { base_url: 'https://api.example.com' } });
    refusedAt(await patch(short.body.data.id, { direction: 'inbound' }), '/data/attributes/secret');
  });

  it('a github connector stored with the secret abcd and PATCHed to standard_webhooks: 422; its deliveries are 401', async () => {
    const c = await create({ auth_type: 'hmac', secret: 'g'.repeat(20), config: { signature_scheme: 'github' } });
    const id = c.body.data.id;
    const path = await hookFor(id);
    await storeAsBefore(id, { secret: 'abcd' });
    refusedAt(await patch(id, { config: { signature_scheme: 'standard_webhooks' } }), '/data/attributes/secret');
    // A valid signature with the 4-byte key does not make a run.
    const body = '{"n":1}';
    const d = await deliver(f, path, body, { 'x-github-delivery': 'd-1', 'x-hub-signature-256': await githubSign('abcd', body) });
    assert.equal(d.status, 401, d.text);
    assert.deepEqual(d.body, { error: 'Unauthorized' });
    await storeAsBefore(id, { secret: 'g'.repeat(20) });
    const ok = await deliver(f, path, body, { 'x-github-delivery': 'd-1', 'x-hub-signature-256': await githubSign('g'.repeat(20), body) });
    assert.equal(ok.status, 202, ok.text);
  });
});

describe('config.header_name', () => {
  const KEY = randomBytes(24).toString('base64url');
  const RESERVED = [
    '__proto__',
    'Idempotency-Key',
    'X-Alpha-Delivery',
    'x-beta-webhook-id',
    'X-Gamma-Idempotency-Token',
    'X-Request-Id',
    'Authorization',
    'Content-Type',
    'Content-Length',
    'Host',
    'webhook-id',
    'Webhook-Signature',
    'svix-signature',
    'X-Hub-Signature-256',
    'X-GitHub-Delivery',
    'Stripe-Signature',
    'X-Shopify-Hmac-Sha256',
    'X-Slack-Signature',
    'Tributary-Require-Verification',
    'traceparent',
  ];
  const MALFORMED = ['', 'X Key', 'X-Key:', 'Ключ', 'x'.repeat(65), 'a\u0000b'];

  it('422 with the pointer at create and PATCH for a name the service reads or no HTTP name', async () => {
    const keyed = await create({ auth_type: 'api_key', secret: KEY });
    assert.equal(keyed.status, 201, keyed.text);
    for (const name of [...RESERVED, ...MALFORMED]) {
      refusedAt(await create({ auth_type: 'api_key', secret: KEY, config: { header_name: name } }), '/data/attributes/config/header_name');
      refusedAt(await patch(keyed.body.data.id, { config: { header_name: name } }), '/data/attributes/config/header_name');
    }
    refusedAt(await create({ auth_type: 'api_key', secret: KEY, config: { header_name: 42 } }), '/data/attributes/config/header_name');
    // An outbound connector's header is the provider's: Authorization is common there; a direction change re-checks it.
    const outbound = await create({
      auth_type: 'api_key',
      direction: 'outbound',
      secret: KEY,
      config: { base_url: 'https://api.example.com', header_name: 'Authorization' },
    });
    assert.equal(outbound.status, 201, outbound.text);
    refusedAt(await patch(outbound.body.data.id, { direction: 'inbound' }), '/data/attributes/config/header_name');
  });

  it('constructor is a header like any other: its key verifies, its absence is 401, never a 500', async () => {
    const c = await create({ auth_type: 'api_key', secret: KEY, config: { header_name: 'constructor' } });
    assert.equal(c.status, 201, c.text);
    const path = await hookFor(c.body.data.id);
    assert.equal((await deliver(f, path, '{}', { 'idempotency-key': 'ctor-1' })).status, 401);
    const ok = await deliver(f, path, '{}', { constructor: KEY, 'idempotency-key': 'ctor-2' });
    assert.equal(ok.status, 202, ok.text);
    const run = await f.api.get(`${API}/workflow_runs/${ok.body.workflow_run_id}`);
    assert.equal(run.body.data.attributes.delivery_headers.constructor, '[redacted]');
  });

  it('a connector stored with __proto__, constructor-like or a delivery-id header name: 401, no run, the key never shown', async () => {
    const c = await create({ auth_type: 'api_key', secret: KEY, config: { header_name: 'X-Partner-Key' } });
    const path = await hookFor(c.body.data.id);
    for (const name of ['__proto__', 'Idempotency-Key', 'X-Alpha-Delivery', 'Authorization', 'not a name']) {
      await storeAsBefore(c.body.data.id, { config: { header_name: name } });
      const headers: Record<string, string> = { 'x-partner-key': KEY };
      if (/^[\w-]+$/.test(name)) headers[name.toLowerCase()] = KEY;
      const d = await deliver(f, path, '{}', headers);
      assert.equal(d.status, 401, `${name}: ${d.text}`);
      assert.deepEqual(d.body, { error: 'Unauthorized' });
      assert.ok(!d.text.includes(KEY));
    }
    const runs = await f.api.get(`${API}/workflow_runs?page[size]=100`);
    assert.ok(!runs.text.includes(KEY), 'no run shows the key');
    // Set right again, it verifies.
    await storeAsBefore(c.body.data.id, { config: { header_name: 'X-Partner-Key' } });
    const ok = await deliver(f, path, '{}', { 'x-partner-key': KEY, 'idempotency-key': 'partner-1' });
    assert.equal(ok.status, 202, ok.text);
    const run = await f.api.get(`${API}/workflow_runs/${ok.body.workflow_run_id}`);
    assert.equal(run.body.data.attributes.delivery_id, 'partner-1');
    assert.equal(run.body.data.attributes.delivery_headers['x-partner-key'], '[redacted]');
    assert.ok(!run.text.includes(KEY));
  });
});
