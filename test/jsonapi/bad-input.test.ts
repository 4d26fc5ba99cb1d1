/**
 * Hostile and malformed request documents on every JSON:API write of data models and
 * fields (contract: Common rules, Errors, Limits; decisions §3 and §8). Every refusal is a
 * 4xx JSON:API error document without internals, and none of them writes anything.
 */
import { after, before, describe, test } from 'node:test';
import { parseJson } from '../../src/json.ts';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { JSONAPI, dataModelDoc, jsonApi, seedTenant, startApp, tokenFor, type ApiResponse, type Tenant, type TestApp } from '../helpers/app.ts';
import { runs } from '../helpers/property.ts';
import { RUNAWAY_MS } from '../helpers/runaway.ts';

const MODELS = '/api/json/v1/data_models';
const FIELDS = '/api/json/v1/data_model_fields';
const FIELD_TYPES = ['string', 'integer', 'boolean', 'datetime', 'float', 'map'];

type Api = ReturnType<typeof jsonApi>;

/** Stack frames, SQL, file paths: nothing of the inside may show in an error body. */
const LEAKS: readonly RegExp[] = [
  /node_modules/i,
  /\n\s*at\s/,
  /\bat\s+\S+\s+\(/,
  /\(?\/?[\w./-]+\.(?:ts|js|mjs|cjs):\d+/,
  /\/work\//,
  /file:\/\//,
  /\bselect\b[\s\S]*\bfrom\b/i,
  /\binsert\s+into\b/i,
  /\bupdate\s+"?\w+"?\s+set\b/i,
  /\bdelete\s+from\b/i,
  /\bviolates\b|\bconstraint\s+"/i,
  /\bSQLSTATE\b|\bsyntax error at\b/i,
  /\bError:\s/,
];

function assertNoLeak(res: ApiResponse, what: string): void {
  for (const re of LEAKS) assert.doesNotMatch(res.text, re, `${what}: the error body leaks internals (${re})`);
}

/** A JSON:API error document of exactly `status` and `code` (and `pointer` when given). */
function assertError(res: ApiResponse, status: number, code: string, what: string, pointer?: string): void {
  assert.equal(res.status, status, `${what}: status (body ${res.text.slice(0, 300)})`);
  assertErrorShape(res, what);
  assert.equal(res.body.errors[0].code, code, `${what}: code`);
  if (pointer !== undefined) assert.equal(res.body.errors[0].source?.pointer, pointer, `${what}: source.pointer`);
}

/** Any 4xx JSON:API error document. */
function assertErrorShape(res: ApiResponse, what: string): void {
  assert.ok(res.status >= 400 && res.status < 500, `${what}: expected a 4xx, got ${res.status} ${res.text.slice(0, 300)}`);
  assert.equal(res.headers.get('content-type'), JSONAPI, `${what}: content-type`);
  assert.ok(res.body && Array.isArray(res.body.errors) && res.body.errors.length > 0, `${what}: errors array`);
  for (const e of res.body.errors) {
    assert.equal(e.status, String(res.status), `${what}: errors[].status is the status as a string`);
    for (const member of ['code', 'title', 'detail'] as const) {
      assert.equal(typeof e[member], 'string', `${what}: errors[].${member} is a string`);
      assert.ok(e[member].length > 0, `${what}: errors[].${member} is not empty`);
    }
  }
  assertNoLeak(res, what);
}

/** `{"a":{"a":...1...}}`, `depth` objects deep. */
const nestedObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const nestedArray = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

/** What the server sees of a JSON value: a JSON round trip, with prototype keys removed. */
function asServerSees(v: unknown): unknown {
  const text = JSON.stringify(v);
  return text === undefined ? undefined : JSON.parse(text, (k, val) => (k === '__proto__' || k === 'constructor' ? undefined : val));
}

const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);

let t: TestApp;
let tenant: Tenant;
let api: Api;
let modelId: string;
let fieldId: string;
/** Every data model and field a valid request created; nothing else may exist at the end. */
const createdModels = new Set<string>();
const createdFields = new Set<string>();
let modelBefore: Record<string, unknown>;
let fieldBefore: Record<string, unknown>;

async function modelRows() {
  return t.deps.db.selectFrom('data_models').selectAll().where('workspace_id', '=', tenant.workspaceId).execute();
}
async function fieldRows() {
  return t.deps.db.selectFrom('data_model_fields').selectAll().where('workspace_id', '=', tenant.workspaceId).execute();
}

before(async () => {
  t = await startApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await seedTenant(t.deps);
  api = jsonApi(t, await tokenFor(t, tenant));
  const m = await api.post(MODELS, dataModelDoc({ name: 'Orders', slug: 'orders', description: 'All orders', retention_days: 30 }));
  assert.equal(m.status, 201, m.text);
  modelId = m.body.data.id;
  createdModels.add(modelId);
  const f = await api.post(FIELDS, {
    data: {
      type: 'data_model_field',
      attributes: { data_model_id: modelId, name: 'order_id', type: 'string', is_primary_key: true, constraints: { max_length: 10 } },
    },
  });
  assert.equal(f.status, 201, f.text);
  fieldId = f.body.data.id;
  createdFields.add(fieldId);
  modelBefore = (await t.deps.db.selectFrom('data_models').selectAll().where('id', '=', modelId).executeTakeFirstOrThrow()) as Record<string, unknown>;
  fieldBefore = (await t.deps.db.selectFrom('data_model_fields').selectAll().where('id', '=', fieldId).executeTakeFirstOrThrow()) as Record<string, unknown>;
});

after(async () => {
  await t?.close();
});

interface Write {
  label: string;
  method: 'POST' | 'PATCH';
  path: () => string;
  type: 'data_model' | 'data_model_field';
  /** The URL id on PATCH. */
  id?: () => string;
  /** Attributes that make a valid document (creates: all required ones; never sent unchanged). */
  base: () => Record<string, unknown>;
}

const WRITES: readonly Write[] = [
  { label: 'POST data_models', method: 'POST', path: () => MODELS, type: 'data_model', base: () => ({ name: 'Never created', slug: 'never-created' }) },
  { label: 'PATCH data_models/{id}', method: 'PATCH', path: () => `${MODELS}/${modelId}`, type: 'data_model', id: () => modelId, base: () => ({}) },
  {
    label: 'POST data_model_fields',
    method: 'POST',
    path: () => FIELDS,
    type: 'data_model_field',
    base: () => ({ data_model_id: modelId, name: 'never_created' }),
  },
  { label: 'PATCH data_model_fields/{id}', method: 'PATCH', path: () => `${FIELDS}/${fieldId}`, type: 'data_model_field', id: () => fieldId, base: () => ({}) },
];

/** A document for `w` with `attrs` merged over its valid base. */
function doc(w: Write, attrs: Record<string, unknown> = {}, data: Record<string, unknown> = {}) {
  return { data: { type: w.type, ...(w.id ? { id: w.id() } : {}), attributes: { ...w.base(), ...attrs }, ...data } };
}

const send = (w: Write, body: unknown, headers?: Record<string, string>) => api.request(w.method, w.path(), body, headers);

/** Per type: attribute -> values that must be refused with 422 at that attribute. */
const BAD_VALUES: Record<Write['type'], Record<string, readonly unknown[]>> = {
  data_model: {
    name: [1, 0.5, true, {}, [], ['Orders'], null, '', '   ', 'x'.repeat(201)],
    slug: [1, true, {}, null, '', 'Bad Slug', 'UPPER', 'under_score', 'ü-slug', ' padded', 'x'.repeat(64)],
    description: [1, false, {}, ['a'], 'x'.repeat(4001)],
    organization_id: [1, true, {}, [], 'x'.repeat(65), randomUUID()],
    retention_days: ['30', '', 1.5, 30.000001, true, {}, [], 0, -1, 36_501, 1e300, Number.MAX_SAFE_INTEGER + 1],
  },
  data_model_field: {
    // A well-formed id that names no data model of this workspace (create), or another model (update).
    data_model_id: [1, true, {}, [], null, 'x'.repeat(65), randomUUID()],
    name: [1, true, {}, null, '', 'Name', '1abc', '_abc', 'has space', 'has-hyphen', 'x'.repeat(64)],
    label: [1, true, {}, [], 'x'.repeat(201)],
    description: [1, true, {}, ['a'], 'x'.repeat(4001)],
    type: [1, true, {}, [], 'text', 'STRING', ''],
    is_primary_key: [{}, [], 'true', 1, 0, ''],
    is_required: [{}, [], 'false', 1, 0, ''],
    constraints: ['{}', 1, true, [], [{}], { big: 'x'.repeat(16_400) }],
  },
};

/** Attributes that exist internally or are read-only, never writable. */
const NOT_WRITABLE: Record<Write['type'], readonly string[]> = {
  data_model: ['workspace_id', 'id', 'inserted_at', 'updated_at', 'type', 'fields', 'nope', 'Name'],
  data_model_field: ['workspace_id', 'organization_id', 'id', 'inserted_at', 'updated_at', 'data_model', 'nope', 'Name'],
};

for (const w of WRITES) {
  describe(w.label, () => {
    test('malformed JSON is 400 bad_request', async () => {
      const bodies = [
        '{',
        '{"data":',
        '{"data": }',
        "{'data': {}}",
        '{"data":{"type":"x"},}',
        '{"data":{}} trailing',
        'nul',
        'NaN',
        '[1,]',
        '{"a":1 "b":2}',
        '\u0000',
        '{"data":{"type":"x"}}}',
        '"unterminated',
      ];
      for (const body of bodies) assertError(await send(w, body), 400, 'bad_request', `${w.label} ${JSON.stringify(body)}`);
    });

    test('an empty body is 400 bad_request', async () => {
      assertError(await send(w, ''), 400, 'bad_request', `${w.label} empty body`);
    });

    test('a document that is not an object is 422 at the root', async () => {
      for (const body of ['[]', '[{"data":{}}]', JSON.stringify([doc(w)]), '"data"', '""', '42', '-1.5e3', 'null', 'true', 'false']) {
        assertError(await send(w, body), 422, 'invalid_request', `${w.label} ${body}`, '');
      }
    });

    test('a missing or non-object data member is 422 at /data', async () => {
      for (const body of [
        {},
        { meta: {} },
        { data: null },
        { data: [] },
        { data: [doc(w).data] },
        { data: 'x' },
        { data: 1 },
        { data: true },
        { Data: doc(w).data },
      ]) {
        assertError(await send(w, body), 422, 'invalid_request', `${w.label} ${JSON.stringify(body)}`, body && 'Data' in body ? '/Data' : '/data');
      }
    });

    test('unexpected top-level members are 422', async () => {
      for (const member of ['included', 'errors', 'links', 'type', 'attributes']) {
        assertError(await send(w, { ...doc(w), [member]: [] }), 422, 'invalid_request', `${w.label} top-level ${member}`, `/${member}`);
      }
    });

    test('a missing or non-string data.type is 422 at /data/type', async () => {
      const { type: _type, ...rest } = doc(w).data;
      assertError(await send(w, { data: rest }), 422, 'invalid_request', `${w.label} no data.type`, '/data/type');
      for (const type of [null, 1, true, {}, [w.type]]) {
        assertError(await send(w, { data: { ...rest, type } }), 422, 'invalid_request', `${w.label} data.type ${JSON.stringify(type)}`, '/data/type');
      }
    });

    test('a wrong data.type is 409 type_mismatch', async () => {
      const others = [w.type === 'data_model' ? 'data_model_field' : 'data_model', `${w.type}s`, w.type.toUpperCase(), 'organization', '', ` ${w.type}`];
      for (const type of others) {
        assertError(await send(w, doc(w, {}, { type })), 409, 'type_mismatch', `${w.label} data.type ${JSON.stringify(type)}`, '/data/type');
      }
    });

    if (w.method === 'POST') {
      test('a client-generated id on create is 403 forbidden', async () => {
        for (const data of [{ id: randomUUID() }, { id: modelId }, { id: '' }, { id: null }, { lid: 'local-1' }]) {
          assertError(await send(w, doc(w, {}, data)), 403, 'forbidden', `${w.label} ${JSON.stringify(data)}`, '/data/id');
        }
      });
    } else {
      test('a missing or mismatching data.id on PATCH is 409 conflict', async () => {
        const other = w.type === 'data_model' ? fieldId : modelId;
        for (const id of [randomUUID(), other, ` ${w.id!()}`, `${w.id!()}0`, 1, null, undefined]) {
          const body = doc(w);
          const data: Record<string, unknown> = { ...body.data, id };
          if (id === undefined) delete data.id;
          assertError(await send(w, { data }), 409, 'conflict', `${w.label} data.id ${JSON.stringify(id)}`, '/data/id');
        }
      });

      test('PATCH of an absent or malformed id is 404', async () => {
        const base = w.path().replace(/\/[^/]+$/, '');
        for (const id of [randomUUID(), 'not-a-uuid']) {
          const res = await api.patch(`${base}/${id}`, { data: { type: w.type, id, attributes: {} } });
          assertError(res, 404, 'not_found', `${w.label} ${id}`);
        }
      });
    }

    test('linkage that does not stand for a writable attribute, and unknown members of data, are 422', async () => {
      const cases: Array<[unknown, string]> = [
        [[], '/data/relationships'],
        [{ nope: { data: null } }, '/data/relationships/nope'],
        [{ [w.type === 'data_model' ? 'fields' : 'data_model']: 'x' }, `/data/relationships/${w.type === 'data_model' ? 'fields' : 'data_model'}`],
      ];
      if (w.type === 'data_model') cases.push([{ fields: { data: [] } }, '/data/relationships/fields']);
      else {
        cases.push([{ data_model: { data: { type: 'organization', id: modelId } } }, '/data/relationships/data_model/data/type']);
        cases.push([{ data_model: { data: null } }, '/data/relationships/data_model/data']);
        cases.push([{ data_model: { data: { type: 'data_model', id: 5 } } }, '/data/relationships/data_model/data/id']);
      }
      for (const [relationships, pointer] of cases) {
        assertError(await send(w, doc(w, {}, { relationships })), 422, 'invalid_request', `${w.label} relationships ${JSON.stringify(relationships)}`, pointer);
      }
      for (const member of ['included', 'extra']) {
        assertError(await send(w, doc(w, {}, { [member]: {} })), 422, 'invalid_request', `${w.label} data.${member}`, `/data/${member}`);
      }
    });

    test('attributes that are not an object are 422 at /data/attributes', async () => {
      for (const attributes of [[], ['name'], 'name', 1, true]) {
        assertError(
          await send(w, doc(w, {}, { attributes })),
          422,
          'invalid_request',
          `${w.label} attributes ${JSON.stringify(attributes)}`,
          '/data/attributes',
        );
      }
    });

    test('unknown and non-public attributes are refused by name', async () => {
      for (const name of NOT_WRITABLE[w.type]) {
        const value = name.endsWith('_at') ? new Date().toISOString() : name.endsWith('id') ? randomUUID() : 'x';
        assertError(await send(w, doc(w, { [name]: value })), 422, 'invalid_request', `${w.label} attribute ${name}`, `/data/attributes/${name}`);
      }
    });

    test('wrong types, out-of-range values and too-long strings are 422 at the attribute', async () => {
      for (const [name, values] of Object.entries(BAD_VALUES[w.type])) {
        for (const value of values) {
          assertError(
            await send(w, doc(w, { [name]: value })),
            422,
            'invalid_request',
            `${w.label} ${name}=${JSON.stringify(value)?.slice(0, 40)}`,
            `/data/attributes/${name}`,
          );
        }
      }
    });

    test('NUL characters and lone surrogates in text are 422, never 500', async () => {
      const textAttrs = w.type === 'data_model' ? ['name', 'description'] : ['label', 'description'];
      for (const name of textAttrs) {
        for (const raw of ['"a\\u0000b"', '"\\ud800"', '"x\\udc00y"']) {
          const body = JSON.stringify(doc(w, { [name]: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', raw);
          assertError(await send(w, body), 422, 'invalid_request', `${w.label} ${name}=${raw}`, `/data/attributes/${name}`);
        }
      }
      if (w.type === 'data_model_field') {
        for (const raw of ['{"a":"\\u0000"}', '{"\\u0000":1}', '{"a":"\\ud800"}']) {
          const body = JSON.stringify(doc(w, { constraints: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', raw);
          assertError(await send(w, body), 422, 'invalid_request', `${w.label} constraints=${raw}`);
        }
      }
    });

    if (w.method === 'POST') {
      test('missing required attributes are 422 at the attribute', async () => {
        for (const name of Object.keys(w.base())) {
          const attrs = w.base();
          delete attrs[name];
          assertError(
            await send(w, { data: { type: w.type, attributes: attrs } }),
            422,
            'invalid_request',
            `${w.label} without ${name}`,
            `/data/attributes/${name}`,
          );
        }
        assertError(await send(w, { data: { type: w.type } }), 422, 'invalid_request', `${w.label} without attributes`);
        assertError(await send(w, { data: { type: w.type, attributes: null } }), 422, 'invalid_request', `${w.label} attributes null`);
      });
    }

    test('JSON nested deeper than 64 levels is 422, never 500, and not walked without end', async () => {
      const attr = w.type === 'data_model' ? 'description' : 'constraints';
      for (const depth of [65, 10_000]) {
        for (const nested of [nestedObject(depth), nestedArray(depth)]) {
          const body = JSON.stringify(doc(w, { [attr]: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', nested);
          const started = performance.now();
          const res = await send(w, body);
          const ms = performance.now() - started;
          assertError(res, 422, 'invalid_request', `${w.label} ${attr} nested ${depth}`);
          assert.ok(ms < RUNAWAY_MS, `${w.label} nested ${depth} took ${ms.toFixed(0)} ms`);
        }
      }
      // Deep nesting in a member the document shape would refuse anyway: still 422, not 500.
      assertError(await send(w, nestedArray(10_000)), 422, 'invalid_request', `${w.label} bare deep array`);
    });
  });
}

describe('__proto__ and constructor members never reach an object', () => {
  test('a field with constraints {"__proto__": {...}, "a": 1} stores {"a": 1}', async () => {
    const body = `{"data":{"type":"data_model_field","attributes":{"data_model_id":"${modelId}","name":"proto_a","constraints":{"__proto__":{"polluted":true},"a":1}}}}`;
    const res = await api.post(FIELDS, body);
    assert.equal(res.status, 201, res.text);
    createdFields.add(res.body.data.id);
    assert.deepEqual(res.body.data.attributes.constraints, { a: 1 });
    const row = await t.deps.db.selectFrom('data_model_fields').select('constraints').where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.deepEqual(json(row.constraints), { a: 1 });
    const read = await api.get(`${FIELDS}/${res.body.data.id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body.data.attributes.constraints, { a: 1 });
    assert.equal(({} as any).polluted, undefined);
    assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted'), false);
  });

  test('constructor.prototype members are dropped too', async () => {
    const body = `{"data":{"type":"data_model_field","attributes":{"data_model_id":"${modelId}","name":"proto_b","constraints":{"constructor":{"prototype":{"polluted":true}},"nested":{"__proto__":{"polluted":true},"b":2}}}}}`;
    const res = await api.post(FIELDS, body);
    assert.equal(res.status, 201, res.text);
    createdFields.add(res.body.data.id);
    const row = await t.deps.db.selectFrom('data_model_fields').select('constraints').where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.deepEqual(json(row.constraints), { nested: { b: 2 } });
    assert.equal(({} as any).polluted, undefined);
  });

  test('a __proto__ member of attributes cannot supply attributes', async () => {
    const body = `{"data":{"type":"data_model_field","attributes":{"__proto__":{"is_primary_key":true,"label":"Injected","workspace_id":"${randomUUID()}"},"data_model_id":"${modelId}","name":"proto_c"}}}`;
    const res = await api.post(FIELDS, body);
    assert.equal(res.status, 201, res.text);
    createdFields.add(res.body.data.id);
    assert.equal(res.body.data.attributes.is_primary_key, false);
    assert.equal(res.body.data.attributes.label, 'proto_c');
    const row = await t.deps.db.selectFrom('data_model_fields').selectAll().where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.equal(row.workspace_id, tenant.workspaceId);
    assert.equal(row.is_primary_key, false);
  });

  test('spelled with escapes (\\u005f_proto__, constructo\\u0072) they are dropped too; a text without them parses as it is', () => {
    assert.deepEqual(parseJson('{"\\u005f_proto__": {"polluted": true}, "a": {"constructo\\u0072": 1, "b": 2}}'), { a: { b: 2 } });
    assert.deepEqual(parseJson('{"a": [1, {"b": "\\u00e9"}], "c": null}'), { a: [1, { b: 'é' }], c: null });
    const plain = parseJson('{"x": {"y": [true, 1.5, "z"]}}') as Record<string, unknown>;
    assert.deepEqual(plain, { x: { y: [true, 1.5, 'z'] } });
    assert.equal(({} as any).polluted, undefined);
  });

  test('a __proto__ member cannot supply data or data.type', async () => {
    const attrs = `{"name":"Proto","slug":"proto-never"}`;
    assertError(
      await api.post(MODELS, `{"__proto__":{"data":{"type":"data_model","attributes":${attrs}}}}`),
      422,
      'invalid_request',
      'top-level __proto__',
      '/data',
    );
    assertError(
      await api.post(MODELS, `{"data":{"__proto__":{"type":"data_model"},"attributes":${attrs}}}`),
      422,
      'invalid_request',
      'data.__proto__',
      '/data/type',
    );
    assertError(
      await api.post(MODELS, `{"data":{"constructor":{"type":"data_model"},"attributes":${attrs}}}`),
      422,
      'invalid_request',
      'data.constructor',
      '/data/type',
    );
    assert.equal(({} as any).type, undefined);
    assert.equal(({} as any).data, undefined);
  });

  test('JSON exactly 64 levels deep is accepted and stored as sent', async () => {
    // The document adds three levels (root, data, attributes) above constraints.
    const body = `{"data":{"type":"data_model_field","attributes":{"data_model_id":"${modelId}","name":"deep_64","constraints":${nestedObject(61)}}}}`;
    const res = await api.post(FIELDS, body);
    assert.equal(res.status, 201, res.text);
    createdFields.add(res.body.data.id);
    const row = await t.deps.db.selectFrom('data_model_fields').select('constraints').where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.deepEqual(json(row.constraints), JSON.parse(nestedObject(61)));
  });
});

describe('property: arbitrary bodies never give 5xx', () => {
  const leakFree = (res: ApiResponse, what: string) => {
    assert.ok(res.status >= 400 && res.status < 500, `${what}: expected 4xx, got ${res.status} ${res.text.slice(0, 300)}`);
    assert.equal(res.headers.get('content-type'), JSONAPI, `${what}: content-type`);
    assert.ok(Array.isArray(res.body?.errors) && res.body.errors.length > 0, `${what}: errors array`);
    for (const e of res.body.errors) {
      assert.equal(e.status, String(res.status));
      for (const m of ['code', 'title', 'detail']) assert.equal(typeof e[m], 'string', `${what}: errors[].${m}`);
    }
    // Details may echo a client's member names, so only the unmistakable leaks are checked.
    assert.doesNotMatch(res.text, /node_modules|\/work\/|file:\/\/|\n\s+at\s/, `${what}: leak`);
  };

  async function checkModelCreated(res: ApiResponse, sent: unknown) {
    const attrs = (asServerSees(sent) as any).data.attributes as Record<string, any>;
    createdModels.add(res.body.data.id);
    const row = await t.deps.db.selectFrom('data_models').selectAll().where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.equal(row.workspace_id, tenant.workspaceId);
    assert.equal(row.organization_id, tenant.organizationId);
    assert.equal(row.name, attrs.name.trim());
    assert.equal(row.slug, attrs.slug);
    assert.equal(row.description, attrs.description == null ? null : attrs.description.trim());
    assert.equal(row.retention_days === null ? null : Number(row.retention_days), attrs.retention_days ?? null);
    assert.equal(res.body.data.attributes.name, row.name);
    assert.equal(res.body.data.attributes.slug, row.slug);
  }

  async function checkFieldCreated(res: ApiResponse, sent: unknown) {
    const attrs = (asServerSees(sent) as any).data.attributes as Record<string, any>;
    createdFields.add(res.body.data.id);
    const row = await t.deps.db.selectFrom('data_model_fields').selectAll().where('id', '=', res.body.data.id).executeTakeFirstOrThrow();
    assert.equal(row.workspace_id, tenant.workspaceId);
    assert.equal(row.data_model_id, String(attrs.data_model_id).toLowerCase());
    assert.equal(row.name, attrs.name);
    assert.equal(row.label, attrs.label == null ? attrs.name : attrs.label.trim());
    assert.equal(row.description, attrs.description == null ? null : attrs.description.trim());
    assert.equal(row.type, attrs.type ?? null);
    assert.equal(row.is_primary_key, attrs.is_primary_key ?? false);
    assert.equal(row.is_required, attrs.is_required ?? false);
    assert.deepEqual(row.constraints == null ? null : json(row.constraints), attrs.constraints ?? null);
  }

  const post = (p: string, body: string) => api.post(p, body);

  test('fc.jsonValue documents to POST data_models and data_model_fields', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), async (value) => {
        const body = JSON.stringify(value);
        for (const p of [MODELS, FIELDS]) {
          const res = await post(p, body);
          if (res.status === 201) {
            await (p === MODELS ? checkModelCreated(res, value) : checkFieldCreated(res, value));
          } else {
            leakFree(res, `${p} ${body.slice(0, 200)}`);
          }
        }
      }),
      { numRuns: runs(60) },
    );
  });

  test('arbitrary strings as bodies', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ unit: 'binary' }), fc.string(), fc.json()), async (body) => {
        for (const p of [MODELS, FIELDS]) {
          const res = await post(p, body);
          if (res.status === 201) {
            await (p === MODELS ? checkModelCreated(res, JSON.parse(body)) : checkFieldCreated(res, JSON.parse(body)));
          } else {
            leakFree(res, `${p} ${JSON.stringify(body).slice(0, 200)}`);
          }
        }
      }),
      { numRuns: runs(60) },
    );
  });

  test('near-valid documents: 201 stores exactly the input, anything else is a 4xx', async () => {
    const anyJson = fc.jsonValue({ maxDepth: 2 });
    // Strings a database may refuse or alter (NUL, lone surrogates, odd whitespace) come often.
    const hostile = fc.constantFrom('a\u0000b', '\u0000', '\ud800', 'x\udfff', '\ud83d\ude00', ' padded ', '\u00a0nbsp\u2028', 'é', '\\u0000', '');
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 24 }), fc.string({ maxLength: 24 }), hostile);
    const typeOf = (own: string) =>
      fc.oneof({ weight: 8, arbitrary: fc.constant(own) }, { weight: 1, arbitrary: fc.constantFrom('data_model', 'data_model_field', 'x') });
    const modelDoc = fc.record({
      data: fc.record({
        type: typeOf('data_model'),
        attributes: fc.record(
          {
            name: fc.oneof({ weight: 4, arbitrary: text }, { weight: 1, arbitrary: anyJson }),
            slug: fc.oneof({ weight: 4, arbitrary: fc.stringMatching(/^[a-z0-9-]{1,12}$/) }, { weight: 1, arbitrary: text }, { weight: 1, arbitrary: anyJson }),
            description: fc.oneof(fc.constant(null), text, anyJson),
            organization_id: fc.oneof(fc.constant(null), fc.constant(tenant.organizationId), fc.uuid(), anyJson),
            retention_days: fc.oneof(fc.constant(null), fc.integer({ min: -2, max: 40_000 }), fc.double(), anyJson),
          },
          { requiredKeys: [] },
        ),
      }),
    });
    const fieldDoc = fc.record({
      data: fc.record({
        type: typeOf('data_model_field'),
        attributes: fc.record(
          {
            data_model_id: fc.oneof(
              { weight: 6, arbitrary: fc.constantFrom(modelId, modelId.toUpperCase()) },
              { weight: 1, arbitrary: fc.uuid() },
              { weight: 1, arbitrary: anyJson },
            ),
            name: fc.oneof(
              { weight: 4, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/) },
              { weight: 1, arbitrary: text },
              { weight: 1, arbitrary: anyJson },
            ),
            label: fc.oneof(fc.constant(null), text, anyJson),
            description: fc.oneof(fc.constant(null), text, anyJson),
            type: fc.oneof(fc.constantFrom(null, 'text', ...FIELD_TYPES), anyJson),
            is_primary_key: fc.oneof(
              { weight: 1, arbitrary: fc.constant(true) },
              { weight: 4, arbitrary: fc.constantFrom(false, null) },
              { weight: 1, arbitrary: anyJson },
            ),
            is_required: fc.oneof(fc.boolean(), fc.constant(null), anyJson),
            constraints: fc.oneof(
              fc.constant(null),
              fc.dictionary(fc.oneof(fc.string({ unit: 'binary', maxLength: 8 }), hostile), fc.oneof(fc.jsonValue({ maxDepth: 3 }), hostile)),
              anyJson,
            ),
          },
          { requiredKeys: [] },
        ),
      }),
    });
    let created = 0;
    await fc.assert(
      fc.asyncProperty(modelDoc, fieldDoc, async (m, f) => {
        const mr = await post(MODELS, JSON.stringify(m));
        if (mr.status === 201) {
          created++;
          await checkModelCreated(mr, m);
        } else leakFree(mr, `model ${JSON.stringify(m).slice(0, 200)}`);
        const fr = await post(FIELDS, JSON.stringify(f));
        if (fr.status === 201) {
          created++;
          await checkFieldCreated(fr, f);
        } else leakFree(fr, `field ${JSON.stringify(f).slice(0, 200)}`);
      }),
      { numRuns: runs(60) },
    );
    // The generators are tuned to reach the success path too, or the 201 branch checks nothing.
    assert.ok(created > 0, 'no near-valid document was ever accepted');
  });
});

describe('nothing was written', () => {
  test('exactly the resources of the valid requests exist, and the PATCH targets are unchanged', async () => {
    const models = await modelRows();
    const fields = await fieldRows();
    assert.deepEqual(new Set(models.map((r) => r.id)), createdModels);
    assert.deepEqual(new Set(fields.map((r) => r.id)), createdFields);
    assert.equal(models.length, createdModels.size);
    assert.equal(fields.length, createdFields.size);
    assert.deepEqual(
      models.find((r) => r.id === modelId),
      modelBefore,
    );
    assert.deepEqual(
      fields.find((r) => r.id === fieldId),
      fieldBefore,
    );
    // The API shows the same.
    const list = await api.get(`${MODELS}?page[count]=true&page[limit]=250`);
    assert.equal(list.status, 200);
    assert.equal(list.body.meta.page.total, createdModels.size);
    const flist = await api.get(`${FIELDS}?page[count]=true&page[limit]=1`);
    assert.equal(flist.body.meta.page.total, createdFields.size);
  });
});

describe('a body above BODY_LIMIT_BYTES', () => {
  let small: TestApp;
  let smallTenant: Tenant;
  let sapi: Api;
  let mId: string;
  let fId: string;
  before(async () => {
    small = await startApp({ BODY_LIMIT_BYTES: '65536', RATE_LIMIT_MAX: '1000000' });
    smallTenant = await seedTenant(small.deps);
    sapi = jsonApi(small, await tokenFor(small, smallTenant));
    const m = await sapi.post(MODELS, dataModelDoc({ name: 'Small', slug: 'small' }));
    assert.equal(m.status, 201, m.text);
    mId = m.body.data.id;
    const f = await sapi.post(FIELDS, { data: { type: 'data_model_field', attributes: { data_model_id: mId, name: 'f' } } });
    assert.equal(f.status, 201, f.text);
    fId = f.body.data.id;
  });
  after(async () => {
    await small?.close();
  });

  test('70 KB is 413 payload_too_large on every write; 60 KB is read and judged', async () => {
    const cases = [
      { method: 'POST', path: MODELS, doc: (d: string) => dataModelDoc({ name: 'Big', slug: 'big', description: d }) },
      { method: 'PATCH', path: `${MODELS}/${mId}`, doc: (d: string) => ({ data: { type: 'data_model', id: mId, attributes: { description: d } } }) },
      {
        method: 'POST',
        path: FIELDS,
        doc: (d: string) => ({ data: { type: 'data_model_field', attributes: { data_model_id: mId, name: 'big', description: d } } }),
      },
      { method: 'PATCH', path: `${FIELDS}/${fId}`, doc: (d: string) => ({ data: { type: 'data_model_field', id: fId, attributes: { description: d } } }) },
    ];
    for (const c of cases) {
      const big = JSON.stringify(c.doc('x'.repeat(70 * 1024)));
      assert.ok(Buffer.byteLength(big) > 65_536);
      assertError(await sapi.request(c.method, c.path, big), 413, 'payload_too_large', `${c.method} ${c.path} 70 KB`);
      // The limit counts bytes, not characters: 34,000 "é" are 68,000 bytes.
      const wide = JSON.stringify(c.doc('é'.repeat(34_000)));
      assert.ok(wide.length < 65_536 && Buffer.byteLength(wide) > 65_536);
      assertError(await sapi.request(c.method, c.path, wide), 413, 'payload_too_large', `${c.method} ${c.path} 68 KB of two-byte characters`);
      // Under the limit the body is parsed, and the too-long description is a validation error.
      const under = JSON.stringify(c.doc('x'.repeat(60 * 1024)));
      assertError(await sapi.request(c.method, c.path, under), 422, 'invalid_request', `${c.method} ${c.path} 60 KB`, '/data/attributes/description');
    }
    const models = await small.deps.db.selectFrom('data_models').selectAll().where('workspace_id', '=', smallTenant.workspaceId).execute();
    const fields = await small.deps.db.selectFrom('data_model_fields').selectAll().where('workspace_id', '=', smallTenant.workspaceId).execute();
    assert.deepEqual(
      models.map((r) => [r.id, r.description]),
      [[mId, null]],
    );
    assert.deepEqual(
      fields.map((r) => [r.id, r.description]),
      [[fId, null]],
    );
  });
});
