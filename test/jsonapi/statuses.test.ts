/**
 * Statuses that must say exactly what is wrong (issue 11 item 7): a filter value outside
 * the attribute's range is a query error, a token body nested too deep is an RFC 6749
 * invalid_request, and a known path asked with another method is 405 with Allow.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertJsonApiError, dataModelDoc, JSONAPI, jsonApi, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

const MODELS = '/api/json/v1/data_models';

let t: TestApp;
let tenant: Tenant;
let api: ReturnType<typeof jsonApi>;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  api = jsonApi(t, await tokenFor(t, tenant));
  assert.equal((await api.post(MODELS, dataModelDoc({ name: 'Kept', slug: 'kept', retention_days: 30 }))).status, 201);
});
after(() => t.close());

describe('filter values outside the range of an integer attribute', () => {
  test('are 400 invalid_query at the parameter, for every operator', async () => {
    for (const [name, value] of [
      ['filter[retention_days][gt]', '2147483648'],
      ['filter[retention_days]', '-2147483649'],
      ['filter[retention_days][in]', '1,99999999999'],
      ['filter[retention_days][lte]', '9007199254740991'],
    ]) {
      const res = await api.get(`${MODELS}?${name}=${value}`);
      assertJsonApiError(res, 400, 'invalid_query', { parameter: name! });
      assert.match(res.body.errors[0].detail, /whole number from -2147483648 to 2147483647/);
    }
  });

  test('the bounds themselves are values like any other', async () => {
    const res = await api.get(`${MODELS}?filter[retention_days][lte]=2147483647&filter[retention_days][gt]=-2147483648`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.data.map((d: any) => d.attributes.slug),
      ['kept'],
    );
  });

  test('a cursor holding an integer beyond the column is an invalid cursor, not a 422', async () => {
    const cursor = Buffer.from(JSON.stringify({ v: [2 ** 31], id: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' })).toString('base64url');
    assertJsonApiError(await api.get(`${MODELS}?sort=retention_days&page[after]=${cursor}`), 400, 'invalid_query', { parameter: 'page[after]' });
  });
});

describe('token endpoint', () => {
  test('a JSON body nested deeper than 64 levels is 400 invalid_request (RFC 6749 5.2)', async () => {
    const body = `{"grant_type":"client_credentials","x":${'['.repeat(65)}${']'.repeat(65)}}`;
    const res = await fetch(`${t.url}/api/v1/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const json = (await res.json()) as { error: string; error_description: string };
    assert.equal(json.error, 'invalid_request');
    assert.match(json.error_description, /nested deeper than 64/);
  });
});

describe('methods', () => {
  const cases: Array<[method: string, path: string, allow: string]> = [
    ['DELETE', MODELS, 'GET, HEAD, POST'],
    ['PUT', `${MODELS}/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b`, 'GET, HEAD, PATCH, DELETE'],
    ['DELETE', '/api/json/v1/organizations', 'GET, HEAD'],
    ['POST', '/api/json/v1/users/x', 'GET, HEAD'],
  ];

  test('a known JSON:API path with another method is 405 with Allow and a JSON:API error document, with or without a token', async () => {
    for (const client of [api, jsonApi(t, undefined)]) {
      for (const [method, path, allow] of cases) {
        const res = await client.request(method, path);
        assertJsonApiError(res, 405, 'method_not_allowed');
        assert.equal(res.headers.get('allow'), allow, `${method} ${path}`);
        assert.ok(res.body.errors[0].detail.includes(allow), res.text);
      }
    }
  });

  test('405 comes before content negotiation: the method is wrong whatever the media types', async () => {
    const res = await api.request('DELETE', MODELS, 'not json', { accept: 'text/html', 'content-type': 'text/plain' });
    assert.equal(res.status, 405, res.text);
    assert.equal(res.headers.get('allow'), 'GET, HEAD, POST');
  });

  test('OPTIONS on a known path is 204 with Allow; on an unknown path 404', async () => {
    for (const [, path, allow] of cases) {
      const res = await fetch(`${t.url}${path}`, { method: 'OPTIONS' });
      assert.equal(res.status, 204, path);
      assert.equal(res.headers.get('allow'), allow, path);
      assert.equal(await res.text(), '');
    }
    assert.equal((await fetch(`${t.url}/api/json/v1/nope`, { method: 'OPTIONS' })).status, 404);
  });

  test('HEAD of a readable path answers like GET without a body', async () => {
    const get = await api.get(MODELS);
    const head = await api.request('HEAD', MODELS);
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-type'), get.headers.get('content-type'));
    assert.equal(head.text, '');
    assert.equal((await jsonApi(t, undefined).request('HEAD', MODELS)).status, 401);
  });

  test('other surfaces: the token endpoint, health, the admin API and GraphQL', async () => {
    const token = await fetch(`${t.url}/api/v1/oauth/token`);
    assert.equal(token.status, 405);
    assert.equal(token.headers.get('allow'), 'POST');
    assert.equal(((await token.json()) as { error: string }).error, 'invalid_request');
    const health = await fetch(`${t.url}/healthz`, { method: 'DELETE' });
    assert.equal(health.status, 405);
    assert.equal(health.headers.get('allow'), 'GET, HEAD');
    const adminRes = await fetch(`${t.url}/admin/v1/organizations`, { method: 'DELETE' });
    assert.equal(adminRes.status, 405);
    assert.equal(adminRes.headers.get('allow'), 'GET, HEAD, POST');
    assert.equal(adminRes.headers.get('content-type'), JSONAPI);
    const graphql = await fetch(`${t.url}/api/graphql`, { method: 'OPTIONS' });
    assert.equal(graphql.status, 204);
    assert.equal(graphql.headers.get('allow'), 'POST');
    assert.equal((await fetch(`${t.url}/api/graphql`, { method: 'GET' })).headers.get('allow'), 'POST');
  });
});
