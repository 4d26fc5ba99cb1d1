/**
 * The CLI's JSON:API client (@tributary/client with the CLI's credentials and errors) against a
 * running server: credentials, token exchange and renewal, errors in the CLI's words.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { loadCliConfig } from '../../src/config.ts';
import { AdminApiError, UsageError } from '../../src/cli/admin-client.ts';
import { all, createApiClient, resolveApiSettings } from '../../src/cli/api-client.ts';
import { adminCall, appWithTenant } from '../helpers/app.ts';
import { freePort } from '../helpers/cli.ts';

const { t, tenant } = await appWithTenant();
const credentials = { clientId: tenant.clientId, clientSecret: tenant.clientSecret, source: 'test' };

it('reads with a token it exchanged, and knows its own account and organization', async () => {
  const client = createApiClient({ url: t.url, credentials });
  const page = await client.list('data_models');
  assert.deepEqual(page.data, []);
  assert.deepEqual(await client.identity(), { clientId: tenant.clientId, credentialId: tenant.credentialId, organizationId: tenant.organizationId });
});

it('exchanges once more when the server refuses its token (401), and goes on', async () => {
  const client = createApiClient({ url: t.url, credentials });
  await client.list('data_models');
  // Every token minted so far is refused from now on; the account itself still works.
  const revoked = await adminCall(t, 'PATCH', `/credentials/${tenant.credentialId}`, { revoke_tokens: true });
  assert.equal(revoked.status, 200, revoked.text);
  const page = await client.list('data_models');
  assert.deepEqual(page.data, []);
  assert.equal(client.exchanges, 2);
});

it('a refused account or a JSON:API error becomes one AdminApiError, never with the secret', async () => {
  const wrong = createApiClient({ url: t.url, credentials: { ...credentials, clientSecret: 'tbcs_wrong-secret-value' } });
  await assert.rejects(wrong.list('data_models'), (err: unknown) => {
    assert.ok(err instanceof AdminApiError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_client');
    assert.ok(!err.message.includes('tbcs_wrong-secret-value'));
    assert.match(err.message, new RegExp(tenant.clientId));
    return true;
  });
  const client = createApiClient({ url: t.url, credentials });
  await assert.rejects(client.create('data_models', { type: 'data_model', attributes: { name: 'x', slug: 'Bad Slug' } }), (err: unknown) => {
    assert.ok(err instanceof AdminApiError);
    assert.equal(err.status, 422);
    assert.deepEqual(err.source, { pointer: '/data/attributes/slug' });
    return true;
  });
  const nowhere = createApiClient({ url: `http://127.0.0.1:${await freePort()}`, credentials });
  await assert.rejects(nowhere.list('data_models'), { code: 'connection_refused', status: null });
  // An iteration fails the same way.
  await assert.rejects(all(client, 'data_models', { filter: { nope: 'x' } as never }), (err: unknown) => err instanceof AdminApiError && err.status === 400);
});

it('finds the credentials: --credentials, then TRIBUTARY_CLIENT_ID/SECRET, then TRIBUTARY_CREDENTIALS_FILE, then DATA_DIR/bootstrap.json', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-cred-'));
  fs.writeFileSync(path.join(dir, 'bootstrap.json'), JSON.stringify({ client_id: 'tbci_boot', client_secret: 's1' }));
  fs.writeFileSync(path.join(dir, 'other.json'), JSON.stringify({ client_id: 'tbci_other', client_secret: 's2' }));
  const env = (e: Record<string, string>) => () => loadCliConfig({ DATA_DIR: dir, ...e });
  assert.equal(resolveApiSettings({}, env({})).credentials.clientId, 'tbci_boot');
  assert.equal(resolveApiSettings({}, env({ TRIBUTARY_CREDENTIALS_FILE: path.join(dir, 'other.json') })).credentials.clientId, 'tbci_other');
  assert.equal(resolveApiSettings({}, env({ TRIBUTARY_CLIENT_ID: 'tbci_env', TRIBUTARY_CLIENT_SECRET: 's3' })).credentials.clientId, 'tbci_env');
  assert.equal(
    resolveApiSettings({ credentialsFile: path.join(dir, 'other.json') }, env({ TRIBUTARY_CLIENT_ID: 'tbci_env', TRIBUTARY_CLIENT_SECRET: 's3' })).credentials
      .clientId,
    'tbci_other',
  );
  assert.equal(resolveApiSettings({}, env({ PORT: '9191' })).url, 'http://127.0.0.1:9191');
  assert.throws(() => resolveApiSettings({}, env({ TRIBUTARY_CLIENT_ID: 'tbci_env' })), /TRIBUTARY_CLIENT_SECRET must be set together/);
  assert.throws(
    () => resolveApiSettings({}, () => loadCliConfig({ DATA_DIR: path.join(dir, 'none') })),
    (err: unknown) => {
      assert.ok(err instanceof UsageError);
      assert.match(err.message, /no client credentials: cannot read .*bootstrap\.json \(no such file\)/);
      return true;
    },
  );
  fs.writeFileSync(path.join(dir, 'bad.json'), JSON.stringify({ client_id: 'tbci_x' }));
  assert.throws(() => resolveApiSettings({ credentialsFile: path.join(dir, 'bad.json') }), /has no client_id and client_secret strings/);
});

it('all() follows links.next to the end of a list', async () => {
  const client = createApiClient({ url: t.url, credentials });
  for (const slug of ['page-a', 'page-b', 'page-c']) await client.create('data_models', { type: 'data_model', attributes: { name: slug, slug } });
  const models = await all(client, 'data_models', { page: { limit: 1 }, sort: 'slug' });
  assert.deepEqual(
    models.map((m) => m.attributes.slug),
    ['page-a', 'page-b', 'page-c'],
  );
});

it('through the SDK: a 503 is tried again; a proxy’s page, a failed exchange and an answer that never comes are said in the CLI’s words', async () => {
  const settings = { url: 'http://tributary.invalid', credentials: { clientId: 'tbci_x', clientSecret: 'tbcs_not-printed', source: 'creds.json' } };
  const token = () => new Response(JSON.stringify({ access_token: 'tok', token_type: 'bearer', expires_in: 900 }), { status: 200 });
  const scripted = (answers: Array<(init?: RequestInit) => Response | Promise<Response>>, exchange: () => Response = token) => {
    const paths: string[] = [];
    const fetch = async (input: string | URL | Request, init?: RequestInit) => {
      const p = new URL(String(input)).pathname;
      paths.push(p);
      return p === '/api/v1/oauth/token' ? exchange() : answers.shift()!(init);
    };
    return { paths, fetch: fetch as typeof globalThis.fetch };
  };

  const busy = scripted([
    () => new Response('{"errors":[{"code":"unavailable"}]}', { status: 503, headers: { 'retry-after': '0' } }),
    () => new Response(JSON.stringify({ data: [], links: {} }), { status: 200 }),
  ]);
  assert.deepEqual((await createApiClient(settings, { fetch: busy.fetch }).list('data_models')).data, []);
  assert.deepEqual(busy.paths, ['/api/v1/oauth/token', '/api/json/v1/data_models', '/api/json/v1/data_models']);

  const proxy = scripted([() => new Response('<html><body>Bad Gateway</body></html>', { status: 502 })]);
  await assert.rejects(createApiClient(settings, { fetch: proxy.fetch }).list('data_models'), {
    message: 'the server answered HTTP 502',
    status: 502,
    code: 'http_error',
  });

  const scope = scripted([], () => new Response(JSON.stringify({ error: 'invalid_scope', error_description: 'api_admin is not granted' }), { status: 400 }));
  await assert.rejects(createApiClient(settings, { fetch: scope.fetch }).list('data_models'), (err: unknown) => {
    assert.ok(err instanceof AdminApiError);
    assert.equal(err.message, 'the token exchange for the client credentials from creds.json (client_id tbci_x) failed (HTTP 400): api_admin is not granted');
    assert.equal(err.code, 'invalid_scope');
    return true;
  });

  const never = (init?: RequestInit) => new Promise<Response>((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason)));
  const silent = scripted([never, never, never]);
  await assert.rejects(createApiClient(settings, { fetch: silent.fetch, timeoutMs: 1000 }).list('data_models'), (err: unknown) => {
    assert.ok(err instanceof AdminApiError);
    assert.equal(err.message, 'no answer from the server at http://tributary.invalid within 1 s');
    assert.equal(err.status, null);
    assert.equal(err.code, 'timeout');
    return true;
  });
  assert.equal(silent.paths.length, 4, 'the exchange, then three tries');
});
