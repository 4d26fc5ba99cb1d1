/**
 * A client that asks for a large answer and never reads it does not hold the connection
 * (and the unsent answer in memory) without end: once no byte of the answer has been taken
 * for RESPONSE_TIMEOUT_MS, the server closes the connection. A real socket, a real answer.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

const TIMEOUT_MS = 300;
// Larger than every buffer between the server and a client that does not read (the kernel's send
// and receive buffers): most of it waits in the server's process.
const ANSWER_BYTES = 24 * 1_048_576;
// A bound, not a measurement: reading and serializing the answer, then TIMEOUT_MS, take a
// second or two; a server without the timeout holds the connection for ever.
const CLOSE_WITHIN_MS = 60_000;
let t: TestApp;
let token: string;
let specId: string;
/** The server's open sockets, to find the server's end of a test connection. */
const sockets = new Set<net.Socket>();

before(async () => {
  t = await startApp({ RESPONSE_TIMEOUT_MS: String(TIMEOUT_MS), API_SPEC_MAX_BYTES: String(32 * 1_048_576) });
  t.app.server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  token = await tokenFor(t, await seedTenant(t.deps));
  const document = JSON.stringify({ openapi: '3.0.3', info: { title: 'large', version: '1' }, paths: {}, 'x-padding': 'x'.repeat(ANSWER_BYTES) });
  const created = await jsonApi(t, token).post('/api/json/v1/api_specs', {
    data: { type: 'api_spec', attributes: { name: 'Large', format: 'json', raw_document: document } },
  });
  assert.equal(created.status, 201, created.text.slice(0, 500));
  specId = created.body.data.id;
});
after(() => t.close());

test('an answer the client never reads: the server closes the connection', async () => {
  const { port } = new URL(t.url);
  const client = net.connect(Number(port), '127.0.0.1');
  await once(client, 'connect');
  const serverSide = await serverSideOf(client);
  assert.ok(serverSide, 'the server side of the connection');
  const closed = once(serverSide, 'close');
  client.on('error', () => undefined);
  client.write(`GET /api/json/v1/api_specs/${specId} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\nAccept: application/vnd.api+json\r\n\r\n`);
  // The client never reads: no 'data' listener, and its stream stays paused.
  client.pause();
  const outcome = await Promise.race([closed.then(() => 'closed'), new Promise((resolve) => setTimeout(resolve, CLOSE_WITHIN_MS, 'still open').unref())]);
  const pending = serverSide.writableLength;
  client.destroy();
  assert.equal(outcome, 'closed', `the server still holds the connection, ${pending} bytes of its answer unsent`);
});

test('a client that reads its large answer gets all of it', async () => {
  const res = await fetch(`${t.url}/api/json/v1/api_specs/${specId}`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { data: { attributes: { raw_document: string } } };
  assert.ok(body.data.attributes.raw_document.length > ANSWER_BYTES);
});

/** The server's end of the connection `client` opened. */
async function serverSideOf(client: net.Socket): Promise<net.Socket | undefined> {
  for (let i = 0; i < 100; i++) {
    for (const s of sockets) if (s.remotePort === client.localPort) return s;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return undefined;
}
