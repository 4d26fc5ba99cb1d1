/**
 * Secrets sent in the wrong place (query strings, path ids, filter values, X-Request-Id)
 * never reach a log line; the token endpoint refuses credentials in the query string; the
 * completion line of a failed request names its error code. The log is the app's real
 * output, read from the stream its logger writes to, over a real socket.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { capturedLog } from '../helpers/log-capture.ts';
import { JSONAPI, jsonApi, seedTenant, startApp, tokenFor, type TestApp, type Tenant } from '../helpers/app.ts';

const { log, lines } = capturedLog();

let t: TestApp;
let tenant: Tenant;
let token: string;

before(async () => {
  t = await startApp({}, { log });
  tenant = await seedTenant(t.deps);
  token = await tokenFor(t, tenant);
});
after(() => t.close());

const P = '/api/json/v1';

interface Entry {
  reqId?: string;
  msg?: string;
  code?: string;
  req?: { url: string };
  res?: { statusCode: number };
}

function entries(): Entry[] {
  return lines.map((l) => JSON.parse(l) as Entry);
}

function linesOf(reqId: string): Entry[] {
  return entries().filter((e) => e.reqId === reqId);
}

/** The secret is in no log line, neither whole nor the random part after its prefix. */
function assertNotLogged(secret: string): void {
  const body = secret.slice(secret.indexOf('_') + 1);
  const hit = lines.find((l) => l.includes(secret) || l.includes(body));
  assert.equal(hit, undefined, `secret logged: ${hit}`);
}

test('the token endpoint refuses credentials in the query string, and the log keeps none of them', async () => {
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenant.clientId, client_secret: tenant.clientSecret });
  for (const query of [form.toString(), `client_secret=${encodeURIComponent(tenant.clientSecret)}`, `access_token=${token}`, `x=${token}`]) {
    const res = await fetch(`${t.url}/api/v1/oauth/token?${query}`, { method: 'POST', body: form });
    assert.equal(res.status, 400, query);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const body = (await res.json()) as { error: string; error_description: string };
    assert.equal(body.error, 'invalid_request');
    assert.match(body.error_description, /must not be sent in the query string/);
    const completed = linesOf(res.headers.get('x-request-id')!).find((e) => e.msg === 'request completed');
    assert.equal(completed?.code, 'invalid_request');
  }
  // Query parameters that carry no credentials are not refused.
  const ok = await fetch(`${t.url}/api/v1/oauth/token?lang=en`, { method: 'POST', body: form });
  assert.equal(ok.status, 200);
  assertNotLogged(tenant.clientSecret);
  assertNotLogged(token);
});

test('secrets in the query, path, filter values and X-Request-Id are not logged', async () => {
  const api = jsonApi(t, token);
  const misplaced = [
    await api.get(`${P}/data_models?access_token=${token}`),
    await api.get(`${P}/data_models?filter[name]=${token}`),
    await api.get(`${P}/data_models?filter[retention_days]=${encodeURIComponent(tenant.clientSecret)}`),
    await api.get(`${P}/data_models/${token}`),
    await api.get(`${P}/data_models/prefix-${tenant.clientSecret}`),
    await api.get(`${P}/data_models`, { 'x-request-id': tenant.clientSecret }),
    await api.get(`${P}/data_models`, { 'x-request-id': token }),
  ];
  const admin = await fetch(`${t.url}/admin/v1/sweep?token=${t.adminToken}`, { method: 'POST' });
  assert.equal(admin.status, 401);
  const adminPath = await fetch(`${t.url}/admin/v1/credentials/${t.adminToken}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.ok(adminPath.status >= 400 && adminPath.status < 500, String(adminPath.status));

  for (const res of misplaced) {
    assert.ok(res.status < 500, res.text);
    // Neither an error body nor a list's links repeat a secret the caller sent.
    assert.ok(!res.text.includes(token) && !res.text.includes(tenant.clientSecret), `secret echoed: ${res.text}`);
  }
  for (const secret of [token, tenant.clientSecret, t.adminToken]) assertNotLogged(secret);
  for (const res of [...misplaced.map((r) => r.headers), admin.headers, adminPath.headers]) {
    const id = res.get('x-request-id')!;
    assert.ok(
      linesOf(id).some((e) => e.msg === 'request completed'),
      `no completion line for ${id}`,
    );
  }
  // Query values are left out of the logged URL, whatever they look like.
  const logged = linesOf(misplaced[0]!.headers.get('x-request-id')!).find((e) => e.msg === 'incoming request');
  assert.equal(logged?.req?.url, `${P}/data_models?access_token=[redacted]`);
});

const HEX_KEY = 'ak_c264f1e9a7b3d5c8e2f4a6b1d3c5e7f9';

test('an X-Request-Id that is a secret, too long or not printable is replaced by a generated id', async () => {
  const api = jsonApi(t, token);
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const randomLooking = tenant.clientSecret.slice('tbcs_'.length);
  for (const given of [tenant.clientSecret, randomLooking, HEX_KEY, 'c264f1e9a7b3d5c8e2f4a6b1d3c5e7f9a0b2c4d6', 'a'.repeat(129), 'has space', 'caf\u00e9']) {
    const res = await api.get(`${P}/data_models`, { 'x-request-id': given });
    assert.equal(res.status, 200);
    const id = res.headers.get('x-request-id')!;
    assert.match(id, uuid, given);
    assert.ok(linesOf(id).length >= 2, 'the generated id is the reqId of the request lines');
  }
  assertNotLogged(tenant.clientSecret);
  assertNotLogged(HEX_KEY);
  // A short printable id is kept, echoed and logged.
  const kept = await api.get(`${P}/data_models`, { 'x-request-id': 'trace-0190a4f2.7' });
  assert.equal(kept.headers.get('x-request-id'), 'trace-0190a4f2.7');
  assert.ok(linesOf('trace-0190a4f2.7').length >= 2);
});

test("a list's links do not repeat a secret-looking filter value; other filter values stay", async () => {
  const api = jsonApi(t, token);
  for (const secret of [token, HEX_KEY]) {
    const res = await api.get(`${P}/data_models?filter[name]=${encodeURIComponent(secret)}&page[limit]=5`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.links.self, `${P}/data_models?filter[name]=[redacted]&page[limit]=5`);
    assert.ok(!res.text.includes(secret.slice(secret.indexOf('_') + 1)), res.text);
  }
  const plain = await api.get(`${P}/data_models?filter[name]=Orders`);
  assert.equal(plain.body.links.self, `${P}/data_models?filter[name]=Orders`);
});

test('a configured admin token without our prefix is redacted wherever it appears', async () => {
  const adminToken = 'plain-admin-token-for-this-installation-0123456789';
  const { log: ownLog, lines: own } = capturedLog({ adminToken });
  const a = await startApp({ TRIBUTARY_ADMIN_TOKEN: adminToken }, { log: ownLog });
  try {
    // In a path (not only the query string), percent-encoded, in a header the logger writes, in an error message.
    const inPath = await fetch(`${a.url}/admin/v1/credentials/${adminToken}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.ok(inPath.status >= 400 && inPath.status < 500, String(inPath.status));
    assert.equal((await fetch(`${a.url}/no/${encodeURIComponent(`${adminToken} `)}`)).status, 404);
    a.deps.log.warn({ err: new Error(`refused ${adminToken}`) }, `token ${adminToken}`);
    assert.ok(own.length > 0);
    const hit = own.find((l) => l.includes(adminToken) || l.includes(encodeURIComponent(adminToken)));
    assert.equal(hit, undefined, `admin token logged: ${hit}`);
    assert.ok(own.some((l) => l.includes('[redacted]')));
  } finally {
    await a.close();
  }
});

test('the completion line of a 4xx carries the error code; a success carries none', async () => {
  const api = jsonApi(t, token);
  const bad = await api.get(`${P}/data_models?filter[nope]=1`);
  assert.equal(bad.status, 400);
  const completed = linesOf(bad.headers.get('x-request-id')!).find((e) => e.msg === 'request completed');
  assert.equal(completed?.code, 'invalid_query');
  assert.equal(completed?.res?.statusCode, 400);

  const unauthorized = await fetch(`${t.url}${P}/data_models`, { headers: { accept: JSONAPI } });
  assert.equal(linesOf(unauthorized.headers.get('x-request-id')!).find((e) => e.msg === 'request completed')?.code, 'unauthorized');

  const graphql = await fetch(`${t.url}/api/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ factQuery(dataModelSlug: "x") { count } }' }),
  });
  assert.equal(graphql.status, 401);
  assert.equal(linesOf(graphql.headers.get('x-request-id')!).find((e) => e.msg === 'request completed')?.code, 'unauthorized');

  const good = await api.get(`${P}/data_models`);
  const done = linesOf(good.headers.get('x-request-id')!).find((e) => e.msg === 'request completed');
  assert.equal(done?.res?.statusCode, 200);
  assert.equal(done?.code, undefined);
});

test('log lines carry ISO times', () => {
  const line = JSON.parse(lines[0]!) as { time: unknown };
  assert.match(String(line.time), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
});
