/**
 * A client that goes away mid-request is not a server failure: it is logged once, at
 * info, as a client that went away, and never as "request failed" at level 50.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { capturingLogger, JSONAPI, seedTenant, startApp, tokenFor, type TestApp } from '../helpers/app.ts';

const lines: Array<Record<string, unknown>> = [];
let t: TestApp;
let token: string;

before(async () => {
  t = await startApp({}, { log: capturingLogger(lines, 'debug') });
  token = await tokenFor(t, await seedTenant(t.deps));
});
after(() => t.close());

/** Sends the head and part of a body on a real socket, then destroys the socket. */
async function abortMidBody(head: string[], partialBody: string): Promise<void> {
  const { port } = new URL(t.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`${head.join('\r\n')}\r\n\r\n${partialBody}`);
  // Let the server read the head and the first bytes, so the route's body parser is running.
  await new Promise((r) => setTimeout(r, 50));
  socket.destroy();
}

/** Waits until a line for this request id appears and the app has settled. */
async function linesOf(reqId: string, until: (l: Record<string, unknown>) => boolean): Promise<Array<Record<string, unknown>>> {
  for (let i = 0; i < 100; i++) {
    if (lines.some((l) => l.reqId === reqId && until(l))) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  // Anything logged late (the completion line) arrives within a few turns.
  await new Promise((r) => setTimeout(r, 50));
  return lines.filter((l) => l.reqId === reqId);
}

function assertLoggedAsClientGone(mine: Array<Record<string, unknown>>): void {
  const text = JSON.stringify(mine);
  assert.ok(mine.length > 0, 'the request was logged');
  assert.deepEqual(
    mine.filter((l) => (l.level as number) >= 40),
    [],
    text,
  );
  assert.equal(mine.filter((l) => l.msg === 'client went away').length, 1, text);
  const gone = mine.find((l) => l.msg === 'client went away')!;
  assert.ok(gone.level === 20 || gone.level === 30, text);
  assert.ok(!text.includes('unavailable'), text);
}

test('a JSON:API create whose client goes away mid-body is logged as such, not as a server error', async () => {
  const reqId = 'abort-jsonapi-1';
  await abortMidBody(
    [
      'POST /api/json/v1/data_models HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${token}`,
      `Content-Type: ${JSONAPI}`,
      `Accept: ${JSONAPI}`,
      'Content-Length: 10000',
      `X-Request-Id: ${reqId}`,
    ],
    '{"data": {"type": "data_model", "attributes": {"name": "Half',
  );
  assertLoggedAsClientGone(await linesOf(reqId, (l) => l.msg === 'client went away' || (l.level as number) >= 40));
});

test('a token request whose client goes away mid-body is logged as such', async () => {
  const reqId = 'abort-token-1';
  await abortMidBody(
    [
      'POST /api/v1/oauth/token HTTP/1.1',
      'Host: 127.0.0.1',
      'Content-Type: application/x-www-form-urlencoded',
      'Content-Length: 5000',
      `X-Request-Id: ${reqId}`,
    ],
    'grant_type=client_credentials&client_id=',
  );
  assertLoggedAsClientGone(await linesOf(reqId, (l) => l.msg === 'client went away' || (l.level as number) >= 40));
});

test('a GraphQL request whose client goes away mid-body is logged as such', async () => {
  const reqId = 'abort-graphql-1';
  await abortMidBody(
    [
      'POST /api/graphql HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${token}`,
      'Content-Type: application/json',
      'Content-Length: 5000',
      `X-Request-Id: ${reqId}`,
    ],
    '{"query": "{ health',
  );
  assertLoggedAsClientGone(await linesOf(reqId, (l) => l.msg === 'client went away' || (l.level as number) >= 40));
});
