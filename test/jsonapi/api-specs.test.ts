/**
 * /api/json/v1/api_specs and /providers: uploads are parsed, validated and normalized
 * before they are stored; a new document answers with its drift (meta.changes); bundled
 * providers install by slug, alone or with a connector.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, test } from 'node:test';
import { assertJsonApiError, jsonApi, seedAccount, seedTenant, startApp, tokenFor } from '../helpers/app.ts';

const PATH = '/api/json/v1/api_specs';
const t = await startApp();
test.after(() => t.close());
const owner = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, owner));
const FIXTURES = path.join(import.meta.dirname, '..', 'fixtures', 'openapi');
const shopYaml = fs.readFileSync(path.join(FIXTURES, 'shop-3.0.yaml'), 'utf8');
const petJson = fs.readFileSync(path.join(FIXTURES, 'petstore-2.0.json'), 'utf8');

const doc = (attributes: Record<string, unknown>, id?: string) => ({ data: { type: 'api_spec', ...(id ? { id } : {}), attributes } });
const upload = (extra: Record<string, unknown> = {}) => doc({ name: 'Shop', format: 'yaml', raw_document: shopYaml, ...extra });

describe('who may', () => {
  test('without a token: 401; without api_read or api_write: 403', async () => {
    assert.equal((await jsonApi(t, 'nope').get(PATH)).status, 401);
    assert.equal((await jsonApi(t, undefined).post(PATH, upload())).status, 401);
    assert.equal((await jsonApi(t, undefined).get('/api/json/v1/providers')).status, 401);
    assert.equal((await jsonApi(t, 'nope').get('/api/json/v1/providers/tributary-orders')).status, 401);
    const writer = jsonApi(t, await tokenFor(t, owner, 'api_write'));
    assertJsonApiError(await writer.get(PATH), 403, 'forbidden');
    assertJsonApiError(await writer.get('/api/json/v1/providers'), 403, 'forbidden');
    const reader = jsonApi(t, await tokenFor(t, owner, 'api_read'));
    assertJsonApiError(await reader.post(PATH, upload()), 403, 'forbidden');
  });

  test("another tenant's specification is 404 to read and to change; a member may write them", async () => {
    const created = await api.post(PATH, upload());
    assert.equal(created.status, 201, created.text);
    const other = jsonApi(t, await tokenFor(t, await seedTenant(t.deps)));
    assertJsonApiError(await other.get(`${PATH}/${created.body.data.id}`), 404, 'not_found');
    assertJsonApiError(await other.patch(`${PATH}/${created.body.data.id}`, doc({ name: 'Mine' }, created.body.data.id)), 404, 'not_found');
    assert.deepEqual((await other.get(PATH)).body.data, []);
    const member = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, owner, { role: 'member' })));
    assert.equal((await member.post(PATH, upload())).status, 201);
  });
});

describe('upload', () => {
  test('201 with the derived fields; reads show the same', async () => {
    const r = await api.post(PATH, upload());
    assert.equal(r.status, 201, r.text);
    const a = r.body.data.attributes;
    assert.equal(r.headers.get('location'), `${PATH}/${r.body.data.id}`);
    assert.deepEqual(Object.keys(a).sort(), [
      'external_connector_id',
      'format',
      'inserted_at',
      'last_changes',
      'name',
      'openapi_version',
      'operations',
      'organization_id',
      'provider_slug',
      'raw_document',
      'security_schemes',
      'servers',
      'title',
      'updated_at',
      'version',
    ]);
    assert.equal(a.raw_document, shopYaml);
    assert.equal(a.openapi_version, '3.0.3');
    assert.equal(a.title, 'Shop');
    assert.equal(a.version, '3.0.0');
    assert.equal(a.provider_slug, null);
    assert.deepEqual(a.servers[0], { url: 'https://eu.shop.example.com/api', description: 'Regional' });
    assert.deepEqual(a.security_schemes, { bearer: { type: 'http', scheme: 'bearer' } });
    assert.deepEqual(
      a.operations.map((o: any) => o.operation_ref),
      ['createProduct', 'GET /products/{id}', 'getTree'],
    );
    for (const o of a.operations)
      assert.deepEqual(Object.keys(o).sort(), [
        'method',
        'operation_ref',
        'params',
        'path',
        'request_fingerprint',
        'request_schema',
        'response_fingerprint',
        'response_schema',
      ]);
    const read = await api.get(`${PATH}/${r.body.data.id}`);
    assert.deepEqual(read.body.data.attributes, a);
  });

  test('what the server derives is read-only (422 naming it); a missing name, format or document is 422', async () => {
    assertJsonApiError(await api.post(PATH, upload({ operations: [] })), 422, 'invalid_request', { pointer: '/data/attributes/operations' });
    assertJsonApiError(await api.post(PATH, upload({ title: 'x' })), 422, 'invalid_request', { pointer: '/data/attributes/title' });
    assertJsonApiError(await api.post(PATH, doc({ format: 'yaml', raw_document: shopYaml })), 422, 'invalid_request', { pointer: '/data/attributes/name' });
    assertJsonApiError(await api.post(PATH, doc({ name: 'x', raw_document: shopYaml })), 422, 'invalid_request', { pointer: '/data/attributes/format' });
    assertJsonApiError(await api.post(PATH, doc({ name: 'x', format: 'json' })), 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
    assertJsonApiError(await api.post(PATH, upload({ format: 'xml' })), 422, 'invalid_request', { pointer: '/data/attributes/format' });
  });

  test('a document that does not parse or validate is 422 at raw_document, saying why; nothing is stored', async () => {
    const before = (await api.get(PATH)).body.data.length;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ format: 'json' }, /not valid JSON/],
      [{ raw_document: 'openapi: 3.0.3\ninfo: {}\n' }, /not a valid OpenAPI 3\.0\.3 document/],
      [{ raw_document: shopYaml.replace("$ref: '#/components/schemas/Node'", "$ref: 'https://evil.example/node.json'") }, /points outside the document/],
      [{ raw_document: shopYaml.replace("$ref: '#/components/schemas/Node'", "$ref: '#/components/schemas/Nope'") }, /points at nothing/],
      [{ raw_document: shopYaml.replace('operationId: getTree', 'operationId: createProduct') }, /operationIds must be unique/],
      [{ raw_document: shopYaml.replace('url: https://{region}.shop.example.com/{base}', 'url: http://169.254.169.254/{base}') }, /points at a loopback/],
    ];
    for (const [extra, pattern] of cases) {
      const r = await api.post(PATH, upload(extra));
      assertJsonApiError(r, 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
      assert.match(r.body.errors[0].detail, pattern);
    }
    assert.equal((await api.get(PATH)).body.data.length, before);
  });

  test('a document over API_SPEC_MAX_BYTES is 422; a 50 MB body is refused before it is read (413)', async () => {
    const big = `${shopYaml}\n# ${'x'.repeat(t.deps.config.apiSpecMaxBytes)}\n`;
    assertJsonApiError(await api.post(PATH, upload({ raw_document: big })), 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
    // Headers only: the 413 must come before any of the 50 MB is sent (a server waiting for it would answer 408).
    const token = await tokenFor(t, owner);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        `${t.url}${PATH}`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/vnd.api+json', 'content-length': String(50 * 1024 * 1024) },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
          req.destroy();
        },
      );
      req.on('error', reject);
      req.flushHeaders();
    });
    assert.equal(status, 413);
  });

  test('external_connector_id must name a connector of the workspace; include=external_connector', async () => {
    const c = await jsonApi(t, await tokenFor(t, owner)).post('/api/json/v1/external_connectors', {
      data: { type: 'external_connector', attributes: { name: 'Shop', auth_type: 'none', type: 'http' } },
    });
    assert.equal(c.status, 201, c.text);
    const stranger = await seedTenant(t.deps);
    const foreign = await jsonApi(t, await tokenFor(t, stranger)).post('/api/json/v1/external_connectors', {
      data: { type: 'external_connector', attributes: { name: 'Theirs', auth_type: 'none' } },
    });
    for (const id of [foreign.body.data.id, '00000000-0000-7000-8000-000000000000', 'nope']) {
      assertJsonApiError(await api.post(PATH, upload({ external_connector_id: id })), 422, 'invalid_request', {
        pointer: '/data/attributes/external_connector_id',
      });
    }
    const r = await api.post(`${PATH}?include=external_connector`, upload({ external_connector_id: c.body.data.id }));
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.body.data.relationships.external_connector.data, { type: 'external_connector', id: c.body.data.id });
    assert.equal(r.body.included[0].id, c.body.data.id);
    const listed = await api.get(`${PATH}?filter[external_connector_id]=${c.body.data.id}&include=external_connector`);
    assert.deepEqual(
      listed.body.data.map((d: any) => d.id),
      [r.body.data.id],
    );
  });

  test('list filters on name, format, openapi_version and provider_slug', async () => {
    const pet = await api.post(PATH, doc({ name: 'Pets', format: 'json', raw_document: petJson }));
    assert.equal(pet.status, 201, pet.text);
    assert.deepEqual(
      (await api.get(`${PATH}?filter[openapi_version]=2.0`)).body.data.map((d: any) => d.id),
      [pet.body.data.id],
    );
    assert.ok((await api.get(`${PATH}?filter[format]=json`)).body.data.every((d: any) => d.attributes.format === 'json'));
    assert.deepEqual(
      (await api.get(`${PATH}?filter[name]=Pets`)).body.data.map((d: any) => d.id),
      [pet.body.data.id],
    );
    const fields = await api.get(`${PATH}/${pet.body.data.id}?fields[api_spec]=name,title`);
    assert.deepEqual(Object.keys(fields.body.data.attributes).sort(), ['name', 'title']);
  });
});

describe('a new document', () => {
  test('PATCH normalizes it again and reports the drift in meta.changes; a rename reports nothing', async () => {
    const created = await api.post(PATH, upload());
    const id = created.body.data.id;
    const changed = shopYaml
      .replace('            price: { type: number, nullable: true }', '            price: { type: string }')
      .replace('  /tree:\n    get:\n      operationId: getTree', '  /forest:\n    get:\n      operationId: getForest');
    const r = await api.patch(PATH + '/' + id, doc({ raw_document: changed }, id));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.meta.changes, {
      added: ['getForest'],
      removed: ['getTree'],
      changed: [
        { operation_ref: 'createProduct', request: true, response: true },
        { operation_ref: 'GET /products/{id}', request: false, response: true },
      ],
    });
    assert.equal(r.body.data.attributes.raw_document, changed);
    assert.deepEqual(
      r.body.data.attributes.operations.map((o: any) => o.operation_ref),
      ['createProduct', 'GET /products/{id}', 'getForest'],
    );
    const renamed = await api.patch(`${PATH}/${id}`, doc({ name: 'Shop v2' }, id));
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.meta, undefined);
    const bad = await api.patch(`${PATH}/${id}`, doc({ raw_document: 'openapi: [' }, id));
    assertJsonApiError(bad, 422, 'invalid_request', { pointer: '/data/attributes/raw_document' });
    assert.equal((await api.get(`${PATH}/${id}`)).body.data.attributes.raw_document, changed);
  });

  test('the last update that altered the operations is kept as last_changes, until the next one', async () => {
    const created = await api.post(PATH, upload());
    assert.equal(created.status, 201, created.text);
    const id = created.body.data.id;
    assert.equal(created.body.data.attributes.last_changes, null);
    const forest = shopYaml.replace('  /tree:\n    get:\n      operationId: getTree', '  /forest:\n    get:\n      operationId: getForest');
    const before = t.deps.clock();
    const r = await api.patch(`${PATH}/${id}`, doc({ raw_document: forest }, id));
    assert.equal(r.status, 200, r.text);
    const { changed_at: changedAt, ...kept } = r.body.data.attributes.last_changes;
    assert.deepEqual(kept, r.body.meta.changes);
    assert.deepEqual(kept, { added: ['getForest'], removed: ['getTree'], changed: [] });
    assert.ok(Date.parse(changedAt) >= before - 1 && Date.parse(changedAt) <= t.deps.clock() + 1, changedAt);
    // A rename, or the same document again, alters no operation: the last change stays.
    await api.patch(`${PATH}/${id}`, doc({ name: 'Shop v3' }, id));
    const same = await api.patch(`${PATH}/${id}`, doc({ raw_document: forest + '\n' }, id));
    assert.equal(same.status, 200, same.text);
    assert.deepEqual(same.body.meta.changes, { added: [], removed: [], changed: [] });
    const read = await api.get(`${PATH}/${id}`);
    assert.deepEqual(read.body.data.attributes.last_changes, r.body.data.attributes.last_changes);
    // A list shows it, and leaves it out with a sparse fieldset, like the other large attributes.
    const list = await api.get(`${PATH}?filter[name]=Shop v3`);
    assert.deepEqual(list.body.data[0].attributes.last_changes, r.body.data.attributes.last_changes);
    const sparse = await api.get(`${PATH}?filter[name]=Shop v3&fields[api_spec]=name`);
    assert.deepEqual(sparse.body.data[0].attributes, { name: 'Shop v3' });
    // The next change replaces it.
    const back = await api.patch(`${PATH}/${id}`, doc({ raw_document: shopYaml }, id));
    assert.deepEqual(back.body.data.attributes.last_changes.added, ['getTree']);
    assert.deepEqual(back.body.data.attributes.last_changes.removed, ['getForest']);
  });
});

describe('bundled providers', () => {
  test('GET /providers lists the catalog; /providers/{slug} reads one; an unknown slug is 404', async () => {
    const list = await api.get('/api/json/v1/providers');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.body.data.map((p: any) => p.id),
      ['tributary-orders', 'acme-ledger', 's3-bucket', 'snowflake-sql'],
    );
    const orders = await api.get('/api/json/v1/providers/tributary-orders');
    assert.equal(orders.body.data.type, 'provider');
    assert.equal(orders.body.data.attributes.connector_type, 'http');
    assert.equal(orders.body.data.attributes.auth_type, 'api_key');
    assert.equal(orders.body.data.attributes.spec_title, 'Orders API');
    assertJsonApiError(await api.get('/api/json/v1/providers/nope'), 404, 'not_found');
    assertJsonApiError(await api.get('/api/json/v1/providers?page[size]=1'), 400, 'invalid_query');
  });

  test("an api_spec with provider_slug alone installs the provider's document; with a document too it is 422; an unknown slug is 422", async () => {
    const r = await api.post(PATH, doc({ provider_slug: 'acme-ledger' }));
    assert.equal(r.status, 201, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.provider_slug, 'acme-ledger');
    assert.equal(a.name, 'Acme Ledger API');
    assert.equal(a.security_schemes.oauth.type, 'oauth2');
    assert.deepEqual(
      a.operations.map((o: any) => o.operation_ref),
      ['listAccounts', 'listEntries', 'createEntry'],
    );
    assertJsonApiError(await api.post(PATH, doc({ provider_slug: 'acme-ledger', format: 'yaml', raw_document: shopYaml })), 422, 'invalid_request');
    assertJsonApiError(await api.post(PATH, doc({ provider_slug: 'no-such-provider' })), 422, 'invalid_request', { pointer: '/data/attributes/provider_slug' });
    // A tag, not an identity: a second install is fine.
    assert.equal((await api.post(PATH, doc({ provider_slug: 'acme-ledger', name: 'Ledger (second)' }))).status, 201);
  });

  test("a connector with a provider's slug takes its settings and gets its specification attached", async () => {
    const r = await api.post('/api/json/v1/external_connectors', {
      data: {
        type: 'external_connector',
        attributes: { name: 'Orders', provider_slug: 'tributary-orders', secret: 'k'.repeat(40), config: { base_url: 'https://shop-orders.example.net/v1' } },
      },
    });
    assert.equal(r.status, 201, r.text);
    const c = r.body.data.attributes;
    assert.equal(c.type, 'http');
    assert.equal(c.auth_type, 'api_key');
    assert.equal(c.direction, 'outbound');
    assert.deepEqual(c.config, { base_url: 'https://shop-orders.example.net/v1', header_name: 'X-Api-Key', health_operation: 'getHealth' });
    const specs = await api.get(`${PATH}?filter[external_connector_id]=${r.body.data.id}`);
    assert.equal(specs.body.data.length, 1);
    assert.equal(specs.body.data[0].attributes.provider_slug, 'tributary-orders');
    assert.ok(specs.body.data[0].attributes.operations.some((o: any) => o.operation_ref === 'createOrder'));
    // Not a bundled slug: only a tag, nothing installed.
    const tagged = await api.post('/api/json/v1/external_connectors', {
      data: { type: 'external_connector', attributes: { name: 'Own', auth_type: 'none', provider_slug: 'our-own-erp' } },
    });
    assert.equal(tagged.status, 201, tagged.text);
    assert.equal((await api.get(`${PATH}?filter[external_connector_id]=${tagged.body.data.id}`)).body.data.length, 0);
  });
});
