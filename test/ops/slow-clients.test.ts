/**
 * Slow senders on a real socket (HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS set to 500 ms):
 * a request whose headers or body trickle in gets 408 in the surface's error shape and its
 * connection closed; a streamed upload that keeps moving is not cut off; normal requests
 * are untouched.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, type TestModel } from '../facts/helpers.ts';

const TIMEOUT_MS = 500;
const CAP = 8;
let t: TestApp;
let tenant: Tenant;
let model: TestModel;

before(async () => {
  t = await startApp({ HEADERS_TIMEOUT_MS: String(TIMEOUT_MS), REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), MAX_CONNECTIONS_PER_ADDRESS: String(CAP) });
  tenant = await seedTenant(t.deps);
  model = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true, is_required: true }]);
});
after(() => t.close());

interface Outcome {
  /** Everything the server wrote. */
  text: string;
  /** The server closed the connection. */
  closed: boolean;
  /** ms from the first byte sent to the close. */
  ms: number;
}

/**
 * Sends `head` at once, then one byte of `trickle` every `everyMs` until the server closes
 * the connection or `maxMs` passes: ten times the timeout, so `closed` tells a timeout that
 * works from none, however busy the machine.
 */
async function slowRequest(head: string, trickle: string, everyMs = 100, maxMs = 10 * TIMEOUT_MS): Promise<Outcome> {
  const { port } = new URL(t.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const started = Date.now();
  let text = '';
  let closed = false;
  socket.setEncoding('utf8').on('data', (s: string) => (text += s));
  const done = new Promise<void>((resolve) => socket.once('close', () => ((closed = true), resolve())));
  socket.on('error', () => undefined);
  socket.write(head);
  for (let i = 0; !closed && Date.now() - started < maxMs; i++) {
    await sleep(everyMs);
    if (!closed && i < trickle.length) socket.write(trickle[i]!);
  }
  const ms = Date.now() - started;
  socket.destroy();
  await done;
  return { text, closed, ms };
}

function parse(text: string): { status: number; headers: Record<string, string>; body: unknown } {
  const [head, ...rest] = text.split('\r\n\r\n');
  const [statusLine, ...lines] = head!.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) };
}

function post(path: string, headers: Record<string, string>): string {
  return `POST ${path} HTTP/1.1\r\nHost: test\r\n${Object.entries({ 'content-length': '10000', ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}

test('a slow token request body gets 408 in the OAuth shape and the connection is closed', async () => {
  const r = await slowRequest(
    post('/api/v1/oauth/token', { 'content-type': 'application/x-www-form-urlencoded' }),
    'grant_type=client_credentials&client_id=x'.repeat(10),
  );
  assert.equal(r.closed, true, `held open for ${r.ms} ms: ${r.text}`);
  const res = parse(r.text);
  assert.equal(res.status, 408);
  assert.equal(res.headers.connection, 'close');
  assert.deepEqual(res.body, { error: 'invalid_request', error_description: `The request body did not arrive within ${TIMEOUT_MS} ms` });
});

test('a slow GraphQL body gets 408 as a GraphQL error; a slow JSON:API body as a JSON:API error', async () => {
  const token = await tokenFor(t, tenant);
  const gql = await slowRequest(
    post('/api/graphql', { 'content-type': 'application/json', authorization: `Bearer ${token}` }),
    '{"query":"{ health }"}'.repeat(20),
  );
  assert.equal(gql.closed, true);
  const g = parse(gql.text);
  assert.equal(g.status, 408);
  assert.equal(g.headers.connection, 'close');
  assert.deepEqual(g.body, { errors: [{ message: `The request body did not arrive within ${TIMEOUT_MS} ms`, extensions: { code: 'request_timeout' } }] });

  const api = await slowRequest(
    post('/api/json/v1/data_models', { 'content-type': 'application/vnd.api+json', authorization: `Bearer ${token}` }),
    '{"data":{}}'.repeat(40),
  );
  assert.equal(api.closed, true);
  const a = parse(api.text);
  assert.equal(a.status, 408);
  assert.equal((a.body as { errors: Array<{ code: string; status: string }> }).errors[0]!.code, 'request_timeout');
  assert.equal((a.body as { errors: Array<{ code: string; status: string }> }).errors[0]!.status, '408');
});

test('a body answered before it is read (no token) that keeps trickling is dropped after the timeout too', async () => {
  const r = await slowRequest(post('/api/json/v1/data_models', { 'content-type': 'application/vnd.api+json' }), '{"data":{}}'.repeat(40));
  assert.equal(r.closed, true, `held open for ${r.ms} ms`);
  assert.equal(parse(r.text).status, 401);
});

test('slow headers, or none at all, get 408 and the connection is closed', async () => {
  const slow = await slowRequest('GET /healthz HTTP/1.1\r\nHost: test\r\n', 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
  assert.equal(slow.closed, true, `held open for ${slow.ms} ms: ${slow.text}`);
  const res = parse(slow.text);
  assert.equal(res.status, 408);
  assert.equal(res.headers.connection, 'close');
  assert.equal((res.body as { errors: Array<{ code: string }> }).errors[0]!.code, 'request_timeout');

  const silent = await slowRequest('', '');
  assert.equal(silent.closed, true, `a connection that sends nothing was held for ${silent.ms} ms`);
});

test('normal requests and a streamed import that keeps moving for longer than the timeout are served', async () => {
  const health = await fetch(`${t.url}/healthz`);
  assert.equal(health.status, 200);
  assert.notEqual(health.headers.get('connection'), 'close');
  const token = await tokenFor(t, tenant);
  assert.ok(token);

  // Lines every 150 ms for about 3 timeouts: each pause is under REQUEST_TIMEOUT_MS.
  async function* lines(n: number, pauseMs: number) {
    for (let i = 0; i < n; i++) {
      await sleep(pauseMs);
      yield Buffer.from(`{"observed_at":"2025-01-01T00:00:00Z","data":{"k":"k${i}"}}\n`);
    }
  }
  const url = `${t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: tenant.workspaceId, data_model: model.slug })}`;
  const upload = (n: number, pauseMs: number) =>
    fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/x-ndjson' },
      body: Readable.from(lines(n, pauseMs)),
      duplex: 'half',
    });
  const moving = await upload(10, 150);
  assert.equal(moving.status, 200, await moving.clone().text());
  assert.equal(((await moving.json()) as { data: { written: number } }).data.written, 10);

  // A pause longer than the timeout ends it.
  const stalled = await upload(2, TIMEOUT_MS * 3);
  assert.equal(stalled.status, 408);
  assert.equal(
    ((await stalled.json()) as { errors: Array<{ code: string; detail: string }> }).errors[0]!.detail,
    `No part of the request body arrived for ${TIMEOUT_MS} ms`,
  );
});

test('one address holds at most MAX_CONNECTIONS_PER_ADDRESS connections; other addresses are served', async () => {
  const port = Number(new URL(t.url).port);
  /** A keep-alive connection from 127.0.0.2 that has been served once: the text of its answer, or '' when closed unanswered. */
  const served = async (): Promise<{ socket: net.Socket; answer: string }> => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
    socket.on('error', () => undefined);
    let answer = '';
    socket.setEncoding('utf8').on('data', (s: string) => (answer += s));
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n');
    while (!answer.includes('"ok"') && !socket.destroyed) await sleep(5);
    return { socket, answer };
  };
  const held = [];
  for (let i = 0; i < CAP; i++) held.push(await served());
  assert.ok(held.every((h) => h.answer.startsWith('HTTP/1.1 200')));
  const extra = await served();
  assert.equal(extra.answer, '', 'closed at once');
  assert.equal(extra.socket.destroyed, true);
  assert.equal((await fetch(`${t.url}/healthz`)).status, 200, 'another address is served');
  for (const h of held) h.socket.destroy();
  await sleep(100);
  const again = await served();
  assert.match(again.answer, /^HTTP\/1.1 200/, 'served again once the others closed');
  again.socket.destroy();
});
