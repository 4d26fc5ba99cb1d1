/**
 * JSON:API 1.1 content negotiation, response headers, unknown routes and malformed query
 * parameters (contract: Common rules; decisions §3).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { JSONAPI, dataModelDoc, jsonApi, seedTenant, startApp, tokenFor, type ApiResponse, type Tenant, type TestApp } from '../helpers/app.ts';

const MODELS = '/api/json/v1/data_models';
const FIELDS = '/api/json/v1/data_model_fields';

type Api = ReturnType<typeof jsonApi>;

let t: TestApp;
let tenant: Tenant;
let token: string;
let api: Api;
let modelId: string;
let slugSeq = 0;

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await seedTenant(t.deps);
  token = await tokenFor(t, tenant);
  api = jsonApi(t, token);
  for (const slug of ['first', 'second', 'third']) {
    const res = await api.post(MODELS, dataModelDoc({ name: slug, slug }));
    assert.equal(res.status, 201, res.text);
    modelId = res.body.data.id;
  }
});

after(async () => {
  await t?.close();
});

const nextDoc = () => dataModelDoc({ name: 'Media', slug: `media-${++slugSeq}` });

async function modelCount(): Promise<number> {
  const rows = await t.deps.db.selectFrom('data_models').select('id').where('workspace_id', '=', tenant.workspaceId).execute();
  return rows.length;
}

/** A request over node:http: exactly the headers given, nothing added (fetch adds Accept and Content-Type). */
function raw(method: string, path: string, headers: Record<string, string>, body?: string): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: h, text, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function assertJsonApiHeaders(res: ApiResponse, what: string): void {
  assert.equal(res.headers.get('content-type'), JSONAPI, `${what}: content-type`);
  assert.match(res.headers.get('x-request-id') ?? '', /^[A-Za-z0-9._:-]{1,128}$/, `${what}: x-request-id`);
}

function assertError(res: ApiResponse, status: number, code: string, what: string): any {
  assert.equal(res.status, status, `${what}: status (body ${res.text.slice(0, 300)})`);
  assertJsonApiHeaders(res, what);
  assert.ok(Array.isArray(res.body?.errors) && res.body.errors.length === 1, `${what}: errors array`);
  const e = res.body.errors[0];
  assert.equal(e.status, String(status), `${what}: errors[0].status`);
  assert.equal(e.code, code, `${what}: errors[0].code`);
  assert.equal(typeof e.title, 'string');
  assert.equal(typeof e.detail, 'string');
  assert.equal(e.id, res.headers.get('x-request-id'), `${what}: the error id is the request id`);
  assert.doesNotMatch(res.text, /node_modules|\/work\/|\n\s+at\s/, `${what}: leak`);
  return e;
}

describe('Content-Type of request bodies', () => {
  test('application/json, other types and charset or unknown parameters are 415 unsupported_media_type', async () => {
    const before = await modelCount();
    const refused = [
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/vnd.api+json; charset=utf-8',
      'application/vnd.api+json;charset=UTF-8',
      'application/vnd.api+json; foo=bar',
      'application/vnd.api+json; ext="https://example.com/ext"; charset=utf-8',
      'application/vnd.api+jsonx',
      'application/vnd.api',
    ];
    for (const ct of refused) {
      const post = await api.post(MODELS, nextDoc(), { 'content-type': ct });
      const e = assertError(post, 415, 'unsupported_media_type', `POST ${ct}`);
      assert.equal(e.source?.header, 'Content-Type');
      const patch = await api.patch(
        `${MODELS}/${modelId}`,
        { data: { type: 'data_model', id: modelId, attributes: { name: 'Changed' } } },
        { 'content-type': ct },
      );
      assertError(patch, 415, 'unsupported_media_type', `PATCH ${ct}`);
      const field = await api.post(
        FIELDS,
        { data: { type: 'data_model_field', attributes: { data_model_id: modelId, name: 'never' } } },
        { 'content-type': ct },
      );
      assertError(field, 415, 'unsupported_media_type', `POST fields ${ct}`);
    }
    assert.equal(await modelCount(), before);
    const row = await t.deps.db.selectFrom('data_models').select('name').where('id', '=', modelId).executeTakeFirstOrThrow();
    assert.equal(row.name, 'third');
  });

  test('a body without Content-Type is 415', async () => {
    const res = await raw('POST', MODELS, { authorization: `Bearer ${token}`, accept: JSONAPI }, JSON.stringify(nextDoc()));
    assertError(res, 415, 'unsupported_media_type', 'POST without Content-Type');
  });

  test('ext and profile parameters are accepted', async () => {
    const accepted = [
      JSONAPI,
      'application/vnd.api+json; ext="https://example.com/ext"',
      'application/vnd.api+json; profile="https://example.com/profile"',
      'application/vnd.api+json;ext="https://example.com/a https://example.com/b";profile="https://example.com/p"',
    ];
    for (const ct of accepted) {
      const doc = nextDoc();
      const res = await api.post(MODELS, doc, { 'content-type': ct });
      assert.equal(res.status, 201, `${ct}: ${res.text}`);
      assertJsonApiHeaders(res, ct);
      assert.equal(res.body.data.attributes.slug, doc.data.attributes.slug);
    }
    const patched = await api.patch(
      `${MODELS}/${modelId}`,
      { data: { type: 'data_model', id: modelId, attributes: { description: 'ext' } } },
      { 'content-type': accepted[1]! },
    );
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.data.attributes.description, 'ext');
  });
});

describe('Accept', () => {
  test('an Accept that allows neither application/vnd.api+json nor a wildcard is 406 not_acceptable', async () => {
    const before = await modelCount();
    const refused = [
      'application/json',
      'text/html',
      'text/*',
      'application/vnd.api+json; foo=bar',
      'application/vnd.api+json; charset=utf-8',
      'application/vnd.api+json; foo=bar, application/json',
      'application/vnd.api+json; ext="https://example.com/ext"; foo=bar',
    ];
    for (const accept of refused) {
      const get = await api.get(MODELS, { accept });
      const e = assertError(get, 406, 'not_acceptable', `GET Accept ${accept}`);
      assert.equal(e.source?.header, 'Accept');
      assertError(await api.get(`${MODELS}/${modelId}`, { accept }), 406, 'not_acceptable', `GET one, Accept ${accept}`);
      assertError(await api.post(MODELS, nextDoc(), { accept }), 406, 'not_acceptable', `POST Accept ${accept}`);
    }
    assert.equal(await modelCount(), before);
  });

  test('wildcards, a plain instance among parameterized ones, q-values and no Accept at all are accepted', async () => {
    const accepted = [
      '*/*',
      'application/*',
      JSONAPI,
      'application/vnd.api+json; foo=bar, application/vnd.api+json',
      'application/json, application/vnd.api+json;q=0.5',
      'text/html, */*;q=0.1',
      'application/vnd.api+json; ext="https://example.com/ext"',
      'application/vnd.api+json; profile="https://example.com/profile"',
    ];
    for (const accept of accepted) {
      const res = await api.get(MODELS, { accept });
      assert.equal(res.status, 200, `Accept ${accept}: ${res.text.slice(0, 200)}`);
      assertJsonApiHeaders(res, `Accept ${accept}`);
      assert.ok(Array.isArray(res.body.data));
    }
    const created = await api.post(MODELS, nextDoc(), { accept: '*/*' });
    assert.equal(created.status, 201, created.text);

    // fetch always sends an Accept; node:http sends none unless told to.
    const none = await raw('GET', MODELS, { authorization: `Bearer ${token}` });
    assert.equal(none.status, 200, none.text);
    assertJsonApiHeaders(none, 'no Accept');
    const doc = nextDoc();
    const noneCreate = await raw('POST', MODELS, { authorization: `Bearer ${token}`, 'content-type': JSONAPI }, JSON.stringify(doc));
    assert.equal(noneCreate.status, 201, noneCreate.text);
    assert.equal(noneCreate.body.data.attributes.slug, doc.data.attributes.slug);
  });
});

describe('response headers', () => {
  test('every response carries Content-Type application/vnd.api+json and x-request-id', async () => {
    const responses: Array<[string, ApiResponse, number]> = [
      ['list', await api.get(MODELS), 200],
      ['one', await api.get(`${MODELS}/${modelId}`), 200],
      ['create', await api.post(MODELS, nextDoc()), 201],
      ['patch', await api.patch(`${MODELS}/${modelId}`, { data: { type: 'data_model', id: modelId, attributes: {} } }), 200],
      ['no token', await jsonApi(t, undefined).get(MODELS), 401],
      ['bad token', await jsonApi(t, 'nope').get(MODELS), 401],
      ['absent id', await api.get(`${MODELS}/${randomUUID()}`), 404],
      ['unknown route', await api.get('/api/json/v1/nope'), 404],
      ['406', await api.get(MODELS, { accept: 'text/html' }), 406],
      ['415', await api.post(MODELS, nextDoc(), { 'content-type': 'application/json' }), 415],
      ['422', await api.post(MODELS, dataModelDoc({ name: 'x' })), 422],
      ['400 body', await api.post(MODELS, '{'), 400],
      ['400 query', await api.get(`${MODELS}?sort=nope`), 400],
    ];
    for (const [what, res, status] of responses) {
      assert.equal(res.status, status, `${what}: ${res.text.slice(0, 200)}`);
      assertJsonApiHeaders(res, what);
      if (status >= 400) assert.ok(Array.isArray(res.body?.errors), `${what}: an error document`);
    }
    const ids = new Set(responses.map(([, res]) => res.headers.get('x-request-id')));
    assert.equal(ids.size, responses.length, 'request ids are unique');
  });

  test('a sent x-request-id is echoed, on success and on error; a malformed one is replaced', async () => {
    for (const id of ['req-123', 'a.b:c_d-E', 'x'.repeat(128)]) {
      const ok = await api.get(MODELS, { 'x-request-id': id });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('x-request-id'), id);
      const err = await api.get(`${MODELS}/${randomUUID()}`, { 'x-request-id': id });
      assertError(err, 404, 'not_found', `echo ${id}`);
      assert.equal(err.headers.get('x-request-id'), id);
      const unauth = await jsonApi(t, undefined).get(MODELS, { 'x-request-id': id });
      assert.equal(unauth.status, 401);
      assert.equal(unauth.headers.get('x-request-id'), id);
    }
    for (const id of ['has space', 'x'.repeat(129), 'semi;colon', '<script>']) {
      const res = await api.get(MODELS, { 'x-request-id': id });
      assert.equal(res.status, 200);
      const got = res.headers.get('x-request-id');
      assert.ok(got && got !== id, `${JSON.stringify(id)} is replaced`);
      assertJsonApiHeaders(res, `replaced ${id}`);
    }
  });
});

describe('routes', () => {
  test('an unknown route is a 404 JSON:API error', async () => {
    for (const path of [
      '/api/json/v1/nope',
      '/api/json/v1/data_model',
      `/api/json/v1/data_models/${modelId}/nope`,
      '/api/json/v2/data_models',
      '/api/json/v1/',
    ]) {
      assertError(await api.get(path), 404, 'not_found', `GET ${path}`);
    }
    assertError(await api.post('/api/json/v1/nope', nextDoc()), 404, 'not_found', 'POST unknown');
    assertError(await jsonApi(t, undefined).get('/api/json/v1/nope'), 404, 'not_found', 'unknown without token');
  });

  test('an unsupported method on a known path is 405 with Allow, a JSON:API error, and changes nothing', async () => {
    const before = await modelCount();
    const cases: Array<[string, string, string]> = [
      // A data model can be deleted (test/jsonapi/delete.test.ts), so one resource refuses PUT alone.
      ['PUT', `${MODELS}/${modelId}`, 'GET, HEAD, PATCH, DELETE'],
      ['DELETE', MODELS, 'GET, HEAD, POST'],
      ['PATCH', MODELS, 'GET, HEAD, POST'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await api.request(method, path, method === 'DELETE' ? undefined : nextDoc());
      assertError(res, 405, 'method_not_allowed', `${method} ${path}`);
      assert.equal(res.headers.get('allow'), allow, `${method} ${path}: Allow`);
    }
    assert.equal(await modelCount(), before);
    assert.equal((await api.get(`${MODELS}/${modelId}`)).status, 200);
  });
});

describe('query parameters', () => {
  test('malformed parameters on a list are 400 invalid_query naming the parameter', async () => {
    const first = await api.get(`${MODELS}?page[limit]=1`);
    assert.equal(first.status, 200);
    const cursor = first.body.meta.page.next_cursor as string;
    assert.ok(cursor, 'a next cursor');
    // A real cursor works, so the refusals below are about the parameters alone.
    assert.equal((await api.get(`${MODELS}?page[limit]=1&page[after]=${cursor}`)).status, 200);
    assert.equal((await api.get(`${MODELS}?page[limit]=1&page[offset]=1`)).status, 200);

    const cases: Array<[string, string]> = [
      ['page[limit]=0', 'page[limit]'],
      ['page[limit]=251', 'page[limit]'],
      ['page[limit]=-1', 'page[limit]'],
      ['page[limit]=abc', 'page[limit]'],
      ['page[limit]=1.5', 'page[limit]'],
      ['page[offset]=-1', 'page[offset]'],
      ['page[offset]=x', 'page[offset]'],
      ['page[size]=10', 'page[size]'],
      ['sort=nope', 'sort'],
      ['sort=-nope', 'sort'],
      ['sort=name,name', 'sort'],
      ['include=nope', 'include'],
      ['include=fields.nope', 'include'],
      ['fields[nope]=a', 'fields[nope]'],
      ['fields[data_model]=nope', 'fields[data_model]'],
      ['filter[name][regex]=x', 'filter[name][regex]'],
      ['filter[nope]=x', 'filter[nope]'],
      ['filter[retention_days]=abc', 'filter[retention_days]'],
      ['filter[constructor]=x', 'filter[constructor]'],
      ['page[after]=garbage', 'page[after]'],
      ['page[after]=!!', 'page[after]'],
      ['page[before]=e30', 'page[before]'],
      [`page[offset]=0&page[after]=${cursor}`, 'page[offset]'],
      [`page[offset]=0&page[before]=${cursor}`, 'page[offset]'],
      [`page[after]=${cursor}&page[before]=${cursor}`, 'page[before]'],
      ['page[count]=yes', 'page[count]'],
      ['sort=name&sort=slug', 'sort'],
      ['nope=1', 'nope'],
    ];
    for (const [qs, parameter] of cases) {
      const res = await api.get(`${MODELS}?${qs}`);
      const e = assertError(res, 400, 'invalid_query', qs);
      assert.equal(e.source?.parameter, parameter, `${qs}: source.parameter`);
    }
  });

  test('list-only parameters on one resource and on writes are 400 invalid_query, and writes write nothing', async () => {
    for (const qs of ['sort=name', 'page[limit]=1', 'filter[name]=x']) {
      const e = assertError(await api.get(`${MODELS}/${modelId}?${qs}`), 400, 'invalid_query', `GET one ?${qs}`);
      assert.equal(e.source?.parameter, qs.split('=')[0]);
    }
    const before = await modelCount();
    for (const [qs, parameter] of [
      ['sort=name', 'sort'],
      ['include=nope', 'include'],
      ['fields[nope]=a', 'fields[nope]'],
      ['page[limit]=0', 'page[limit]'],
    ]) {
      const post = await api.post(`${MODELS}?${qs}`, nextDoc());
      assert.equal(assertError(post, 400, 'invalid_query', `POST ?${qs}`).source?.parameter, parameter);
      const patch = await api.patch(`${MODELS}/${modelId}?${qs}`, { data: { type: 'data_model', id: modelId, attributes: { name: 'Query' } } });
      assert.equal(assertError(patch, 400, 'invalid_query', `PATCH ?${qs}`).source?.parameter, parameter);
    }
    assert.equal(await modelCount(), before);
    const row = await t.deps.db.selectFrom('data_models').select('name').where('id', '=', modelId).executeTakeFirstOrThrow();
    assert.notEqual(row.name, 'Query');
    // include and fields are valid on writes and shape the response.
    const ok = await api.post(`${MODELS}?include=fields&fields[data_model]=name`, nextDoc());
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(Object.keys(ok.body.data.attributes), ['name']);
  });
});
