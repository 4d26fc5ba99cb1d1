/**
 * The relay (src/relay/), with the service's worker off (runs stay queued): a provider without a bearer token reaches a verified trigger
 * through it; a trigger that verifies nothing is refused; one exchange however many
 * deliveries wait for a token; 429/503 go back with Retry-After; 401 missing_credentials
 * means one exchange and one retry with the same delivery id; no secret in any log line.
 * Between the relay and the service sits a counting proxy that can answer in the
 * service's place.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createRelay, type Relay } from '../../src/relay/relay.ts';
import { loadConfig } from '../../src/config.ts';
import { capturingLogger } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, type Flow } from './helpers.ts';

const appLines: Array<Record<string, unknown>> = [];
const relayLines: Array<Record<string, unknown>> = [];
const f: Flow = await startFlow({ WEBHOOK_RATE_LIMIT_MAX: '100000' }, { worker: false, log: capturingLogger(appLines, 'debug') });

// The proxy between the relay and the service: counts exchanges, records the ingestion
// requests' headers, and answers in the service's place when `intercept` says so.
const seen = { exchanges: 0, exchangeBodies: [] as string[], deliveries: [] as http.IncomingHttpHeaders[] };
type Canned = { status: number; headers: Record<string, string>; body: string };
let intercept: ((url: string) => Canned | undefined) | undefined;
const HOP = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
const proxy = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/api/v1/oauth/token') {
      seen.exchanges++;
      seen.exchangeBodies.push(Buffer.concat(chunks).toString('utf8'));
    } else seen.deliveries.push(req.headers);
    const canned = intercept?.(req.url ?? '');
    if (canned) {
      res.writeHead(canned.status, canned.headers).end(canned.body);
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && !HOP.has(k)) headers[k] = v;
    fetch(`${f.t.url}${req.url}`, { method: req.method, headers, body: Buffer.concat(chunks) }).then(
      async (r) => {
        const out: Record<string, string> = {};
        r.headers.forEach((v, k) => {
          if (!HOP.has(k)) out[k] = v;
        });
        res.writeHead(r.status, out).end(Buffer.from(await r.arrayBuffer()));
      },
      () => res.destroy(),
    );
  });
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
after(() => new Promise((resolve) => proxy.close(resolve)));
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

let now = Date.now();
const config = loadConfig({ DATA_DIR: f.t.config.dataDir, LOG_LEVEL: 'debug', SHUTDOWN_GRACE_MS: '1000' });
async function relayFor(clientSecret = f.tenant.clientSecret): Promise<{ relay: Relay; url: string }> {
  const relay = await createRelay({
    config,
    log: capturingLogger(relayLines, 'debug'),
    targetUrl: proxyUrl,
    credentials: () => ({ clientId: f.tenant.clientId, clientSecret }),
    clock: () => now,
  });
  after(() => relay.stop());
  return { relay, url: await relay.listen(0, '127.0.0.1') };
}
const { relay, url: relayUrl } = await relayFor();

async function viaRelay(token: string, body: string, headers: Record<string, string> = {}, base = relayUrl) {
  const res = await fetch(`${base}/hooks/${token}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

async function connector(authType: string, secret: string): Promise<string> {
  const r = await f.api.post(`${API}/external_connectors`, {
    data: { type: 'external_connector', attributes: { name: `in ${authType}`, auth_type: authType, direction: 'inbound', secret } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}
async function trigger(inboundConnectorId: string | null): Promise<string> {
  const { tokens } = await saveOk(f, {
    step_params: [{ key: 'note', type: 'transform', config: { expression: 'payload' } }],
    trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId, inbound_connector_id: inboundConnectorId }],
  });
  return tokens.hook!;
}

const WHSEC = `whsec_${randomBytes(32).toString('base64')}`;
const API_KEY = randomBytes(32).toString('base64url');
const signed = await trigger(await connector('hmac', WHSEC));
const keyed = await trigger(await connector('api_key', API_KEY));
const bare = await trigger(null);

function standardWebhook(id: string, body: string): Record<string, string> {
  // The service checks the timestamp by its own clock; `now` is the relay's.
  const at = new Date();
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(WHSEC).sign(id, at, body) };
}

describe('the relay', () => {
  it('a Standard Webhooks sender without a bearer token: 202 and one run, then duplicate', async () => {
    const body = JSON.stringify({ payload: { order: 'A-1' } });
    const a = await viaRelay(signed, body, standardWebhook('msg_relay_1', body));
    assert.equal(a.status, 202, a.text);
    assert.equal(a.body.status, 'accepted');
    const run = await f.api.get(`${API}/workflow_runs/${a.body.workflow_run_id}`);
    assert.equal(run.status, 200, run.text);
    assert.deepEqual(run.body.data.attributes.payload, { order: 'A-1' });
    const again = await viaRelay(signed, body, standardWebhook('msg_relay_1', body));
    assert.equal(again.status, 202, again.text);
    assert.deepEqual(again.body, { status: 'duplicate' });
    // A signature over other bytes is the service's 401, passed through.
    const forged = await viaRelay(signed, '{"payload":{"order":"B"}}', standardWebhook('msg_relay_2', body));
    assert.equal(forged.status, 401, forged.text);
    assert.deepEqual(forged.body, { error: 'Unauthorized', detail: 'signature mismatch' });
  });

  it('a trigger without a verifying connector: 401 Unauthorized through the relay, unchanged directly', async () => {
    const r = await viaRelay(bare, '{"x":1}', { 'idempotency-key': 'bare-1' });
    assert.equal(r.status, 401, r.text);
    assert.deepEqual(r.body, { error: 'Unauthorized' });
    // The header alone makes the difference: the same delivery with a bearer token, directly.
    const direct = await deliver(f, `/api/v1/webhooks/${bare}`, '{"x":1}', { 'idempotency-key': 'bare-1' });
    assert.equal(direct.status, 202, direct.text);
    const asked = await deliver(f, `/api/v1/webhooks/${bare}`, '{"x":1}', { 'idempotency-key': 'bare-2', 'tributary-require-verification': 'true' });
    assert.equal(asked.status, 401, asked.text);
    // A trigger token that names no trigger stays 404.
    const unknown = await viaRelay(`tbwh_${randomBytes(32).toString('base64url')}`, '{}', { 'x-api-key': API_KEY });
    assert.equal(unknown.status, 404, unknown.text);
  });

  it('an API-key sender: the key header goes through unchanged', async () => {
    const ok = await viaRelay(keyed, '{"k":1}', { 'x-api-key': API_KEY, 'idempotency-key': 'key-1' });
    assert.equal(ok.status, 202, ok.text);
    const wrong = await viaRelay(keyed, '{"k":1}', { 'x-api-key': 'not-the-key', 'idempotency-key': 'key-2' });
    assert.equal(wrong.status, 401, wrong.text);
  });

  it('one exchange however many deliveries wait: at the first token, at renewal, after expiry', async () => {
    const send = (n: number, tag: string) =>
      Promise.all(Array.from({ length: n }, (_, i) => viaRelay(keyed, `{"n":${i}}`, { 'x-api-key': API_KEY, 'idempotency-key': `${tag}-${i}` })));
    const cold = await relayFor();
    const before = seen.exchanges;
    const first = await Promise.all(
      Array.from({ length: 200 }, (_, i) => viaRelay(keyed, `{"n":${i}}`, { 'x-api-key': API_KEY, 'idempotency-key': `cold-${i}` }, cold.url)),
    );
    assert.ok(
      first.every((r) => r.status === 202),
      first.map((r) => r.status).join(),
    );
    assert.equal(seen.exchanges - before, 1, 'one exchange for 200 deliveries without a token');
    assert.equal(cold.relay.tokens.exchanges, 1);

    await send(1, 'warm');
    const start = seen.exchanges;
    // Past the renewal point, before expiry (900 s tokens): renewed once, in the background.
    now += 800_000;
    const renewing = await send(200, 'renew');
    assert.ok(renewing.every((r) => r.status === 202));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(seen.exchanges - start, 1, 'one exchange for 200 deliveries at renewal');
    // Past expiry: every delivery waits for the one exchange.
    now += 1_000_000;
    const expired = await send(200, 'expired');
    assert.ok(expired.every((r) => r.status === 202));
    assert.equal(seen.exchanges - start, 2, 'one exchange for 200 deliveries after expiry');
  });

  it('503 and 429 reach the provider with their Retry-After', async () => {
    for (const [status, text, retry] of [
      [503, 'Processing temporarily unavailable', '7'],
      [429, 'Rate limit exceeded', '42'],
    ] as const) {
      intercept = (u) =>
        u.startsWith('/api/v1/webhooks/')
          ? { status, headers: { 'content-type': 'application/json', 'retry-after': retry }, body: JSON.stringify({ error: text }) }
          : undefined;
      try {
        const r = await viaRelay(keyed, '{}', { 'x-api-key': API_KEY, 'idempotency-key': `busy-${status}` });
        assert.equal(r.status, status, r.text);
        assert.equal(r.headers.get('retry-after'), retry);
        assert.deepEqual(r.body, { error: text });
      } finally {
        intercept = undefined;
      }
    }
  });

  it('the service unreachable: 503 with Retry-After, nothing stored', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const orphan = await createRelay({ config, log: capturingLogger(relayLines, 'debug'), targetUrl: `http://127.0.0.1:${port}`, credentials: () => f.tenant });
    after(() => orphan.stop());
    const url = await orphan.listen(0, '127.0.0.1');
    const r = await viaRelay(keyed, '{}', { 'x-api-key': API_KEY }, url);
    assert.equal(r.status, 503, r.text);
    assert.ok(Number(r.headers.get('retry-after')) > 0);
    assert.deepEqual(r.body, { error: 'Processing temporarily unavailable' });
  });

  it('401 missing_credentials: one exchange and one retry with the same delivery id', async () => {
    let refusals = 1;
    intercept = (u) =>
      u.startsWith('/api/v1/webhooks/') && refusals-- > 0
        ? { status: 401, headers: { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }, body: '{"error":"missing_credentials"}' }
        : undefined;
    try {
      const exchanges = seen.exchanges;
      const deliveries = seen.deliveries.length;
      const body = JSON.stringify({ payload: { retry: true } });
      const r = await viaRelay(signed, body, standardWebhook('msg_retry_1', body));
      assert.equal(r.status, 202, r.text);
      assert.equal(seen.exchanges - exchanges, 1);
      const [first, second, ...more] = seen.deliveries.slice(deliveries);
      assert.equal(more.length, 0);
      assert.equal(first!['webhook-id'], 'msg_retry_1');
      assert.equal(second!['webhook-id'], 'msg_retry_1');
      assert.equal(second!['webhook-signature'], first!['webhook-signature']);
      assert.notEqual(second!.authorization, first!.authorization, 'the retry carries the new token');
    } finally {
      intercept = undefined;
    }
    // Refused again after the retry: no loop, the provider is told to come back later.
    intercept = (u) =>
      u.startsWith('/api/v1/webhooks/') ? { status: 401, headers: { 'content-type': 'application/json' }, body: '{"error":"missing_credentials"}' } : undefined;
    try {
      const deliveries = seen.deliveries.length;
      const r = await viaRelay(keyed, '{}', { 'x-api-key': API_KEY, 'idempotency-key': 'refused-twice' });
      assert.equal(r.status, 503, r.text);
      assert.equal(seen.deliveries.length - deliveries, 2);
    } finally {
      intercept = undefined;
    }
  });

  it('413 before reading when Content-Length is over the limit; /healthz', async () => {
    const r = await viaRelay(keyed, 'x'.repeat(config.webhookMaxBodyBytes + 1), { 'x-api-key': API_KEY });
    assert.equal(r.status, 413, r.text);
    assert.deepEqual(r.body, { error: 'Request body too large' });
    const h = await fetch(`${relayUrl}/healthz`);
    assert.equal(h.status, 200);
  });

  it('a refused account: 503 to the provider, the reason in the log, no secret', async () => {
    const wrong = `tbcs_${randomBytes(32).toString('base64url')}`;
    const bad = await relayFor(wrong);
    const r = await viaRelay(keyed, '{}', { 'x-api-key': API_KEY }, bad.url);
    assert.equal(r.status, 503, r.text);
    assert.ok(relayLines.some((l) => /no bearer token/.test(String(l.msg)) && /invalid_client/.test(String(l.reason))));
    assert.ok(!JSON.stringify(relayLines).includes(wrong));
  });

  it('every refusal of its own in the webhook shape, never Fastify’s, echoing neither the token nor the path', async () => {
    const long = `tbwh_${'x'.repeat(600)}`;
    const check = (r: { status: number; text: string; headers: Headers }, status: number, error: string) => {
      assert.equal(r.status, status, r.text);
      assert.equal(r.headers.get('content-type')?.split(';')[0], 'application/json');
      assert.equal(JSON.parse(r.text).error, error, r.text);
      assert.doesNotMatch(r.text, /FST_ERR|xxxxxxxx|tbwh_|hooks|statusCode/);
    };
    const before = seen.deliveries.length;
    // A token longer than any trigger's: no trigger has it.
    check(await viaRelay(long, '{}', { 'x-api-key': API_KEY }), 404, 'Trigger not found');
    // A path the router cannot read (a broken percent-escape).
    check(await viaRelay('tbwh_%E0%A4%A', '{}', { 'x-api-key': API_KEY }), 404, 'Trigger not found');
    check(await viaRelay('a/b', '{}'), 404, 'Trigger not found');
    check(
      await fetch(`${relayUrl}/elsewhere/tbwh_xxxxxxxxxx`, { method: 'POST', body: '{}' }).then(async (r) => ({
        ...r,
        status: r.status,
        headers: r.headers,
        text: await r.text(),
      })),
      404,
      'Trigger not found',
    );
    // A wrong method: 405 with Allow, whatever the token.
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const r = await fetch(`${relayUrl}/hooks/${keyed}`, { method, body: method === 'GET' ? undefined : '{}' });
      const text = await r.text();
      check({ status: r.status, text, headers: r.headers }, 405, 'Method not allowed');
      assert.equal(r.headers.get('allow'), 'POST');
      assert.ok(!text.includes(keyed));
    }
    const longGet = await fetch(`${relayUrl}/hooks/${long}`);
    check({ status: longGet.status, text: await longGet.text(), headers: longGet.headers }, 405, 'Method not allowed');
    // A streamed body over the limit (no Content-Length): 413, cut off while read.
    const big = 'x'.repeat(config.webhookMaxBodyBytes + 10);
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const streamed = await fetch(`${relayUrl}/hooks/${keyed}`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
      headers: { 'content-type': 'application/json' },
    } as RequestInit);
    check({ status: streamed.status, text: await streamed.text(), headers: streamed.headers }, 413, 'Request body too large');
    // A Content-Type the parser cannot read.
    check(await viaRelay(keyed, '{}', { 'content-type': '/;;;', 'x-api-key': API_KEY }), 422, 'Processing failed');
    assert.equal(seen.deliveries.length, before, 'nothing of these reached the service');
  });

  it('the token exchange asks for the webhooks scope only', async () => {
    const cold = await relayFor();
    const from = seen.exchangeBodies.length;
    const r = await viaRelay(keyed, '{}', { 'x-api-key': API_KEY, 'idempotency-key': 'scoped-1' }, cold.url);
    assert.equal(r.status, 202, r.text);
    assert.equal(seen.exchangeBodies.length - from, 1);
    for (const b of seen.exchangeBodies) assert.equal(new URLSearchParams(b).get('scope'), 'webhooks');
  });

  it('no secret in any log line: bearer tokens, client secret, trigger tokens, connector secrets', async () => {
    assert.ok(relayLines.length > 0 && appLines.length > 0);
    const text = JSON.stringify([...relayLines, ...appLines]);
    for (const secret of [f.tenant.clientSecret, f.bearer, signed, keyed, bare, WHSEC, API_KEY]) assert.ok(!text.includes(secret));
    assert.doesNotMatch(text, /tbat_[A-Za-z0-9_-]{8}/);
    assert.ok(relay.tokens.exchanges >= 1);
  });
});
