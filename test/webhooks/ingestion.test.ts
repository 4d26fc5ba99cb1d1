/**
 * Webhook ingestion: every row of the contract's error table with its exact text, in the
 * order of the checks; Standard Webhooks and svix signatures from the real sender
 * libraries; API-key connectors; the legacy path; hostile deliveries; no secret in logs.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, it } from 'node:test';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import * as admin from '../../src/admin/service.ts';
import { capturingLogger, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, createModel, deliver, save, saveOk, startFlow, waitForRun, type Flow } from './helpers.ts';

const lines: Array<Record<string, unknown>> = [];
const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '1000' }, { worker: true, log: capturingLogger(lines, 'debug') });
await createModel(f, 'events', [{ name: 'event_id', type: 'string' }]);
const STEPS = [{ key: 'note', type: 'transform', config: { expression: 'payload' } }];

const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;
async function connector(authType: string, secret: string | null, config: Record<string, unknown> | null = null): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: `in ${authType}`, auth_type: authType, direction: 'inbound', secret, config } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}
async function hookWith(
  inboundConnectorId: string | null = null,
  serviceAccountId = f.tenant.credentialId,
): Promise<{ path: string; token: string; workflowId: string }> {
  const { tokens, workflow } = await saveOk(f, {
    step_params: STEPS,
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: serviceAccountId, inbound_connector_id: inboundConnectorId }],
  });
  return { path: `/api/v1/webhooks/${tokens.hook}`, token: tokens.hook!, workflowId: workflow.id };
}
const error = (d: { status: number; body: any; text: string }, status: number, text: string) => {
  assert.equal(d.status, status, d.text);
  assert.equal(d.body.error, text, d.text);
};

const plain = await hookWith();
const HMAC_SECRET = whsec();
const hmac = await hookWith(await connector('hmac', HMAC_SECRET));
const API_KEY = randomBytes(32).toString('base64url');
const apiKey = await hookWith(await connector('api_key', API_KEY));
const customHeader = await hookWith(await connector('api_key', API_KEY, { header_name: 'X-Partner-Key' }));
const secrets = [plain.token, hmac.token, apiKey.token, customHeader.token, HMAC_SECRET, API_KEY];

describe('the checks, in order, with the contract texts', () => {
  it('202 accepted, then 202 duplicate', async () => {
    const a = await deliver(f, plain.path, '{"id":1}', { 'idempotency-key': 'order-1' });
    assert.equal(a.status, 202, a.text);
    assert.equal(a.body.status, 'accepted');
    assert.match(a.body.workflow_run_id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const b = await deliver(f, plain.path, '{"id":1}', { 'idempotency-key': 'order-1' });
    assert.equal(b.status, 202);
    assert.deepEqual(b.body, { status: 'duplicate' });
  });

  it('413 Request body too large comes before authentication', async () => {
    error(await deliver(f, plain.path, 'x'.repeat(1_048_577), {}, null), 413, 'Request body too large');
  });

  it('401 missing_credentials: no bearer, a malformed one, a forged one, a revoked account', async () => {
    error(await deliver(f, plain.path, '{}', {}, null), 401, 'missing_credentials');
    error(await deliver(f, plain.path, '{}', { authorization: 'Basic abc' }, null), 401, 'missing_credentials');
    error(await deliver(f, plain.path, '{}', {}, `${f.bearer.slice(0, -4)}AAAA`), 401, 'missing_credentials');
    const other = await seedAccount(f.t.deps, f.tenant, { scopes: ['webhooks'] });
    const token = await tokenFor(f.t, other);
    await admin.updateCredential(f.t.deps.db, other.credentialId, { revoke_tokens: true }, new Date(Date.now() + 1000));
    error(await deliver(f, plain.path, '{}', {}, token), 401, 'missing_credentials');
    // The bearer check comes before the trigger lookup: an unknown token is still 401 without a bearer.
    error(await deliver(f, '/api/v1/webhooks/tbwh_unknown', '{}', {}, null), 401, 'missing_credentials');
  });

  it('404 Trigger not found: unknown token, inactive workflow, trigger left out of a save', async () => {
    error(await deliver(f, `/api/v1/webhooks/tbwh_${randomBytes(32).toString('base64url')}`, '{}'), 404, 'Trigger not found');
    const h = await hookWith();
    const wf = await f.api.get(`${API}/workflows/${h.workflowId}`);
    const trigger = wf.body.data.attributes.triggers[0];
    const off = await save(f, { workflow_id: h.workflowId, wf_params: { name: 'Orders', is_active: false }, step_params: STEPS, trigger_params: [trigger] });
    assert.equal(off.status, 201, off.text);
    error(await deliver(f, h.path, '{}'), 404, 'Trigger not found');
    const on = await save(f, { workflow_id: h.workflowId, step_params: STEPS, trigger_params: [trigger] });
    assert.equal(on.status, 201, on.text);
    assert.equal((await deliver(f, h.path, '{}')).status, 202, 'the kept trigger answers again');
    const dropped = await save(f, { workflow_id: h.workflowId, step_params: STEPS, trigger_params: [] });
    assert.equal(dropped.status, 201, dropped.text);
    error(await deliver(f, h.path, '{}'), 404, 'Trigger not found');
  });

  it('401 Unauthorized: a token of another account of the workspace, or of another organization', async () => {
    const sibling = await seedAccount(f.t.deps, f.tenant, { scopes: ['webhooks', 'api_read'] });
    error(await deliver(f, plain.path, '{}', {}, await tokenFor(f.t, sibling)), 401, 'Unauthorized');
    const stranger = await seedTenant(f.t.deps);
    error(await deliver(f, plain.path, '{}', {}, await tokenFor(f.t, stranger)), 401, 'Unauthorized');
  });

  it("403 Insufficient scope: the trigger's own account without webhooks", async () => {
    error(await deliver(f, plain.path, '{}', {}, await tokenFor(f.t, f.tenant, 'api_read api_write')), 403, 'Insufficient scope');
  });

  it('422 Unsupported trigger authentication: basic_auth and bearer_token connectors', async () => {
    for (const mode of ['basic_auth', 'bearer_token']) {
      const h = await hookWith(await connector(mode, 'irrelevant'));
      error(await deliver(f, h.path, '{}', { authorization: `Bearer ${f.bearer}` }), 422, 'Unsupported trigger authentication');
    }
  });

  it('422 Processing failed: not JSON, not UTF-8, too deep, wrong or no media type, empty', async () => {
    error(await deliver(f, plain.path, '{"a":'), 422, 'Processing failed');
    error(await deliver(f, plain.path, Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 422, 'Processing failed');
    error(await deliver(f, plain.path, `${'['.repeat(65)}${']'.repeat(65)}`), 422, 'Processing failed');
    const wrong = await deliver(f, plain.path, '{}', { 'content-type': 'text/plain' });
    error(wrong, 422, 'Processing failed');
    assert.match(wrong.body.detail, /Content-Type must be application\/json/);
    error(await deliver(f, plain.path, ''), 422, 'Processing failed');
    // 64 levels are fine.
    assert.equal((await deliver(f, plain.path, `${'['.repeat(64)}${']'.repeat(64)}`)).status, 202);
  });

  it('404 for another path under the prefix, 405 for another method, in the webhook shape', async () => {
    error(await deliver(f, `${plain.path}/extra/segment`, '{}'), 404, 'Trigger not found');
    const res = await fetch(`${f.t.url}${plain.path}`, { method: 'GET' });
    assert.equal(res.status, 405);
    assert.ok(typeof ((await res.json()) as any).error === 'string');
  });
});

describe('a streamed body over the limit', () => {
  it('is cut off with 413 without a Content-Length', async () => {
    // Far more than the socket buffers of loopback hold (a few MiB): a client can write that much
    // before the server's answer only if the server goes on reading, however loaded the machine.
    const whole = 64 * 1_048_576;
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= whole) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${f.t.url}${plain.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${f.bearer}` },
      body,
      duplex: 'half',
    } as RequestInit).catch((err: unknown) => err);
    // The server answers 413 and closes; a client still sending may see the reset instead.
    if (res instanceof Response) {
      assert.equal(res.status, 413);
      assert.equal(((await res.json()) as any).error, 'Request body too large');
    } else {
      assert.ok(res instanceof Error);
    }
    assert.ok(sent < whole, 'the server stopped reading before the whole body');
  });
});

/**
 * One request written on a raw socket; resolves with what the server sent and whether it
 * closed the connection within `closeWithinMs` (a bound far above the few ms it takes).
 */
function rawExchange(request: string, closeWithinMs = 15_000): Promise<{ status: number; headers: Record<string, string>; body: string; closed: boolean }> {
  const { port } = new URL(f.t.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...fields] = head.split('\r\n');
      const headers = Object.fromEntries(fields.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n'), closed });
    };
    const timer = setTimeout(() => done(false), closeWithinMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => done(true));
    socket.write(request);
  });
}

describe('answers on the socket before the request is read', () => {
  const head = (extra: string, path = plain.path) => `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${extra}\r\n`;

  it('431 for headers too large is in the webhook shape on the webhook path, JSON:API elsewhere', async () => {
    const big = `X-Big: ${'a'.repeat(20_000)}\r\n`;
    const r = await rawExchange(head(big));
    assert.equal(r.status, 431);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(r.body), { error: 'Processing failed', detail: 'The request headers are too large' });
    assert.ok(r.closed);
    const other = await rawExchange(head(big, `${API}/data_models`));
    assert.equal(other.status, 431);
    assert.equal(JSON.parse(other.body).errors[0].detail, 'The request headers are too large');
  });

  it('400 for a malformed request and for a URL the router cannot read, in the webhook shape', async () => {
    const malformed = await rawExchange(head('Not a header\r\n'));
    assert.equal(malformed.status, 400);
    assert.deepEqual(JSON.parse(malformed.body), { error: 'Processing failed', detail: 'The request could not be read' });
    const badUrl = await rawExchange(head('Content-Length: 2\r\nConnection: close\r\n', '/api/v1/webhooks/%zz') + '{}');
    assert.equal(badUrl.status, 400, badUrl.body);
    assert.deepEqual(JSON.parse(badUrl.body), { error: 'Processing failed', detail: 'The request could not be read' });
  });

  it('413 for a Content-Length over the limit closes the connection once the answer is sent', async () => {
    const r = await rawExchange(head(`Authorization: Bearer ${f.bearer}\r\nContent-Length: ${50 * 1_048_576}\r\n`));
    assert.equal(r.status, 413);
    assert.deepEqual(JSON.parse(r.body), { error: 'Request body too large' });
    assert.equal(r.headers.connection, 'close');
    assert.ok(r.closed, 'the server closed the connection instead of waiting for the 50 MB');
  });
});

describe('Standard Webhooks (hmac) connectors', () => {
  const body = JSON.stringify({ payload: { id: 'e-1', kind: 'signed' } });
  const signed = (
    sign: (id: string, at: Date, payload: string) => string,
    prefix: 'webhook' | 'svix',
    at = new Date(),
    id = `msg_${randomBytes(8).toString('hex')}`,
    payload = body,
  ) => ({
    [`${prefix}-id`]: id,
    [`${prefix}-timestamp`]: String(Math.floor(at.getTime() / 1000)),
    [`${prefix}-signature`]: sign(id, at, payload),
  });
  const sw = new StandardWebhook(HMAC_SECRET);
  const svix = new SvixWebhook(HMAC_SECRET);

  it('accepts deliveries signed by the standardwebhooks library', async () => {
    const d = await deliver(
      f,
      hmac.path,
      body,
      signed((id, at, p) => sw.sign(id, at, p), 'webhook'),
    );
    assert.equal(d.status, 202, d.text);
    const run = await waitForRun(f, d.body.workflow_run_id);
    assert.deepEqual(run.attributes.payload, { id: 'e-1', kind: 'signed' });
  });

  it('accepts deliveries signed by the svix library (svix-* headers)', async () => {
    const d = await deliver(
      f,
      hmac.path,
      body,
      signed((id, at, p) => svix.sign(id, at, p), 'svix'),
    );
    assert.equal(d.status, 202, d.text);
  });

  it('accepts one matching signature among several (key rotation)', async () => {
    const headers = signed((id, at, p) => `v1,${randomBytes(32).toString('base64')} ${sw.sign(id, at, p)}`, 'webhook');
    assert.equal((await deliver(f, hmac.path, body, headers)).status, 202);
  });

  it('refuses a changed byte, an old or future timestamp, a missing header, another secret: 401 Unauthorized', async () => {
    const headers = signed((id, at, p) => sw.sign(id, at, p), 'webhook');
    error(await deliver(f, hmac.path, body.replace('signed', 'signeD'), headers), 401, 'Unauthorized');
    const old = new Date(Date.now() - 6 * 60_000);
    error(
      await deliver(
        f,
        hmac.path,
        body,
        signed((id, at, p) => sw.sign(id, at, p), 'webhook', old),
      ),
      401,
      'Unauthorized',
    );
    const future = new Date(Date.now() + 6 * 60_000);
    error(
      await deliver(
        f,
        hmac.path,
        body,
        signed((id, at, p) => sw.sign(id, at, p), 'webhook', future),
      ),
      401,
      'Unauthorized',
    );
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const h = { ...headers };
      delete h[name];
      error(await deliver(f, hmac.path, body, h), 401, 'Unauthorized');
    }
    const stranger = new StandardWebhook(whsec());
    error(
      await deliver(
        f,
        hmac.path,
        body,
        signed((id, at, p) => stranger.sign(id, at, p), 'webhook'),
      ),
      401,
      'Unauthorized',
    );
    error(await deliver(f, hmac.path, body, { ...headers, 'webhook-signature': headers['webhook-signature']!.replace('v1,', 'v2,') }), 401, 'Unauthorized');
  });

  it('checks the signature before the body is parsed: a signed non-JSON body is 422, an unsigned one 401', async () => {
    const text = 'not json';
    error(
      await deliver(
        f,
        hmac.path,
        text,
        signed((id, at, p) => sw.sign(id, at, p), 'webhook', new Date(), 'msg_x', text),
      ),
      422,
      'Processing failed',
    );
    error(await deliver(f, hmac.path, text), 401, 'Unauthorized');
  });

  it('a connector without a secret verifies nothing: 401', async () => {
    const h = await hookWith(await connector('hmac', null));
    error(
      await deliver(
        f,
        h.path,
        body,
        signed((id, at, p) => sw.sign(id, at, p), 'webhook'),
      ),
      401,
      'Unauthorized',
    );
  });
});

describe('API-key connectors', () => {
  it('compare X-Api-Key by default, or the configured header', async () => {
    assert.equal((await deliver(f, apiKey.path, '{}', { 'x-api-key': API_KEY })).status, 202);
    error(await deliver(f, apiKey.path, '{}', { 'x-api-key': `${API_KEY}x` }), 401, 'Unauthorized');
    error(await deliver(f, apiKey.path, '{}'), 401, 'Unauthorized');
    assert.equal((await deliver(f, customHeader.path, '{}', { 'x-partner-key': API_KEY })).status, 202);
    error(await deliver(f, customHeader.path, '{}', { 'x-api-key': API_KEY }), 401, 'Unauthorized');
  });
});

describe('delivery identity and payload', () => {
  it('takes the first non-empty of the four headers, never X-Request-Id', async () => {
    const a = await deliver(f, plain.path, '{"n":1}', { 'idempotency-key': ' ', 'x-alpha-delivery': 'alpha-1', 'x-gamma-idempotency-token': 'gamma-1' });
    const run = await f.api.get(`${API}/workflow_runs/${a.body.workflow_run_id}`);
    assert.equal(run.body.data.attributes.delivery_id, 'alpha-1');
    assert.equal((await deliver(f, plain.path, '{"n":2}', { 'x-alpha-delivery': 'alpha-1' })).body.status, 'duplicate');
    assert.equal((await deliver(f, plain.path, '{"n":3}', { 'x-gamma-idempotency-token': 'gamma-1' })).body.status, 'accepted');
    const r1 = await deliver(f, plain.path, '{"n":4}', { 'x-request-id': 'same' });
    const r2 = await deliver(f, plain.path, '{"n":5}', { 'x-request-id': 'same' });
    assert.equal(r1.body.status, 'accepted');
    assert.equal(r2.body.status, 'accepted');
  });

  it('without a header, a byte-identical body deduplicates and another body does not', async () => {
    const body = JSON.stringify({ nonce: randomBytes(8).toString('hex') });
    assert.equal((await deliver(f, plain.path, body)).body.status, 'accepted');
    assert.equal((await deliver(f, plain.path, body)).body.status, 'duplicate');
    assert.equal((await deliver(f, plain.path, `${body} `)).body.status, 'accepted');
  });

  it('deduplicates per organization, across triggers', async () => {
    const other = await hookWith();
    assert.equal((await deliver(f, plain.path, '{}', { 'idempotency-key': 'shared-key' })).body.status, 'accepted');
    assert.equal((await deliver(f, other.path, '{}', { 'idempotency-key': 'shared-key' })).body.status, 'duplicate');
  });

  it('uses the payload member when there is one, else the whole document', async () => {
    const a = await deliver(f, plain.path, JSON.stringify({ payload: [1, 2], other: true }));
    const b = await deliver(f, plain.path, JSON.stringify({ other: true }));
    const c = await deliver(f, plain.path, JSON.stringify({ payload: null }));
    const get = async (id: string) => (await f.api.get(`${API}/workflow_runs/${id}`)).body.data.attributes.payload;
    assert.deepEqual(await get(a.body.workflow_run_id), [1, 2]);
    assert.deepEqual(await get(b.body.workflow_run_id), { other: true });
    assert.equal(await get(c.body.workflow_run_id), null);
  });
});

describe('the legacy organization-qualified path', () => {
  it('routes with the trigger organization domain, with a Deprecation header; another domain is 404', async () => {
    const org = await f.t.deps.db.selectFrom('organizations').select('domain').where('id', '=', f.tenant.organizationId).executeTakeFirstOrThrow();
    const d = await deliver(f, `/api/v1/webhooks/${org.domain.toUpperCase()}/${plain.token}`, '{"legacy":true}');
    assert.equal(d.status, 202, d.text);
    assert.equal(d.headers.get('deprecation'), 'true');
    error(await deliver(f, `/api/v1/webhooks/other.example/${plain.token}`, '{}'), 404, 'Trigger not found');
  });
});

describe('rate window per trigger', () => {
  it('429 Rate limit exceeded with Retry-After once the window is spent', async () => {
    // Windows align to the clock: a day-long one cannot turn over mid-test.
    const limited = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '3', WEBHOOK_RATE_LIMIT_WINDOW_SECONDS: '86400' }, { worker: false });
    const { tokens } = await saveOk(limited, { step_params: STEPS });
    const path = `/api/v1/webhooks/${tokens.hook}`;
    for (let i = 0; i < 3; i++) assert.equal((await deliver(limited, path, `{"i":${i}}`)).status, 202);
    const over = await deliver(limited, path, '{"i":9}');
    error(over, 429, 'Rate limit exceeded');
    assert.match(over.headers.get('retry-after') ?? '', /^\d+$/);
    assert.ok(Number(over.headers.get('retry-after')) >= 1);
  });
});

describe('secrets', () => {
  it('no trigger token or connector secret appears in any log line', async () => {
    // Failed and successful deliveries above were all logged at debug level.
    assert.ok(lines.length > 20, `only ${lines.length} lines were logged`);
    const all = JSON.stringify(lines);
    for (const s of secrets) assert.ok(!all.includes(s), 'a secret reached the log');
    const stored =
      JSON.stringify(await f.t.deps.db.selectFrom('workflow_triggers').selectAll().execute()) +
      JSON.stringify(await f.t.deps.db.selectFrom('external_connectors').selectAll().execute());
    for (const s of secrets) assert.ok(!stored.includes(s), 'a secret is stored in plain form');
  });
});
