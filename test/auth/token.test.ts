/**
 * POST /api/v1/oauth/token: real OAuth clients (openid-client v6, simple-oauth2) against a
 * real socket, the JSON body variant, and every RFC 6749 5.2 failure.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from 'openid-client';
import { ClientCredentials } from 'simple-oauth2';
import * as admin from '../../src/admin/service.ts';
import { dataModelDoc, jsonApi, seedAccount, seedTenant, startApp, tokenFor, appWithTenant } from '../helpers/app.ts';

const { t, tenant } = await appWithTenant();

const tokenUrl = () => `${t.url}/api/v1/oauth/token`;

interface Raw {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

async function exchange(init: { body?: string | URLSearchParams; contentType?: string; authorization?: string }): Promise<Raw> {
  const headers: Record<string, string> = {};
  if (init.contentType !== undefined) headers['content-type'] = init.contentType;
  if (init.authorization !== undefined) headers.authorization = init.authorization;
  const res = await fetch(tokenUrl(), { method: 'POST', headers, body: init.body });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

const form = (params: Record<string, string>) => ({ body: new URLSearchParams(params).toString(), contentType: 'application/x-www-form-urlencoded' });
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

/** An RFC 6749 5.2 error response: exact status and code, no-store, and no secret in the body. */
function assertOAuthError(res: Raw, status: number, error: string, secrets: string[] = [tenant.clientSecret]): void {
  assert.equal(res.status, status, res.text);
  assert.ok(res.body && typeof res.body === 'object', `expected a JSON body, got ${res.text}`);
  assert.equal(res.body.error, error, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.equal(res.headers.get('pragma'), 'no-cache');
  assert.equal(res.body.access_token, undefined);
  for (const s of secrets) assert.ok(!res.text.includes(s), 'an error body must not contain the secret');
}

async function assertTokenReads(token: string): Promise<void> {
  const res = await jsonApi(t, token).get('/api/json/v1/organizations');
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(
    res.body.data.map((o: any) => o.id),
    [tenant.organizationId],
  );
}

describe('openid-client v6 client-credentials grant', () => {
  for (const [name, auth] of [
    ['client_secret_post', client.ClientSecretPost],
    ['client_secret_basic', client.ClientSecretBasic],
  ] as const) {
    test(name, async () => {
      const config = new client.Configuration(
        { issuer: t.url, token_endpoint: tokenUrl() },
        tenant.clientId,
        { client_secret: tenant.clientSecret },
        auth(tenant.clientSecret),
      );
      client.allowInsecureRequests(config);
      const tokens = await client.clientCredentialsGrant(config, { scope: 'api_read' });
      assert.equal(tokens.token_type, 'bearer');
      assert.equal(tokens.expires_in, 900);
      assert.equal(tokens.scope, 'api_read');
      assert.equal(typeof tokens.access_token, 'string');
      await assertTokenReads(tokens.access_token);
    });
  }

  test('a wrong secret surfaces to the client: invalid_client (post), a Basic challenge (basic)', async () => {
    const post = new client.Configuration(
      { issuer: t.url, token_endpoint: tokenUrl() },
      tenant.clientId,
      { client_secret: 'nope' },
      client.ClientSecretPost('nope'),
    );
    client.allowInsecureRequests(post);
    await assert.rejects(client.clientCredentialsGrant(post), (err: unknown) => {
      assert.ok(err instanceof client.ResponseBodyError, String(err));
      assert.equal(err.error, 'invalid_client');
      assert.equal(err.status, 401);
      return true;
    });
    const basicConfig = new client.Configuration(
      { issuer: t.url, token_endpoint: tokenUrl() },
      tenant.clientId,
      { client_secret: 'nope' },
      client.ClientSecretBasic('nope'),
    );
    client.allowInsecureRequests(basicConfig);
    await assert.rejects(client.clientCredentialsGrant(basicConfig), (err: unknown) => {
      assert.ok(err instanceof client.WWWAuthenticateChallengeError, String(err));
      assert.equal(err.status, 401);
      assert.equal(err.cause[0]?.scheme, 'basic');
      return true;
    });
  });
});

describe('simple-oauth2 ClientCredentials', () => {
  for (const authorizationMethod of ['body', 'header'] as const) {
    test(`authorizationMethod ${authorizationMethod}`, async () => {
      const cc = new ClientCredentials({
        client: { id: tenant.clientId, secret: tenant.clientSecret },
        auth: { tokenHost: t.url, tokenPath: '/api/v1/oauth/token' },
        options: { authorizationMethod },
      });
      const accessToken = await cc.getToken({ scope: 'api_read' });
      assert.equal(accessToken.token.token_type, 'bearer');
      assert.equal(accessToken.token.expires_in, 900);
      assert.equal(accessToken.expired(), false);
      await assertTokenReads(accessToken.token.access_token as string);
    });
  }
});

describe('successful exchange', () => {
  test('JSON body, no-store headers, all granted scopes by default', async () => {
    const res = await exchange({
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret }),
      contentType: 'application/json',
    });
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('pragma'), 'no-cache');
    assert.equal(res.body.token_type, 'bearer');
    assert.equal(res.body.expires_in, 900);
    assert.deepEqual(res.body.scope.split(' ').sort(), ['api_read', 'api_write', 'embed', 'webhooks']);
    await assertTokenReads(res.body.access_token);
  });

  test('form body with Basic credentials and client_id repeated in the body (allowed when equal)', async () => {
    const res = await exchange({
      ...form({ grant_type: 'client_credentials', client_id: tenant.clientId }),
      authorization: basic(tenant.clientId, tenant.clientSecret),
    });
    assert.equal(res.status, 200, res.text);
    await assertTokenReads(res.body.access_token);
  });

  test('expires_in follows TOKEN_TTL_SECONDS', async () => {
    const t2 = await startApp({ TOKEN_TTL_SECONDS: '120' });
    try {
      const other = await seedTenant(t2.deps);
      const res = await fetch(`${t2.url}/api/v1/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: other.clientId, client_secret: other.clientSecret }),
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { access_token: string; expires_in: number };
      assert.equal(body.expires_in, 120);
      // The token itself lives exactly that long.
      const minted = t2.deps.clock();
      const api = jsonApi(t2, body.access_token);
      const realClock = t2.deps.clock;
      try {
        t2.deps.clock = () => minted + 110_000;
        assert.equal((await api.get('/api/json/v1/organizations')).status, 200);
        t2.deps.clock = () => minted + 121_000;
        assert.equal((await api.get('/api/json/v1/organizations')).status, 401);
      } finally {
        t2.deps.clock = realClock;
      }
    } finally {
      await t2.close();
    }
  });

  test('a requested scope subset is honoured: api_read token cannot write although the account holds api_write', async () => {
    const doc = (slug: string) => dataModelDoc({ name: `Model ${slug}`, slug });
    const readOnly = jsonApi(t, await tokenFor(t, tenant, 'api_read'));
    const refused = await readOnly.post('/api/json/v1/data_models', doc('subset-a'));
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.errors[0].code, 'forbidden');
    assert.equal((await readOnly.get('/api/json/v1/organizations')).status, 200);
    // Control: the same document with a full token is created.
    const full = jsonApi(t, await tokenFor(t, tenant));
    const created = await full.post('/api/json/v1/data_models', doc('subset-b'));
    assert.equal(created.status, 201, created.text);
  });

  test('a duplicated scope in the request is accepted once', async () => {
    const res = await exchange(
      form({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret, scope: 'api_read api_read' }),
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.scope, 'api_read');
  });
});

describe('RFC 6749 5.2 errors', () => {
  const good = () => ({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret });

  test('missing grant_type: 400 invalid_request', async () => {
    const { grant_type: _g, ...rest } = good();
    assertOAuthError(await exchange(form(rest)), 400, 'invalid_request');
  });

  test('grant_type=password: 400 unsupported_grant_type', async () => {
    assertOAuthError(await exchange(form({ ...good(), grant_type: 'password' })), 400, 'unsupported_grant_type');
  });

  test('unknown client: 401 invalid_client', async () => {
    const res = await exchange(form({ ...good(), client_id: 'tbci_does-not-exist' }));
    assertOAuthError(res, 401, 'invalid_client');
    assert.equal(res.headers.get('www-authenticate'), null, 'no Basic challenge when Basic was not used');
  });

  test('wrong secret in the body: 401 invalid_client', async () => {
    const wrong = `${tenant.clientSecret.slice(0, -1)}${tenant.clientSecret.endsWith('A') ? 'B' : 'A'}`;
    const res = await exchange(form({ ...good(), client_secret: wrong }));
    assertOAuthError(res, 401, 'invalid_client', [tenant.clientSecret, wrong]);
    assert.equal(res.headers.get('www-authenticate'), null);
  });

  test('missing client credentials: 401 invalid_client', async () => {
    assertOAuthError(await exchange(form({ grant_type: 'client_credentials', client_id: tenant.clientId })), 401, 'invalid_client');
  });

  test('Basic with a wrong secret: 401 invalid_client with WWW-Authenticate: Basic', async () => {
    const res = await exchange({ ...form({ grant_type: 'client_credentials' }), authorization: basic(tenant.clientId, 'wrong-secret') });
    assertOAuthError(res, 401, 'invalid_client', [tenant.clientSecret, 'wrong-secret']);
    assert.match(res.headers.get('www-authenticate') ?? '', /^Basic( |$)/);
  });

  test('Basic with an unknown client: 401 invalid_client with WWW-Authenticate: Basic', async () => {
    const res = await exchange({ ...form({ grant_type: 'client_credentials' }), authorization: basic('tbci_nobody', tenant.clientSecret) });
    assertOAuthError(res, 401, 'invalid_client');
    assert.match(res.headers.get('www-authenticate') ?? '', /^Basic( |$)/);
  });

  test('inactive account: 401 invalid_client', async () => {
    const acct = await seedAccount(t.deps, tenant);
    await admin.updateCredential(t.deps.db, acct.credentialId, { is_active: false }, new Date(t.deps.clock()));
    assertOAuthError(
      await exchange(form({ grant_type: 'client_credentials', client_id: acct.clientId, client_secret: acct.clientSecret })),
      401,
      'invalid_client',
      [acct.clientSecret],
    );
    const viaBasic = await exchange({ ...form({ grant_type: 'client_credentials' }), authorization: basic(acct.clientId, acct.clientSecret) });
    assertOAuthError(viaBasic, 401, 'invalid_client', [acct.clientSecret]);
    assert.match(viaBasic.headers.get('www-authenticate') ?? '', /^Basic( |$)/);
  });

  test('inactive run-as membership: 401 invalid_client', async () => {
    const acct = await seedAccount(t.deps, tenant);
    assert.ok(await tokenFor(t, acct), 'control: the account can exchange before the change');
    await admin.deactivateMember(t.deps.db, acct.membershipId, new Date(t.deps.clock()));
    assertOAuthError(
      await exchange(form({ grant_type: 'client_credentials', client_id: acct.clientId, client_secret: acct.clientSecret })),
      401,
      'invalid_client',
      [acct.clientSecret],
    );
  });

  test('scope not granted: 400 invalid_scope', async () => {
    const reader = await seedAccount(t.deps, tenant, { scopes: ['api_read'] });
    const params = { grant_type: 'client_credentials', client_id: reader.clientId, client_secret: reader.clientSecret };
    assertOAuthError(await exchange(form({ ...params, scope: 'api_write' })), 400, 'invalid_scope', [reader.clientSecret]);
    assertOAuthError(await exchange(form({ ...params, scope: 'api_read api_write' })), 400, 'invalid_scope', [reader.clientSecret]);
    // Control: the granted scope alone is fine.
    assert.equal((await exchange(form({ ...params, scope: 'api_read' }))).status, 200);
  });

  test('unknown scope name: 400 invalid_scope', async () => {
    assertOAuthError(await exchange(form({ ...good(), scope: 'admin' })), 400, 'invalid_scope');
    assertOAuthError(await exchange(form({ ...good(), scope: 'api_read toString' })), 400, 'invalid_scope');
  });

  test('both Basic and a body secret: 400 invalid_request', async () => {
    const res = await exchange({
      ...form({ grant_type: 'client_credentials', client_secret: tenant.clientSecret }),
      authorization: basic(tenant.clientId, tenant.clientSecret),
    });
    assertOAuthError(res, 400, 'invalid_request');
  });

  test('Basic and a different client_id in the body: 400 invalid_request', async () => {
    const res = await exchange({
      ...form({ grant_type: 'client_credentials', client_id: 'tbci_someone-else' }),
      authorization: basic(tenant.clientId, tenant.clientSecret),
    });
    assertOAuthError(res, 400, 'invalid_request');
  });

  test('a repeated parameter in a form body: 400 invalid_request', async () => {
    const body = `${new URLSearchParams(good()).toString()}&grant_type=client_credentials`;
    assertOAuthError(await exchange({ body, contentType: 'application/x-www-form-urlencoded' }), 400, 'invalid_request');
    const scopeTwice = `${new URLSearchParams(good()).toString()}&scope=api_read&scope=api_write`;
    assertOAuthError(await exchange({ body: scopeTwice, contentType: 'application/x-www-form-urlencoded' }), 400, 'invalid_request');
  });

  test('a non-string member in a JSON body: 400 invalid_request', async () => {
    const res = await exchange({ body: JSON.stringify({ ...good(), grant_type: ['client_credentials'] }), contentType: 'application/json' });
    assertOAuthError(res, 400, 'invalid_request');
  });

  test('a text/plain body: 400 invalid_request', async () => {
    assertOAuthError(await exchange({ body: new URLSearchParams(good()).toString(), contentType: 'text/plain' }), 400, 'invalid_request');
  });

  test('no body at all: 400 invalid_request', async () => {
    assertOAuthError(await exchange({}), 400, 'invalid_request');
  });

  test('a JSON array body: 400 invalid_request', async () => {
    assertOAuthError(await exchange({ body: JSON.stringify([good()]), contentType: 'application/json' }), 400, 'invalid_request');
  });

  test('malformed JSON: 400 with an error member, never 500', async () => {
    const body = `{"grant_type":"client_credentials","client_id":"${tenant.clientId}","client_secret":"${tenant.clientSecret}"`;
    const res = await exchange({ body, contentType: 'application/json' });
    assertOAuthError(res, 400, 'invalid_request');
  });

  test('an empty JSON body: 400 with an error member', async () => {
    assertOAuthError(await exchange({ body: '', contentType: 'application/json' }), 400, 'invalid_request');
  });
});
