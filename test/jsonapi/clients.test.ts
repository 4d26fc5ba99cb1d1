/**
 * Real JSON:API clients over a real socket (issue 11 item 10): kitsu reads, changes and
 * PATCHes back what it read (links, read-only attributes and relationship objects
 * included), kitsu and jsonapi-serializer create with relationship linkage. The client
 * setups are the ones docs/api.md shows.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import Kitsu from 'kitsu';
import { dataModelDoc, JSONAPI, jsonApi, seedTenant, startApp, tokenFor, type Tenant, type TestApp } from '../helpers/app.ts';

interface SerializerCtor {
  new (type: string, opts: Record<string, unknown>): { serialize(record: Record<string, unknown>): unknown };
}
interface DeserializerCtor {
  new (opts: Record<string, unknown>): { deserialize(doc: unknown): Promise<Record<string, unknown>> };
}
// jsonapi-serializer ships no type declarations.
const { Serializer, Deserializer } = createRequire(import.meta.url)('jsonapi-serializer') as { Serializer: SerializerCtor; Deserializer: DeserializerCtor };

let t: TestApp;
let tenant: Tenant;
let token: string;
let api: ReturnType<typeof jsonApi>;
let kitsu: Kitsu;
let modelId: string;
let otherModelId: string;

async function createModel(slug: string): Promise<string> {
  const res = await api.post('/api/json/v1/data_models', dataModelDoc({ name: slug, slug }));
  assert.equal(res.status, 201, res.text);
  return res.body.data.id;
}

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  token = await tokenFor(t, tenant);
  api = jsonApi(t, token);
  kitsu = new Kitsu({
    baseURL: `${t.url}/api/json/v1`,
    headers: { Authorization: `Bearer ${token}` },
    camelCaseTypes: false,
    resourceCase: 'none',
    pluralize: false,
  });
  modelId = await createModel('orders');
  otherModelId = await createModel('customers');
});
after(() => t.close());

/** What kitsu throws for an error answer: the status and the JSON:API errors. */
async function kitsuError(p: Promise<unknown>): Promise<{ status: number; errors: any[] }> {
  try {
    await p;
  } catch (err) {
    const e = err as { response?: { status: number }; errors?: any[] };
    return { status: e.response?.status ?? 0, errors: e.errors ?? [] };
  }
  assert.fail('expected the request to be refused');
}

describe('kitsu', () => {
  test('reads a data model, changes it and PATCHes back what it read', async () => {
    const read = await kitsu.get(`data_models/${modelId}`);
    assert.equal(read.status, 200);
    const model = read.data as Record<string, any>;
    assert.equal(model.slug, 'orders');
    model.name = 'Orders (renamed)';
    model.retention_days = 30;
    const res = await kitsu.request({ method: 'PATCH', url: `data_models/${modelId}`, type: 'data_model', body: model });
    assert.equal(res.status, 200);
    assert.equal((res.data as any).name, 'Orders (renamed)');
    const stored = await api.get(`/api/json/v1/data_models/${modelId}`);
    assert.equal(stored.body.data.attributes.name, 'Orders (renamed)');
    assert.equal(stored.body.data.attributes.retention_days, 30);
  });

  test('a read-only attribute sent back with another value is still refused by name', async () => {
    const model = (await kitsu.get(`data_models/${modelId}`)).data as Record<string, any>;
    model.inserted_at = '2001-01-01T00:00:00.000Z';
    const e = await kitsuError(kitsu.request({ method: 'PATCH', url: `data_models/${modelId}`, type: 'data_model', body: model }));
    assert.equal(e.status, 422);
    assert.equal(e.errors[0].source.pointer, '/data/attributes/inserted_at');
  });

  test('creates a field with relationship linkage instead of data_model_id', async () => {
    const res = await kitsu.request({
      method: 'POST',
      url: 'data_model_fields',
      type: 'data_model_field',
      body: { name: 'amount', label: 'Amount', data_model: { data: { type: 'data_model', id: modelId } } },
    });
    assert.equal(res.status, 201);
    const field = res.data as Record<string, any>;
    assert.equal(field.data_model_id, modelId);
    assert.equal(field.data_model.data.id, modelId);
  });

  test('linkage and data_model_id naming different models is 422 at the relationship', async () => {
    const e = await kitsuError(
      kitsu.request({
        method: 'POST',
        url: 'data_model_fields',
        type: 'data_model_field',
        body: { name: 'mismatch', data_model_id: modelId, data_model: { data: { type: 'data_model', id: otherModelId } } },
      }),
    );
    assert.equal(e.status, 422);
    assert.equal(e.errors[0].code, 'invalid_request');
    assert.deepEqual(e.errors[0].source, { pointer: '/data/relationships/data_model' });
    const fields = await api.get(`/api/json/v1/data_model_fields?filter[name]=mismatch`);
    assert.deepEqual(fields.body.data, []);
  });

  test('linkage and data_model_id naming the same model is one and the same', async () => {
    const res = await kitsu.request({
      method: 'POST',
      url: 'data_model_fields',
      type: 'data_model_field',
      body: { name: 'both', data_model_id: modelId.toUpperCase(), data_model: { data: { type: 'data_model', id: modelId } } },
    });
    assert.equal(res.status, 201);
  });

  test("a field's type attribute goes through kitsu's own axios with a written-out document", async () => {
    const doc = {
      data: {
        type: 'data_model_field',
        attributes: { name: 'qty', type: 'integer' },
        relationships: { data_model: { data: { type: 'data_model', id: modelId } } },
      },
    };
    const res = await kitsu.axios.post('data_model_fields', doc, { headers: kitsu.headers });
    assert.equal(res.status, 201);
    assert.equal(res.data.data.attributes.type, 'integer');
  });
});

describe('jsonapi-serializer', () => {
  test('creates a field, the attribute named type included, and reads it back', async () => {
    const serializer = new Serializer('data_model_field', {
      attributes: ['name', 'type', 'is_required', 'data_model'],
      keyForAttribute: 'snake_case',
      pluralizeType: false,
      data_model: { ref: 'id', included: false },
    });
    const doc = serializer.serialize({ name: 'placed_at', type: 'datetime', is_required: true, data_model: { id: otherModelId } });
    const res = await api.post('/api/json/v1/data_model_fields', doc);
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('content-type'), JSONAPI);
    const field = await new Deserializer({ keyForAttribute: 'snake_case' }).deserialize(res.body);
    assert.equal(field.name, 'placed_at');
    assert.equal(field.type, 'datetime');
    assert.equal(field.data_model_id, otherModelId);
  });
});
