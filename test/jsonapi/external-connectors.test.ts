/**
 * /api/json/v1/external_connectors: admins and owners create and change them, members
 * read them; the secret is sealed, never returned, and a base_url may not point at a
 * private address unless ALLOW_PRIVATE_EGRESS=true.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openSecret } from '../../src/secret-box.ts';
import { assertJsonApiError, capturingLogger, jsonApi, seedAccount, seedTenant, startApp, tokenFor, type Tenant } from '../helpers/app.ts';

const PATH = '/api/json/v1/external_connectors';
const t = await startApp();
test.after(() => t.close());
const owner = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, owner));

const doc = (attributes: Record<string, unknown>) => ({ data: { type: 'external_connector', attributes } });
const connector = (extra: Record<string, unknown> = {}) =>
  doc({ name: 'Billing', auth_type: 'api_key', type: 'http', direction: 'outbound', config: { base_url: 'https://api.billing.example/v2' }, ...extra });

async function accountWith(role: 'member' | 'admin', scopes: Array<'api_read' | 'api_write'> = ['api_read', 'api_write'], tenant: Tenant = owner) {
  return jsonApi(t, await tokenFor(t, await seedAccount(t.deps, tenant, { role, scopes })));
}

describe('who may', () => {
  test('without a token: 401; without api_read or api_write: 403', async () => {
    assert.equal((await jsonApi(t, 'nope').get(PATH)).status, 401);
    const writer = await accountWith('admin', ['api_write']);
    assert.equal((await writer.get(PATH)).status, 403);
    const reader = await accountWith('admin', ['api_read']);
    assert.equal((await reader.post(PATH, connector())).status, 403);
  });

  test("another tenant's connector is 404 to read and to change", async () => {
    const created = await api.post(PATH, connector());
    assert.equal(created.status, 201, created.text);
    const other = jsonApi(t, await tokenFor(t, await seedTenant(t.deps)));
    assert.equal((await other.get(`${PATH}/${created.body.data.id}`)).status, 404);
    const patched = await other.patch(`${PATH}/${created.body.data.id}`, {
      data: { type: 'external_connector', id: created.body.data.id, attributes: { name: 'Mine' } },
    });
    assert.equal(patched.status, 404);
    assert.deepEqual((await other.get(PATH)).body.data, []);
  });

  test('a member reads connectors but may not create or change them (403); an admin may', async () => {
    const member = await accountWith('member');
    const created = await api.post(PATH, connector());
    assert.equal((await member.get(`${PATH}/${created.body.data.id}`)).status, 200);
    const refused = await member.post(PATH, connector());
    assert.equal(refused.status, 403);
    assert.equal(refused.body.errors[0].code, 'forbidden');
    const id = created.body.data.id;
    assert.equal((await member.patch(`${PATH}/${id}`, { data: { type: 'external_connector', id, attributes: { name: 'x' } } })).status, 403);
    const admin = await accountWith('admin');
    assert.equal((await admin.post(PATH, connector())).status, 201);
  });
});

describe('the secret', () => {
  test('is stored sealed, never returned, and reads show only whether one is set', async () => {
    const secret = `key_${'s'.repeat(40)}`;
    const created = await api.post(PATH, connector({ secret, config: { base_url: 'https://api.billing.example', header_name: 'X-Billing-Key' } }));
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.data.attributes.has_secret, true);
    assert.equal(created.body.data.attributes.status, 'unverified');
    assert.ok(!created.text.includes(secret), 'not in the answer');
    const id = created.body.data.id;
    const read = await api.get(`${PATH}/${id}`);
    assert.ok(!read.text.includes(secret) && !('secret' in read.body.data.attributes) && !('secret_ciphertext' in read.body.data.attributes));
    const row = await t.deps.db.selectFrom('external_connectors').select('secret_ciphertext').where('id', '=', id).executeTakeFirstOrThrow();
    assert.ok(row.secret_ciphertext && !row.secret_ciphertext.includes(secret), 'stored sealed');
    assert.equal(openSecret(t.deps.connectorKey, row.secret_ciphertext), secret);
    assert.throws(() => openSecret(Buffer.alloc(32, 1), row.secret_ciphertext!), 'another key cannot open it');
    // A PATCH without it keeps it; null removes it.
    const renamed = await api.patch(`${PATH}/${id}`, { data: { type: 'external_connector', id, attributes: { name: 'Renamed' } } });
    assert.equal(renamed.body.data.attributes.has_secret, true);
    const removed = await api.patch(`${PATH}/${id}`, { data: { type: 'external_connector', id, attributes: { secret: null } } });
    assert.equal(removed.status, 200, removed.text);
    assert.equal(removed.body.data.attributes.has_secret, false);
  });

  test('is in no log line, even at trace level and when the request fails', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logged = await startApp({}, { log: capturingLogger(lines, 'trace') });
    try {
      const a = jsonApi(logged, await tokenFor(logged, await seedTenant(logged.deps)));
      const secret = `whsec_${'q'.repeat(43)}`;
      assert.equal((await a.post(PATH, connector({ secret }))).status, 201);
      assert.equal((await a.post(PATH, connector({ secret, config: { base_url: 'http://10.0.0.1' } }))).status, 422);
      assert.ok(lines.length > 0);
      assert.ok(!JSON.stringify(lines).includes(secret));
    } finally {
      await logged.close();
    }
  });

  test('an hmac secret is a Standard Webhooks key (whsec_ and base64 of 24 to 64 bytes), or 422 at /data/attributes/secret', async () => {
    const key = (bytes: number) => `whsec_${Buffer.alloc(bytes, 7).toString('base64')}`;
    const hmac = (secret: unknown) => connector({ auth_type: 'hmac', direction: 'inbound', type: null, config: null, secret });
    for (const secret of [
      'not-a-whsec-key',
      'ak_c264f1e9a7b3d5c8e2f4a6b1d3c5e7f9',
      'whsec_',
      'whsec_!!not*base64!!',
      `whsec_${'q'.repeat(43)} `,
      key(16),
      key(65),
      Buffer.alloc(32, 7).toString('base64'),
    ]) {
      assertJsonApiError(await api.post(PATH, hmac(secret)), 422, 'invalid_request', { pointer: '/data/attributes/secret' });
    }
    for (const bytes of [24, 32, 64]) assert.equal((await api.post(PATH, hmac(key(bytes)))).status, 201, String(bytes));
    assert.equal((await api.post(PATH, hmac(`whsec_${'q'.repeat(43)}`))).status, 201, 'unpadded base64');
    assert.equal((await api.post(PATH, hmac(null))).status, 201, 'no secret yet');

    const created = await api.post(PATH, hmac(key(32)));
    const id = created.body.data.id;
    const patch = (attributes: Record<string, unknown>) => api.patch(`${PATH}/${id}`, { data: { type: 'external_connector', id, attributes } });
    assertJsonApiError(await patch({ secret: 'plain' }), 422, 'invalid_request', { pointer: '/data/attributes/secret' });
    const other = await api.post(PATH, connector({ secret: 'plain' }));
    assert.equal(other.status, 201, 'other auth types take any secret');
    const otherId = other.body.data.id;
    const toHmac = await api.patch(`${PATH}/${otherId}`, {
      data: { type: 'external_connector', id: otherId, attributes: { auth_type: 'hmac', secret: 'plain' } },
    });
    assertJsonApiError(toHmac, 422, 'invalid_request', { pointer: '/data/attributes/secret' });
    assert.equal((await patch({ secret: key(48) })).status, 200);
  });

  test('two connectors with the same secret store different ciphertexts', async () => {
    const a = await api.post(PATH, connector({ secret: 'same-secret' }));
    const b = await api.post(PATH, connector({ secret: 'same-secret' }));
    const rows = await t.deps.db.selectFrom('external_connectors').select('secret_ciphertext').where('id', 'in', [a.body.data.id, b.body.data.id]).execute();
    assert.notEqual(rows[0]!.secret_ciphertext, rows[1]!.secret_ciphertext);
  });
});

describe('input', () => {
  test('a base_url on a private, loopback, link-local or metadata address, in any spelling, is 422', async () => {
    for (const base_url of [
      'http://127.0.0.1:8080',
      'http://2130706433/',
      'http://0x7f.1/',
      'http://[::1]/',
      'http://[::ffff:10.0.0.1]/',
      'http://169.254.169.254/latest/meta-data',
      'http://192.168.0.10',
      'http://localhost/',
      'http://metadata.google.internal/',
    ]) {
      const r = await api.post(PATH, connector({ config: { base_url } }));
      assert.equal(r.status, 422, `${base_url}: ${r.text}`);
      assert.equal(r.body.errors[0].source.pointer, '/data/attributes/config/base_url');
    }
    for (const [config, pointer] of [
      [{ base_url: 'not a url' }, '/data/attributes/config/base_url'],
      [{ base_url: 'https://user:pw@api.example.com' }, '/data/attributes/config/base_url'],
      [{ header_name: 'X Bad Header' }, '/data/attributes/config/header_name'],
    ] as const) {
      const r = await api.post(PATH, connector({ config }));
      assert.equal(r.status, 422, r.text);
      assert.equal(r.body.errors[0].source.pointer, pointer);
    }
  });

  test('with ALLOW_PRIVATE_EGRESS=true a private base_url is accepted', async () => {
    const open = await startApp({ ALLOW_PRIVATE_EGRESS: 'true' });
    try {
      const a = jsonApi(open, await tokenFor(open, await seedTenant(open.deps)));
      assert.equal((await a.post(PATH, connector({ config: { base_url: 'http://127.0.0.1:9000' } }))).status, 201);
    } finally {
      await open.close();
    }
  });

  test('unknown enum values, read-only attributes and a missing name are refused by name', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ auth_type: 'magic' }, '/data/attributes/auth_type'],
      [{ type: 'ftp' }, '/data/attributes/type'],
      [{ status: 'verified' }, '/data/attributes/status'],
      [{ has_secret: true }, '/data/attributes/has_secret'],
      [{ name: undefined }, '/data/attributes/name'],
    ];
    for (const [extra, pointer] of cases) {
      const r = await api.post(PATH, connector(extra));
      assert.equal(r.status, 422, r.text);
      assert.equal(r.body.errors[0].source.pointer, pointer);
    }
  });
});

test('lists filter on type, direction, status, auth_type, provider_slug and name', async () => {
  const tenant = await seedTenant(t.deps);
  const a = jsonApi(t, await tokenFor(t, tenant));
  await a.post(PATH, connector({ name: 'Inbound hooks', auth_type: 'hmac', direction: 'inbound', type: null, config: null, provider_slug: 'acme' }));
  await a.post(PATH, connector({ name: 'Bucket', auth_type: 'none', type: 's3', direction: 'outbound', config: null }));
  const names = async (q: string) => (await a.get(`${PATH}?${q}&sort=name`)).body.data.map((r: { attributes: { name: string } }) => r.attributes.name);
  assert.deepEqual(await names('filter[direction]=inbound'), ['Inbound hooks']);
  assert.deepEqual(await names('filter[type]=s3'), ['Bucket']);
  assert.deepEqual(await names('filter[auth_type]=hmac'), ['Inbound hooks']);
  assert.deepEqual(await names('filter[provider_slug]=acme'), ['Inbound hooks']);
  assert.deepEqual(await names('filter[status]=unverified'), ['Bucket', 'Inbound hooks']);
  assert.deepEqual(await names('filter[name][contains]=Buck'), ['Bucket']);
});
