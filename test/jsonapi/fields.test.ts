/** Data model fields over JSON:API: auth openers, naming rules, defaults, primary keys, updates, include and filter. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CompiledQuery, sql } from 'kysely';
import { fieldIndexNames } from '../../src/facts/field-index.sql.ts';
import { loadModels } from '../../src/facts/models.sql.ts';
import { writeFacts } from '../../src/facts/write.ts';
import { planFactQuery } from '../../src/facts/query/plan.ts';
import { countSql } from '../../src/facts/query/page.sql.ts';
import { checkArguments } from '../../src/graphql/fact-query.ts';
import { dataModelDoc, jsonApi, seedAccount, seedTenant, tokenFor, type ApiResponse, assertJsonApiError, appWithTenant } from '../helpers/app.ts';

const P = '/api/json/v1';
const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

type Api = ReturnType<typeof jsonApi>;

const { t, tenant, api } = await appWithTenant();
let slugSeq = 0;

const assertError = assertJsonApiError;

const ids = (res: ApiResponse): string[] => res.body.data.map((r: { id: string }) => r.id);
const fieldDoc = (attributes: Record<string, unknown>) => ({ data: { type: 'data_model_field', attributes } });
const patchDoc = (id: string, attributes: Record<string, unknown>) => ({ data: { type: 'data_model_field', id, attributes } });

async function model(a: Api = api): Promise<string> {
  const res = await a.post(`${P}/data_models`, dataModelDoc({ name: 'Model', slug: `model-${++slugSeq}` }));
  assert.equal(res.status, 201, res.text);
  return res.body.data.id;
}

async function field(a: Api, attributes: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await a.post(`${P}/data_model_fields`, fieldDoc(attributes));
  assert.equal(res.status, 201, res.text);
  return res.body.data;
}

/** The fields of a model, by name: what is stored. */
async function namesOf(dataModelId: string): Promise<string[]> {
  const res = await api.get(`${P}/data_model_fields?filter[data_model_id]=${dataModelId}&sort=name`);
  assert.equal(res.status, 200, res.text);
  return res.body.data.map((r: any) => r.attributes.name);
}

describe('auth openers', () => {
  test('401 without a token, on every verb', async () => {
    const dm = await model();
    const f = await field(api, { data_model_id: dm, name: 'a' });
    const anon = jsonApi(t, undefined);
    for (const res of [
      await anon.get(`${P}/data_model_fields`),
      await anon.get(`${P}/data_model_fields/${f.id}`),
      await anon.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'b' })),
      await anon.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { label: 'x' })),
    ]) {
      assertError(res, 401, 'unauthorized');
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
    }
    assert.deepEqual(await namesOf(dm), ['a']);
  });

  test('403 without api_write for POST and PATCH, without api_read for GET', async () => {
    const dm = await model();
    const f = await field(api, { data_model_id: dm, name: 'a' });
    const readOnly = jsonApi(t, await tokenFor(t, tenant, 'api_read'));
    assertError(await readOnly.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'b' })), 403, 'forbidden');
    assertError(await readOnly.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { label: 'x' })), 403, 'forbidden');
    assert.equal((await readOnly.get(`${P}/data_model_fields/${f.id}`)).status, 200);
    const writeOnly = jsonApi(t, await tokenFor(t, tenant, 'api_write'));
    assertError(await writeOnly.get(`${P}/data_model_fields`), 403, 'forbidden');
    assertError(await writeOnly.get(`${P}/data_model_fields/${f.id}`), 403, 'forbidden');
    assert.deepEqual(await namesOf(dm), ['a']);
    assert.equal((await api.get(`${P}/data_model_fields/${f.id}`)).body.data.attributes.label, 'a');
  });

  test("another tenant's field is 404 for GET and PATCH; its model cannot take fields from here", async () => {
    const other = await seedTenant(t.deps);
    const otherApi = jsonApi(t, await tokenFor(t, other));
    const theirModel = await model(otherApi);
    const theirs = await field(otherApi, { data_model_id: theirModel, name: 'secret' });
    const get = await api.get(`${P}/data_model_fields/${theirs.id}`);
    assertError(get, 404, 'not_found');
    assert.equal(get.body.errors[0].detail, (await api.get(`${P}/data_model_fields/${randomUUID()}`)).body.errors[0].detail);
    assertError(await api.patch(`${P}/data_model_fields/${theirs.id}`, patchDoc(theirs.id, { label: 'mine' })), 404, 'not_found');
    assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: theirModel, name: 'intruder' })), 422, 'invalid_request', {
      pointer: '/data/attributes/data_model_id',
    });
    const still = await otherApi.get(`${P}/data_model_fields?filter[data_model_id]=${theirModel}`);
    assert.deepEqual(
      still.body.data.map((r: any) => [r.attributes.name, r.attributes.label]),
      [['secret', 'secret']],
    );
  });
});

describe('create', () => {
  test('201 with Location, defaults, label defaulting to the name', async () => {
    const dm = await model();
    const res = await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'order_id' }));
    assert.equal(res.status, 201, res.text);
    const data = res.body.data;
    assert.match(data.id, UUID_V7);
    assert.equal(data.type, 'data_model_field');
    assert.equal(res.headers.get('location'), `${P}/data_model_fields/${data.id}`);
    const { inserted_at, updated_at, ...attrs } = data.attributes;
    assert.deepEqual(attrs, {
      data_model_id: dm,
      name: 'order_id',
      label: 'order_id',
      description: null,
      type: null,
      is_primary_key: false,
      is_required: false,
      is_indexed: false,
      constraints: null,
    });
    assert.match(inserted_at, ISO_Z);
    assert.match(updated_at, ISO_Z);
    assert.deepEqual(data.relationships, { data_model: { data: { type: 'data_model', id: dm } } });
    assert.deepEqual((await api.get(res.headers.get('location')!)).body.data, data);

    const full = await field(api, {
      data_model_id: dm,
      name: 'total',
      label: 'Order total',
      description: 'Gross',
      type: 'float',
      is_primary_key: false,
      is_required: true,
      constraints: { min: 0, max: 1e6, regex: '^[0-9]+$', nested: { past_only: true, list: [1, 'two', null] } },
    });
    const { inserted_at: _i, updated_at: _u, ...fullAttrs } = full.attributes;
    assert.deepEqual(fullAttrs, {
      data_model_id: dm,
      name: 'total',
      label: 'Order total',
      description: 'Gross',
      type: 'float',
      is_primary_key: false,
      is_required: true,
      is_indexed: false,
      constraints: { min: 0, max: 1e6, regex: '^[0-9]+$', nested: { past_only: true, list: [1, 'two', null] } },
    });
    // Explicit nulls take the defaults as well.
    const nulls = await field(api, {
      data_model_id: dm,
      name: 'nulls',
      label: null,
      type: null,
      is_primary_key: null,
      is_required: null,
      constraints: null,
      description: null,
    });
    assert.equal(nulls.attributes.label, 'nulls');
    assert.equal(nulls.attributes.is_primary_key, false);
    assert.equal(nulls.attributes.is_required, false);
    // An uppercase model id names the same model.
    const upper = await field(api, { data_model_id: dm.toUpperCase(), name: 'upper' });
    assert.equal(upper.attributes.data_model_id, dm);
  });

  test('name rules: 422 at /data/attributes/name', async () => {
    const dm = await model();
    for (const name of ['Name', '1a', 'a-b', '_a', 'a b', ' a', 'a.b', 'é', '', 'a'.repeat(64), 7, null]) {
      assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name })), 422, 'invalid_request', {
        pointer: '/data/attributes/name',
      });
    }
    assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm })), 422, 'invalid_request', { pointer: '/data/attributes/name' });
    assert.deepEqual(await namesOf(dm), []);
    for (const name of ['a', 'a1', 'a_b', 'snake_case_2', 'z'.repeat(63)]) await field(api, { data_model_id: dm, name });
    assert.equal((await namesOf(dm)).length, 5);
  });

  test('type must be one of the enum', async () => {
    const dm = await model();
    for (const type of ['text', 'String', 'int', 'decimal', '', 1, true, {}]) {
      assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'f', type })), 422, 'invalid_request', {
        pointer: '/data/attributes/type',
      });
    }
    for (const type of ['string', 'integer', 'boolean', 'datetime', 'float', 'map']) {
      const f = await field(api, { data_model_id: dm, name: `f_${type}`, type });
      assert.equal(f.attributes.type, type);
    }
  });

  test('other attributes are type-checked and internal ones refused', async () => {
    const dm = await model();
    const cases: [Record<string, unknown>, string][] = [
      [{ is_primary_key: 'true' }, 'is_primary_key'],
      [{ is_required: 1 }, 'is_required'],
      [{ constraints: [1, 2] }, 'constraints'],
      [{ constraints: 'max_length=3' }, 'constraints'],
      [{ label: 5 }, 'label'],
      [{ workspace_id: tenant.workspaceId }, 'workspace_id'],
      [{ organization_id: tenant.organizationId }, 'organization_id'],
    ];
    for (const [extra, attr] of cases) {
      assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'f', ...extra })), 422, 'invalid_request', {
        pointer: `/data/attributes/${attr}`,
      });
    }
    assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ name: 'f' })), 422, 'invalid_request', { pointer: '/data/attributes/data_model_id' });
    assertError(
      await api.post(`${P}/data_model_fields`, { data: { type: 'data_model', attributes: { data_model_id: dm, name: 'f' } } }),
      409,
      'type_mismatch',
      { pointer: '/data/type' },
    );
    assertError(
      await api.post(`${P}/data_model_fields`, {
        data: {
          type: 'data_model_field',
          attributes: { data_model_id: dm, name: 'f' },
          relationships: { data_model: { data: { type: 'data_model', id: randomUUID() } } },
        },
      }),
      422,
      'invalid_request',
      { pointer: '/data/relationships/data_model' },
    );
    assert.deepEqual(await namesOf(dm), []);
  });

  test('at most one primary key per model', async () => {
    const dm = await model();
    const pk = await field(api, { data_model_id: dm, name: 'id', is_primary_key: true });
    assert.equal(pk.attributes.is_primary_key, true);
    assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'other_id', is_primary_key: true })), 422, 'invalid_request', {
      pointer: '/data/attributes/is_primary_key',
    });
    assert.deepEqual(await namesOf(dm), ['id']);
    // Non-key fields are fine, and so is a key in another model.
    const plain = await field(api, { data_model_id: dm, name: 'other_id', is_primary_key: false });
    await field(api, { data_model_id: await model(), name: 'id', is_primary_key: true });
    // Turning a second field into the key by PATCH is refused the same way.
    assertError(await api.patch(`${P}/data_model_fields/${plain.id}`, patchDoc(plain.id, { is_primary_key: true })), 422, 'invalid_request', {
      pointer: '/data/attributes/is_primary_key',
    });
    // Moving the key: unset first, then set elsewhere.
    const unset = await api.patch(`${P}/data_model_fields/${pk.id}`, patchDoc(pk.id, { is_primary_key: false }));
    assert.equal(unset.status, 200, unset.text);
    const moved = await api.patch(`${P}/data_model_fields/${plain.id}`, patchDoc(plain.id, { is_primary_key: true }));
    assert.equal(moved.status, 200, moved.text);
    assert.equal(moved.body.data.attributes.is_primary_key, true);
  });

  test('names are unique within a model, not across models', async () => {
    const dm = await model();
    await field(api, { data_model_id: dm, name: 'email' });
    assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'email', label: 'Another' })), 422, 'invalid_request', {
      pointer: '/data/attributes/name',
    });
    const dm2 = await model();
    const same = await field(api, { data_model_id: dm2, name: 'email' });
    assert.equal(same.attributes.data_model_id, dm2);
    assert.deepEqual(await namesOf(dm), ['email']);
    assert.deepEqual(await namesOf(dm2), ['email']);
    // Renaming onto a taken name is refused too.
    const other = await field(api, { data_model_id: dm, name: 'phone' });
    assertError(await api.patch(`${P}/data_model_fields/${other.id}`, patchDoc(other.id, { name: 'email' })), 422, 'invalid_request', {
      pointer: '/data/attributes/name',
    });
  });

  test('a run-as member can create fields', async () => {
    const member = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, tenant, { role: 'member' })));
    const dm = await model(member);
    await field(member, { data_model_id: dm, name: 'by_member' });
    assert.deepEqual(await namesOf(dm), ['by_member']);
  });
});

describe('update', () => {
  test('PATCH changes label and type, moves updated_at, keeps the rest', async () => {
    const dm = await model();
    const f = await field(api, { data_model_id: dm, name: 'amount', type: 'integer', constraints: { min: 0 }, is_required: true });
    await new Promise((r) => setTimeout(r, 20));
    const res = await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { label: 'Amount (EUR)', type: 'float' }));
    assert.equal(res.status, 200, res.text);
    const { updated_at, ...attrs } = res.body.data.attributes;
    const { updated_at: before, ...was } = f.attributes;
    assert.deepEqual(attrs, { ...was, label: 'Amount (EUR)', type: 'float' });
    assert.ok(Date.parse(updated_at) > Date.parse(before));
    assert.deepEqual((await api.get(`${P}/data_model_fields/${f.id}`)).body.data, res.body.data);

    const constraints = await api.patch(
      `${P}/data_model_fields/${f.id}`,
      patchDoc(f.id, { constraints: { max: 10, future_only: false }, type: null, description: 'd' }),
    );
    assert.equal(constraints.status, 200, constraints.text);
    assert.deepEqual(constraints.body.data.attributes.constraints, { max: 10, future_only: false });
    assert.equal(constraints.body.data.attributes.type, null);
    assert.equal(constraints.body.data.attributes.description, 'd');
    const cleared = await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { constraints: null, label: null }));
    assert.equal(cleared.body.data.attributes.constraints, null);
    assert.equal(cleared.body.data.attributes.label, 'amount', 'a null label falls back to the name');

    assertError(await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { type: 'money' })), 422, 'invalid_request', {
      pointer: '/data/attributes/type',
    });
    assertError(await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { name: 'Amount' })), 422, 'invalid_request', {
      pointer: '/data/attributes/name',
    });
    assertError(await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(randomUUID(), { label: 'x' })), 409, 'conflict', { pointer: '/data/id' });
  });

  test('moving a field to another data model is 422; naming its own model is fine', async () => {
    const dm = await model();
    const dm2 = await model();
    const f = await field(api, { data_model_id: dm, name: 'mover' });
    assertError(await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { data_model_id: dm2 })), 422, 'invalid_request', {
      pointer: '/data/attributes/data_model_id',
    });
    assertError(await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { data_model_id: randomUUID() })), 422, 'invalid_request', {
      pointer: '/data/attributes/data_model_id',
    });
    assert.deepEqual(await namesOf(dm), ['mover']);
    assert.deepEqual(await namesOf(dm2), []);
    const same = await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { data_model_id: dm, label: 'Mover' }));
    assert.equal(same.status, 200, same.text);
    assert.equal(same.body.data.attributes.data_model_id, dm);
    assert.equal(same.body.data.attributes.label, 'Mover');
  });

  test('the type of a field whose data model has facts cannot change: 409 conflict saying why', async () => {
    const slug = `typed-${++slugSeq}`;
    const res = await api.post(`${P}/data_models`, dataModelDoc({ name: 'Typed', slug }));
    const dm = res.body.data.id as string;
    const amount = await field(api, { data_model_id: dm, name: 'amount', type: 'integer' });
    const note = await field(api, { data_model_id: dm, name: 'note' });
    // Before any fact, a type is free to change.
    const early = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { type: 'float' }));
    assert.equal(early.status, 200, early.text);
    const imported = await fetch(`${t.url}/admin/v1/facts/import?${new URLSearchParams({ workspace_id: tenant.workspaceId, data_model: slug })}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/x-ndjson' },
      body: '{"observed_at": "2026-01-01T00:00:00Z", "data": {"amount": 5}}\n',
    });
    assert.equal(imported.status, 200, await imported.text());

    for (const [f, type] of [
      [amount, 'string'],
      [amount, null],
      [note, 'integer'],
    ] as const) {
      const refused = await api.patch(`${P}/data_model_fields/${f.id}`, patchDoc(f.id, { type }));
      assertError(refused, 409, 'conflict', { pointer: '/data/attributes/type' });
      assert.match(refused.body.errors[0].detail, /already has facts/);
      assert.match(refused.body.errors[0].detail, /new field/);
    }
    const stored = await api.get(`${P}/data_model_fields/${amount.id}`);
    assert.equal(stored.body.data.attributes.type, 'float');
    // The same type again, and everything else, still change.
    const same = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { type: 'float', label: 'Amount (EUR)' }));
    assert.equal(same.status, 200, same.text);
    assert.equal(same.body.data.attributes.label, 'Amount (EUR)');
  });
});

describe('reads', () => {
  test('include=data_model gives the owning model with full linkage', async () => {
    const dm = await model();
    const f1 = await field(api, { data_model_id: dm, name: 'one' });
    const f2 = await field(api, { data_model_id: dm, name: 'two' });
    const one = await api.get(`${P}/data_model_fields/${f1.id}?include=data_model`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body.data.relationships.data_model, { data: { type: 'data_model', id: dm } });
    assert.equal(one.body.included.length, 1);
    assert.equal(one.body.included[0].type, 'data_model');
    assert.equal(one.body.included[0].id, dm);
    assert.equal(one.body.included[0].attributes.slug, `model-${slugSeq}`);

    const list = await api.get(`${P}/data_model_fields?filter[data_model_id]=${dm}&include=data_model`);
    assert.deepEqual(new Set(ids(list)), new Set([f1.id, f2.id]));
    assert.equal(list.body.included.length, 1, 'a related resource is included once');
    for (const r of list.body.data) assert.deepEqual(r.relationships.data_model, { data: { type: 'data_model', id: dm } });

    const deep = await api.get(`${P}/data_model_fields/${f1.id}?include=data_model.fields`);
    assert.equal(deep.status, 200, deep.text);
    const includedIds = new Set(deep.body.included.map((r: any) => `${r.type}:${r.id}`));
    assert.deepEqual(includedIds, new Set([`data_model:${dm}`, `data_model_field:${f2.id}`]), 'the primary resource is not repeated in included');
    const model_ = deep.body.included.find((r: any) => r.type === 'data_model');
    assert.deepEqual(new Set(model_.relationships.fields.data.map((l: any) => l.id)), new Set([f1.id, f2.id]));
    assertError(await api.get(`${P}/data_model_fields?include=model`), 400, 'invalid_query', { parameter: 'include' });
  });

  test('filter[data_model_id] lists the fields of one model', async () => {
    const dm = await model();
    const dm2 = await model();
    const a = await field(api, { data_model_id: dm, name: 'a', type: 'string' });
    const b = await field(api, { data_model_id: dm, name: 'b', is_primary_key: true });
    const c = await field(api, { data_model_id: dm2, name: 'c' });
    const res = await api.get(`${P}/data_model_fields?filter[data_model_id]=${dm}&page[count]=true`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(new Set(ids(res)), new Set([a.id, b.id]));
    assert.equal(res.body.meta.page.total, 2);
    assert.deepEqual(ids(await api.get(`${P}/data_model_fields?filter[data_model_id]=${dm2}`)), [c.id]);
    assert.deepEqual(ids(await api.get(`${P}/data_model_fields?filter[data_model_id]=${dm.toUpperCase()}&filter[is_primary_key]=true`)), [b.id]);
    assert.deepEqual(
      new Set(ids(await api.get(`${P}/data_model_fields?filter[data_model_id][in]=${dm},${dm2}&filter[type][is_null]=true`))),
      new Set([b.id, c.id]),
    );
    assert.deepEqual(ids(await api.get(`${P}/data_model_fields?filter[data_model_id]=${randomUUID()}`)), []);
    assertError(await api.get(`${P}/data_model_fields?filter[data_model_id]=nope`), 400, 'invalid_query', { parameter: 'filter[data_model_id]' });
    assertError(await api.get(`${P}/data_model_fields?filter[constraints]=x`), 400, 'invalid_query', { parameter: 'filter[constraints]' });
    assertError(await api.get(`${P}/data_model_fields?filter[workspace_id]=${tenant.workspaceId}`), 400, 'invalid_query', {
      parameter: 'filter[workspace_id]',
    });
    assertError(await api.get(`${P}/data_model_fields?filter[type]=money`), 400, 'invalid_query', { parameter: 'filter[type]' });
  });
});

describe('is_indexed', () => {
  const indexesOf = async (fieldId: string) => {
    const { rows } = await sql<{ indexname: string; indexdef: string }>`select indexname, indexdef from pg_indexes
      where indexname = any(${fieldIndexNames(fieldId)}::text[]) order by indexname`.execute(t.deps.db);
    return rows;
  };

  test('builds an index per partition of fact_current that the count of a filter on the field uses; off or renamed, it follows', async () => {
    const dm = await model();
    await field(api, { data_model_id: dm, name: 'k', type: 'string', is_primary_key: true });
    const amount = await field(api, { data_model_id: dm, name: 'amount', type: 'integer', is_indexed: true });
    assert.equal(amount.attributes.is_indexed, true);
    const built = await indexesOf(amount.id);
    assert.deepEqual(
      built.map((i) => i.indexname),
      fieldIndexNames(amount.id).sort(),
    );
    // Keyed by the field's typed slot (slots.sql.ts), which the writer filled from `amount`.
    for (const i of built) assert.match(i.indexdef, /\(num_\d, observed_at, fact_id\)/);
    const plain = await field(api, { data_model_id: dm, name: 'note', type: 'string' });
    assert.equal(plain.attributes.is_indexed, false);
    assert.deepEqual(await indexesOf(plain.id), []);

    // The filter SQL is the index's expression: with sequential scans priced out, the count reads the index.
    const models = await loadModels(t.deps.db, tenant.workspaceId, [(await api.get(`${P}/data_models/${dm}`)).body.data.attributes.slug]);
    const m = [...models.values()][0]!;
    await writeFacts(t.deps.db, tenant, { id: m.id, fields: m.fields }, [
      { observed_at: '2026-01-01T00:00:00Z', data: { k: 'a', amount: 5 } },
      { observed_at: '2026-01-01T00:00:00Z', data: { k: 'b', amount: 50 } },
    ]);
    const p = await planFactQuery(
      t.deps.db,
      tenant.workspaceId,
      checkArguments({ dataModelSlug: m.slug, filters: '[{"field":"amount","op":"gte","value":10}]' }, new Date()),
    );
    assert.equal(p.filters[0]!.indexed, true);
    const count = countSql(p).compile(t.deps.db);
    const plan = await t.deps.db.transaction().execute(async (trx) => {
      await sql`set local enable_seqscan = off`.execute(trx);
      const r = await trx.executeQuery<Record<string, string>>(CompiledQuery.raw(`explain ${count.sql}`, [...count.parameters]));
      return r.rows.map((x) => Object.values(x)[0]).join('\n');
    });
    assert.match(plan, new RegExp(fieldIndexNames(amount.id)[0]!));
    const n = await t.deps.db.executeQuery<{ n: number }>(count);
    assert.equal(n.rows[0]!.n, 1);

    const renamed = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { name: 'total' }));
    assert.equal(renamed.status, 200, renamed.text);
    // The slot now holds `total`, which these facts lack: the filter matches none of them.
    assert.equal((await indexesOf(amount.id)).length, 2);
    const after = await planFactQuery(
      t.deps.db,
      tenant.workspaceId,
      checkArguments({ dataModelSlug: m.slug, filters: '[{"field":"total","op":"gte","value":10}]' }, new Date()),
    );
    assert.equal((await t.deps.db.executeQuery<{ n: number }>(countSql(after).compile(t.deps.db))).rows[0]!.n, 0);
    const off = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { is_indexed: false }));
    assert.equal(off.status, 200, off.text);
    assert.equal(off.body.data.attributes.is_indexed, false);
    assert.deepEqual(await indexesOf(amount.id), []);
    const on = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { is_indexed: true }));
    assert.equal(on.status, 200, on.text);
    assert.equal((await indexesOf(amount.id)).length, 2);
    // A build that failed midway (here: one partition's index gone) is redone by setting it again.
    await sql`drop index ${sql.id(fieldIndexNames(amount.id)[0]!)}`.execute(t.deps.db);
    const again = await api.patch(`${P}/data_model_fields/${amount.id}`, patchDoc(amount.id, { is_indexed: true }));
    assert.equal(again.status, 200, again.text);
    assert.equal((await indexesOf(amount.id)).length, 2);
  });

  test('422 on a type without typed storage, on create and on update', async () => {
    const dm = await model();
    for (const type of ['map', null]) {
      assertError(await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'f', type, is_indexed: true })), 422, 'invalid_request', {
        pointer: '/data/attributes/is_indexed',
      });
    }
    const when = await field(api, { data_model_id: dm, name: 'when', type: 'map' });
    assertError(await api.patch(`${P}/data_model_fields/${when.id}`, patchDoc(when.id, { is_indexed: true })), 422, 'invalid_request', {
      pointer: '/data/attributes/is_indexed',
    });
    const n = await field(api, { data_model_id: dm, name: 'n', type: 'integer', is_indexed: true });
    assertError(await api.patch(`${P}/data_model_fields/${n.id}`, patchDoc(n.id, { type: 'map' })), 422, 'invalid_request', {
      pointer: '/data/attributes/is_indexed',
    });
    assertError(
      await api.post(`${P}/data_model_fields`, fieldDoc({ data_model_id: dm, name: 'g', type: 'integer', is_indexed: 'yes' })),
      422,
      'invalid_request',
      {
        pointer: '/data/attributes/is_indexed',
      },
    );
  });
});
