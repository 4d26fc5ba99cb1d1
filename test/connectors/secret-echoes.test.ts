/**
 * Providers that echo what they were sent (the mock's /echo/request and /echo/token): the
 * credential forms the service sent do not come back into a run record, a step error or a
 * connector's last_error, as an admin or a member reads them, nor into the database.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { jsonApi, seedAccount, tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type MockProvider } from './mock-provider.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true' });
const mock: MockProvider = await mockProvider();
after(() => mock.close());
const member = jsonApi(f.t, await tokenFor(f.t, await seedAccount(f.t.deps, f.tenant, { role: 'member' })));

// Characters that base64, URL and form encoding change.
const SECRET = 'pä ss+wo/rd=&%2Fx:y';

async function connector(attributes: Record<string, unknown>): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: 'Echo', type: 'http', direction: 'outbound', ...attributes } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

async function run(steps: unknown[]): Promise<any> {
  const { tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
  assert.equal(d.status, 202, d.text);
  return (await waitForRun(f, d.body.workflow_run_id)).id;
}

/** The run as a member reads it, and every stored row of the run and connector tables, as text. */
async function everywhere(runId: string): Promise<string> {
  const read = await member.get(`${API}/workflow_runs/${runId}`);
  assert.equal(read.status, 200, read.text);
  const stored = await sql<{ t: string }>`select t::text as t from workflow_runs as t union all select c::text from external_connectors as c`.execute(
    f.t.deps.db,
  );
  return [read.text, ...stored.rows.map((r) => r.t)].join('\n');
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const form = (s: string) => new URLSearchParams({ s }).toString().slice(2);

describe('a provider echoing its request', () => {
  it('basic_auth: neither "Basic <base64>" nor the base64 of user:secret is kept in the run record', async () => {
    const id = await connector({ auth_type: 'basic_auth', secret: SECRET, config: { base_url: mock.url, username: 'loader' } });
    const runId = await run([
      {
        key: 'echo',
        type: 'http_request',
        config: { connector_id: id, method: 'POST', path: '/echo/request', query: { s: JSON.stringify(SECRET) }, body: '{"note": "hello"}' },
      },
    ]);
    const sent = mock.requests.filter((r) => r.path.startsWith('/echo/request')).at(-1)!;
    assert.equal(sent.headers.authorization, `Basic ${b64(`loader:${SECRET}`)}`, 'the provider got the credentials');
    const text = await everywhere(runId);
    const read = JSON.parse(text.split('\n')[0]!).data.attributes;
    assert.equal(read.status, 'succeeded', JSON.stringify(read));
    assert.equal(read.steps[0].output.body.headers.authorization, '[redacted]');
    assert.equal(read.steps[0].output.body.body, '{"note":"hello"}', 'what is not a credential is kept');
    for (const leak of [b64(`loader:${SECRET}`), `Basic ${b64(`loader:${SECRET}`)}`, SECRET, encodeURIComponent(SECRET), form(SECRET), b64(SECRET)]) {
      assert.ok(!text.includes(leak), `${leak} is in the run record or the database`);
    }
  });

  it('api_key, bearer_token, hmac and an oauth2 access token: no header value set for auth comes back', async () => {
    const whsec = `whsec_${Buffer.from('k'.repeat(24) + 'é/+').toString('base64')}`;
    mock.script('/oauth/token', { status: 200, body: { access_token: 'at-Zq9/+=secret-token', expires_in: 3600 } });
    const ids = [
      await connector({ auth_type: 'api_key', secret: SECRET, config: { base_url: mock.url, header_name: 'X-Key' } }),
      await connector({ auth_type: 'bearer_token', secret: SECRET, config: { base_url: mock.url } }),
      await connector({ auth_type: 'hmac', secret: whsec, config: { base_url: mock.url } }),
      await connector({ auth_type: 'oauth2', secret: SECRET, config: { base_url: mock.url, token_url: `${mock.url}/oauth/token`, client_id: 'cid' } }),
    ];
    const runId = await run(
      ids.map((id, i) => ({ key: `e${i}`, type: 'http_request', config: { connector_id: id, method: 'POST', path: '/echo/request', body: '{"n": 1}' } })),
    );
    const text = await everywhere(runId);
    assert.equal(JSON.parse(text.split('\n')[0]!).data.attributes.status, 'succeeded');
    const key = whsec.slice(6);
    for (const leak of [
      SECRET,
      `Bearer ${SECRET}`,
      encodeURIComponent(SECRET),
      key,
      Buffer.from(key, 'base64').toString('base64url'),
      'at-Zq9/+=secret-token',
      encodeURIComponent('at-Zq9/+=secret-token'),
    ]) {
      assert.ok(!text.includes(leak), `${leak} is in the run record or the database`);
    }
  });

  it('oauth2: a token endpoint quoting the request body leaves no client_secret in the run error nor in last_error as a member reads it', async () => {
    const id = await connector({
      auth_type: 'oauth2',
      secret: SECRET,
      config: { base_url: mock.url, token_url: `${mock.url}/echo/token`, client_id: 'cid', scopes: ['read'] },
    });
    const runId = await run([{ key: 'call', type: 'http_request', config: { connector_id: id, method: 'GET', path: '/anything' } }]);
    const sent = mock.requests.filter((r) => r.path === '/echo/token').at(-1)!;
    assert.match(sent.body, /client_secret=/, 'the token endpoint got the client secret');
    const text = await everywhere(runId);
    const read = JSON.parse(text.split('\n')[0]!).data.attributes;
    assert.equal(read.status, 'failed');
    for (const leak of ['client_secret', sent.body, form(SECRET), SECRET]) assert.ok(!text.includes(leak), `${leak} is in the run record or the database`);
    assert.match(read.error, /The token endpoint refused the client credentials \(400\): invalid_client for \[redacted\]$/);

    const verified = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    assert.equal(verified.body.data.attributes.status, 'failing');
    const asMember = await member.get(`${API}/external_connectors/${id}`);
    assert.equal(asMember.status, 200, asMember.text);
    const lastError: string = asMember.body.data.attributes.last_error;
    assert.match(lastError, /^GET http:\/\/127\.0\.0\.1:\d+\/: The token endpoint refused the client credentials \(400\)/);
    assert.match(lastError, /\[redacted\]/);
    for (const leak of ['client_secret', 'client_id=cid', form(SECRET), SECRET]) assert.ok(!lastError.includes(leak), `${leak} is in last_error: ${lastError}`);
  });

  it("last_error keeps at most a 512-character excerpt of the provider's answer", async () => {
    const id = await connector({ auth_type: 'oauth2', secret: SECRET, config: { base_url: mock.url, token_url: `${mock.url}/oauth/token`, client_id: 'cid' } });
    mock.script('/oauth/token', { status: 401, body: { error: `invalid_client ${'x'.repeat(5000)}` } });
    const verified = await f.api.post(`${API}/external_connectors/${id}/verify`, undefined);
    const lastError: string = verified.body.data.attributes.last_error;
    const prefix = `GET ${mock.url}/: `;
    assert.ok(lastError.startsWith(prefix), lastError);
    assert.match(lastError.slice(prefix.length), /^The token endpoint refused the client credentials \(401\): invalid_client x+\.\.\.$/);
    assert.ok(
      lastError.length <= prefix.length + 'The token endpoint refused the client credentials (401): '.length + 512 + 3,
      `${lastError.length} characters`,
    );
  });
});
