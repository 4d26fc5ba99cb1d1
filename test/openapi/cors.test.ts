/**
 * The published documents (the OpenAPI document and the GraphQL SDL) answer CORS, so Swagger
 * UI or an editor at another origin loads them; no other route does.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await startApp();
});
after(async () => {
  await t?.close();
});

const ORIGIN = 'https://editor.example';
const PUBLISHED = ['/api/json/v1/openapi.json', '/api/graphql/schema.graphql'];

for (const path of PUBLISHED) {
  test(`GET ${path} from another origin is readable`, async () => {
    const res = await fetch(`${t.url}${path}`, { headers: { origin: ORIGIN } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.ok((await res.text()).length > 100);
  });

  test(`OPTIONS ${path}: the preflight of a GET`, async () => {
    const res = await fetch(`${t.url}${path}`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET', 'access-control-request-headers': 'accept, x-requested-with' },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.match(res.headers.get('access-control-allow-methods') ?? '', /\bGET\b/);
    assert.equal(res.headers.get('access-control-allow-headers'), 'accept, x-requested-with');
    assert.equal(res.headers.get('allow'), 'GET, HEAD, OPTIONS');
  });
}

test('no other route answers CORS', async () => {
  const others: Array<[string, string]> = [
    ['GET', '/healthz'],
    ['GET', '/readyz'],
    ['GET', '/api/json/v1/data_models'],
    ['OPTIONS', '/api/json/v1/data_models'],
    ['POST', '/api/graphql'],
    ['OPTIONS', '/api/graphql'],
    ['POST', '/api/v1/oauth/token'],
    ['OPTIONS', '/api/v1/oauth/token'],
    ['GET', '/console'],
    ['GET', '/api/json/v1/no_such_thing'],
    // A refused method of a published path is not a document.
    ['POST', '/api/json/v1/openapi.json'],
  ];
  for (const [method, path] of others) {
    const res = await fetch(`${t.url}${path}`, {
      method,
      headers: { origin: ORIGIN, ...(method === 'OPTIONS' ? { 'access-control-request-method': 'GET' } : {}) },
    });
    await res.arrayBuffer();
    assert.ok(res.status > 0);
    assert.equal(res.headers.get('access-control-allow-origin'), null, `${method} ${path} answered ${res.status} with CORS`);
  }
});
