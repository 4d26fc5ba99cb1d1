/**
 * `tributary serve` as a real process: health, readiness, request ids, token exchange,
 * idempotent writes, graceful SIGTERM with a request in flight, and log hygiene.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshPostgresDatabase } from '../helpers/app.ts';
import { freePort } from '../helpers/cli.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const GRACE_MS = 10_000;

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** Rejects with the socket error code (ECONNREFUSED, ...) when no HTTP answer came. */
async function get(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { headers });
}

/** GET on a new connection (no pooled keep-alive socket): the status, or the socket error code. */
function probe(url: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

test('serve: health, request ids, auth, idempotency, graceful SIGTERM, clean logs', { timeout: 180_000 }, async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-life-'));
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TRIBUTARY_|PORT$|HOST$|DATA_DIR$|DATABASE_URL$|REDIS_URL$|LOG_LEVEL$|SHUTDOWN_GRACE_MS$)/.test(k)) env[k] = v;
  }
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  if (process.env.DATABASE_URL) {
    const fresh = await freshPostgresDatabase();
    cleanups.push(fresh.drop);
    env.DATABASE_URL = fresh.url;
  }
  if (process.env.REDIS_URL) env.REDIS_URL = process.env.REDIS_URL;

  const child: ChildProcess = spawn(NODE, ['src/main.ts', 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });

  // Wait for /readyz (a first start on PGlite creates its files and migrates: allow time);
  // /healthz answers from the start.
  const deadline = Date.now() + 90_000;
  let ready: Response;
  for (;;) {
    if (child.exitCode !== null) assert.fail(`serve exited with ${child.exitCode}: ${stderr}\n${stdout}`);
    try {
      ready = await get(`${base}/readyz`);
      if (ready.status === 200) break;
      assert.equal((await get(`${base}/healthz`)).status, 200, 'alive while not ready');
    } catch (err) {
      if (err instanceof assert.AssertionError) throw err;
      // not listening yet
    }
    if (Date.now() > deadline) assert.fail(`serve did not become ready: ${stderr}\n${stdout}`);
    await sleep(100);
  }

  assert.deepEqual(await ready.json(), { status: 'ready', rate_limit: process.env.REDIS_URL ? 'shared' : 'per process' });

  // x-request-id: echoed when sent (and valid), generated (UUIDv7) when not, on 200 and 404.
  const given = await get(`${base}/healthz`, { 'x-request-id': 'lifecycle-given-200' });
  assert.equal(given.status, 200);
  assert.equal(given.headers.get('x-request-id'), 'lifecycle-given-200');
  const generated = await get(`${base}/healthz`);
  assert.match(generated.headers.get('x-request-id') ?? '', UUID_RE);
  const missing = await get(`${base}/no/such/route`, { 'x-request-id': 'lifecycle-given-404' });
  assert.equal(missing.status, 404);
  assert.equal(missing.headers.get('x-request-id'), 'lifecycle-given-404');
  const missingGenerated = await get(`${base}/no/such/route`);
  assert.equal(missingGenerated.status, 404);
  assert.match(missingGenerated.headers.get('x-request-id') ?? '', UUID_RE);
  const invalid = await get(`${base}/healthz`, { 'x-request-id': 'has spaces and {braces}' });
  assert.match(invalid.headers.get('x-request-id') ?? '', UUID_RE);

  // The bootstrap credentials and the generated admin token.
  const boot = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8')) as {
    client_id: string;
    client_secret: string;
    organization_id: string;
  };
  const adminToken = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
  const tokenRes = await fetch(`${base}/api/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: boot.client_id, client_secret: boot.client_secret }),
  });
  assert.equal(tokenRes.status, 200);
  const accessToken = ((await tokenRes.json()) as { access_token: string }).access_token;
  const auth = { authorization: `Bearer ${accessToken}`, accept: 'application/vnd.api+json' };

  const orgs = await get(`${base}/api/json/v1/organizations`, { ...auth, 'x-request-id': 'lifecycle-orgs' });
  assert.equal(orgs.status, 200);
  assert.deepEqual(
    ((await orgs.json()) as { data: Array<{ id: string }> }).data.map((o) => o.id),
    [boot.organization_id],
  );

  const write = () =>
    fetch(`${base}/api/json/v1/data_models`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/vnd.api+json', 'idempotency-key': 'lifecycle-key-1' },
      body: JSON.stringify({ data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } } }),
    });
  const created = await write();
  assert.equal(created.status, 201);
  assert.equal(created.headers.get('idempotent-replayed'), null);
  const createdBody = await created.text();
  const replay = await write();
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(await replay.text(), createdBody);

  const sweep = await fetch(`${base}/admin/v1/sweep`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(sweep.status, 200);
  // The one data model's idempotency key is fresh: nothing to delete.
  assert.equal(((await sweep.json()) as { data: { idempotency_keys_deleted: number } }).data.idempotency_keys_deleted, 0);

  // A request in flight: headers started but not finished when SIGTERM arrives.
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let answer = '';
  socket.setEncoding('utf8').on('data', (s: string) => (answer += s));
  const socketClosed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write('GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nx-request-id: lifecycle-inflight\r\n');
  await sleep(200);

  const signalledAt = Date.now();
  assert.equal(child.kill('SIGTERM'), true);
  // The signal reaches the child's event loop a moment later; until it logs "draining" it
  // rightly still answers as ready. From then on no new request may see a 200.
  while (!stdout.includes('"msg":"draining"') && Date.now() - signalledAt < GRACE_MS - 1_000) await sleep(10);
  assert.match(stdout, /"msg":"draining"/, 'serve did not start draining after SIGTERM');

  // The listener stops accepting: a new connection is refused (never a 200 from /readyz),
  // while the process stays up for the request in flight.
  let refused = false;
  while (!refused && Date.now() - signalledAt < GRACE_MS - 1_000) {
    const outcome = await probe(`${base}/readyz`);
    if (outcome === 'ECONNREFUSED') refused = true;
    // A connection accepted just before the listener closed may be reset: not a 200 either.
    else if (outcome !== 'ECONNRESET') assert.equal(outcome, 503, 'readiness must not answer 200 after SIGTERM');
    if (!refused) await sleep(50);
  }
  assert.equal(refused, true, 'the listener still accepted connections after SIGTERM');
  assert.equal(child.exitCode, null, 'the process exited with a request in flight');

  // The in-flight request completes, answered as draining.
  socket.write('\r\n');
  const answered = Date.now();
  while (!/\r\n\r\n[\s\S]*\}$/.test(answer) && Date.now() - answered < 3_000) await sleep(20);
  const [statusLine, ...rest] = answer.split('\r\n');
  assert.equal(statusLine, 'HTTP/1.1 503 Service Unavailable', answer);
  // It went through the normal pipeline: our request id, our readiness body.
  assert.match(rest.join('\n'), /^x-request-id: lifecycle-inflight$/im);
  assert.match(answer, /"status":"draining"/);
  // Answered while closing, so the connection is not kept for more requests.
  assert.match(rest.join('\n'), /^connection: close$/im);
  socket.end();
  await socketClosed;

  const exit = await exited;
  assert.deepEqual(exit, { code: 0, signal: null });
  // Stopped when its work was done, not when the grace period ran out (which cuts off what is left).
  assert.doesNotMatch(stdout, /request cut off at shutdown/);

  // Logs: JSON lines; request lines carry reqId; lifecycle messages in order.
  const lines = stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, any>);
  const requestLines = lines.filter((l) => l.req !== undefined || l.res !== undefined);
  assert.ok(requestLines.length >= 20, `only ${requestLines.length} request lines`);
  for (const l of requestLines) assert.equal(typeof l.reqId === 'string' && l.reqId.length > 0, true, JSON.stringify(l));
  const incoming = (id: string) => requestLines.find((l) => l.reqId === id && l.req !== undefined);
  assert.deepEqual(incoming('lifecycle-given-200')?.req, { method: 'GET', url: '/healthz', remoteAddress: '127.0.0.1' });
  assert.deepEqual(incoming('lifecycle-given-404')?.req, { method: 'GET', url: '/no/such/route', remoteAddress: '127.0.0.1' });
  assert.equal(incoming('lifecycle-orgs')?.req.url, '/api/json/v1/organizations');
  assert.equal(requestLines.find((l) => l.reqId === 'lifecycle-given-404' && l.res !== undefined)?.res.statusCode, 404);
  const messages = lines.map((l) => l.msg);
  const order = ['signal received', 'draining', 'stopped'].map((m) => messages.indexOf(m));
  assert.deepEqual(
    order.map((i) => i >= 0),
    [true, true, true],
    messages.join(' | '),
  );
  assert.deepEqual(
    [...order].sort((a, b) => a - b),
    order,
  );
  assert.equal(lines.find((l) => l.msg === 'signal received')?.signal, 'SIGTERM');

  // No secret reaches the output.
  const output = stdout + stderr;
  assert.ok(boot.client_id.length > 0 && output.includes(boot.client_id), 'the bootstrap log line names the client id');
  for (const [name, secret] of Object.entries({ client_secret: boot.client_secret, access_token: accessToken, admin_token: adminToken })) {
    assert.ok(secret.length >= 32, name);
    assert.equal(output.includes(secret), false, `${name} appears in the output`);
  }
});
