import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { ENGINE, seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { writeFacts, type FactScope, type WriteResult } from '../../src/facts/write.ts';
import { createModel, factCount, recomputedCurrent, sleep, storedCurrent, type TestModel } from './helpers.ts';

let t: TestApp;
let tenant: Tenant;
let scope: FactScope;
let model: TestModel;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  scope = { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId };
  model = await createModel(t.deps.db, tenant, [
    { name: 'id', type: 'string', is_primary_key: true, is_required: true },
    { name: 'amount', type: 'integer', is_required: true },
    { name: 'price', type: 'float' },
    { name: 'active', type: 'boolean' },
    { name: 'at', type: 'datetime' },
    { name: 'meta', type: 'map' },
    { name: 'anything', type: null },
    { name: 'constructor', type: 'string' },
  ]);
});
after(async () => {
  await t.close();
});

const T0 = '2025-03-01T12:00:00.000Z';
let seq = 0;
const ok = (extra: Record<string, unknown> = {}) => ({ observed_at: T0, data: { id: `e-${++seq}`, amount: 1, ...extra } });

async function rejectionOf(item: unknown): Promise<Array<{ pointer: string; detail: string }>> {
  const r = await writeFacts(t.deps.db, scope, model, [item as never]);
  assert.equal(r.written, 0, 'an invalid item is not written');
  assert.deepEqual(r.ids, [null]);
  assert.ok(r.errors.every((e) => e.index === 0));
  return r.errors.map(({ pointer, detail }) => ({ pointer, detail }));
}

async function assertCurrentConsistent(dataModelId: string): Promise<void> {
  assert.deepEqual(await storedCurrent(t.deps.db, dataModelId), await recomputedCurrent(t.deps.db, dataModelId));
}

async function currentOf(dataModelId: string, axis: string, entityKey: string) {
  return (await storedCurrent(t.deps.db, dataModelId)).find((r) => r.axis === axis && r.entity_key === entityKey);
}

describe('validation', () => {
  test('an item must be an object', async () => {
    for (const item of [null, 'x', 3, [ok()]]) {
      assert.deepEqual(await rejectionOf(item), [{ pointer: '', detail: 'must be an object with observed_at and data' }]);
    }
  });

  test('observed_at is required and must be an ISO 8601 date-time with an offset', async () => {
    assert.deepEqual(await rejectionOf({ data: { id: 'x', amount: 1 } }), [{ pointer: '/observed_at', detail: 'is required' }]);
    for (const bad of [
      '2025-03-01',
      '2025-03-01T12:00:00',
      '2025-02-30T00:00:00Z',
      '2025-03-01T24:00:00Z',
      '2025-03-01T12:00:00+25:00',
      'yesterday',
      1740830400000,
      true,
    ]) {
      assert.deepEqual(
        await rejectionOf({ observed_at: bad, data: { id: 'x', amount: 1 } }),
        [{ pointer: '/observed_at', detail: 'must be an ISO 8601 date-time with Z or a UTC offset' }],
        String(bad),
      );
    }
  });

  test('observed_at with an offset is stored in UTC', async () => {
    const r = await writeFacts(t.deps.db, scope, model, [{ observed_at: '2025-03-01T14:30:00.1234+02:30', data: { id: 'utc-1', amount: 1 } }]);
    assert.equal(r.written, 1);
    const row = await t.deps.db.selectFrom('facts').select('observed_at').where('id', '=', r.ids[0]!).executeTakeFirstOrThrow();
    assert.equal(row.observed_at.toISOString(), '2025-03-01T12:00:00.123Z');
  });

  test('data is required and must be an object', async () => {
    assert.deepEqual(await rejectionOf({ observed_at: T0 }), [{ pointer: '/data', detail: 'is required' }]);
    assert.deepEqual(await rejectionOf({ observed_at: T0, data: [1] }), [{ pointer: '/data', detail: 'must be a JSON object' }]);
    assert.deepEqual(await rejectionOf({ observed_at: T0, data: 'x' }), [{ pointer: '/data', detail: 'must be a JSON object' }]);
  });

  test('required fields must be present and non-null', async () => {
    assert.deepEqual(await rejectionOf({ observed_at: T0, data: { id: 'x' } }), [{ pointer: '/data/amount', detail: 'is required' }]);
    assert.deepEqual(await rejectionOf({ observed_at: T0, data: { id: 'x', amount: null } }), [{ pointer: '/data/amount', detail: 'is required' }]);
  });

  test('optional fields may be absent or null', async () => {
    const r = await writeFacts(t.deps.db, scope, model, [ok({ price: null, meta: null })]);
    assert.equal(r.written, 1);
  });

  test('each value must be of its field type', async () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ amount: 1.5 }, '/data/amount', 'must be a whole number between -9007199254740991 and 9007199254740991'],
      [{ amount: '1' }, '/data/amount', 'must be a whole number between -9007199254740991 and 9007199254740991'],
      [{ amount: 2 ** 53 }, '/data/amount', 'must be a whole number between -9007199254740991 and 9007199254740991'],
      [{ price: '1.5' }, '/data/price', 'must be a finite number'],
      [{ price: Infinity }, '/data/price', 'must be a finite number'],
      [{ price: NaN }, '/data/price', 'must be a finite number'],
      [{ active: 'true' }, '/data/active', 'must be true or false'],
      [{ active: 0 }, '/data/active', 'must be true or false'],
      [{ at: 'tomorrow' }, '/data/at', 'must be an ISO 8601 date-time with Z or a UTC offset'],
      [{ at: '2025-03-01T10:00:00' }, '/data/at', 'must be an ISO 8601 date-time with Z or a UTC offset'],
      [{ meta: [] }, '/data/meta', 'must be a JSON object'],
      [{ meta: 'x' }, '/data/meta', 'must be a JSON object'],
      [{ meta: { when: new Date() } }, '/data/meta/when', 'must be a JSON value'],
      [{ anything: [1, undefined] }, '/data/anything/1', 'must be a JSON value'],
      [{ anything: { n: NaN } }, '/data/anything/n', 'must be a finite number'],
      [{ id: 7 }, '/data/id', 'must be a string'],
      [{ constructor: 1 }, '/data/constructor', 'must be a string'],
      [{ id: 'a\u0000b' }, '/data/id', 'must not contain the character U+0000'],
      [{ anything: 'x\ud800' }, '/data/anything', 'must not contain unpaired UTF-16 surrogates'],
    ];
    for (const [extra, pointer, detail] of cases) {
      assert.deepEqual(await rejectionOf({ observed_at: T0, data: { id: 'x', amount: 1, ...extra } }), [{ pointer, detail }], JSON.stringify(extra));
    }
  });

  test('integers may be written in any JSON form of a whole number', async () => {
    const r = await writeFacts(t.deps.db, scope, model, [ok({ amount: 1e3 }), ok({ amount: -9007199254740991 }), ok({ amount: 2.0 })]);
    assert.equal(r.written, 3);
  });

  test('members that are not fields are rejected, with escaped pointers', async () => {
    assert.deepEqual(await rejectionOf({ observed_at: T0, data: { id: 'x', amount: 1, extra: 1, 'a/b~c': 2 } }), [
      { pointer: '/data/extra', detail: 'is not a field of the data model' },
      { pointer: '/data/a~1b~0c', detail: 'is not a field of the data model' },
    ]);
    assert.deepEqual(await rejectionOf(JSON.parse(`{"observed_at": "${T0}", "data": {"id": "x", "amount": 1, "__proto__": {"polluted": true}}}`)), [
      { pointer: '/data/__proto__', detail: 'is not a field of the data model' },
    ]);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('members of an item other than observed_at, data and source_key are rejected', async () => {
    assert.deepEqual(await rejectionOf({ ...ok(), entity_id: 'x' }), [
      { pointer: '/entity_id', detail: 'is not a member of a fact (observed_at, data, source_key)' },
    ]);
  });

  test('source_key, when given, is a string of 1 to 512 characters', async () => {
    for (const bad of [5, '', 'k'.repeat(513), {}]) {
      assert.deepEqual(await rejectionOf({ ...ok(), source_key: bad }), [{ pointer: '/source_key', detail: 'must be a string of 1 to 512 characters' }]);
    }
    const r = await writeFacts(t.deps.db, scope, model, [
      { ...ok(), source_key: 'k'.repeat(512) },
      { ...ok(), source_key: null as never },
    ]);
    assert.equal(r.written, 2);
  });

  test('every problem of an item is reported', async () => {
    assert.deepEqual(await rejectionOf({ observed_at: 'x', data: { amount: 'x', price: 'y', nope: 1 } }), [
      { pointer: '/observed_at', detail: 'must be an ISO 8601 date-time with Z or a UTC offset' },
      { pointer: '/data/nope', detail: 'is not a field of the data model' },
      { pointer: '/data/id', detail: 'is required' },
      { pointer: '/data/amount', detail: 'must be a whole number between -9007199254740991 and 9007199254740991' },
      { pointer: '/data/price', detail: 'must be a finite number' },
    ]);
  });

  test('valid items are written and invalid ones reported by index in one call', async () => {
    const items = [ok(), { observed_at: T0, data: { id: 'x' } }, ok(), { observed_at: 'bad', data: { id: 'y', amount: 1 } }];
    const r = await writeFacts(t.deps.db, scope, model, items);
    assert.equal(r.written, 2);
    assert.equal(r.duplicates, 0);
    assert.deepEqual(r.errors, [
      { index: 1, pointer: '/data/amount', detail: 'is required' },
      { index: 3, pointer: '/observed_at', detail: 'must be an ISO 8601 date-time with Z or a UTC offset' },
    ]);
    assert.equal(r.ids[1], null);
    assert.equal(r.ids[3], null);
    const stored = await t.deps.db.selectFrom('facts').select(['id', 'entity_id']).where('id', 'in', [r.ids[0]!, r.ids[2]!]).orderBy('entity_id').execute();
    assert.deepEqual(stored.map((s) => s.entity_id).sort(), [items[0]!.data.id, items[2]!.data.id].sort());
  });

  test('values are stored normalized: datetimes in UTC with Z, maps as given', async () => {
    const r = await writeFacts(t.deps.db, scope, model, [
      {
        observed_at: T0,
        data: { id: 'norm-1', amount: 5, at: '2025-01-01T01:00:00+01:00', meta: { z: 1, a: [1, { b: null }] }, anything: 'x', active: false, price: 0.5 },
      },
    ]);
    const row = await t.deps.db.selectFrom('facts').select('data').where('id', '=', r.ids[0]!).executeTakeFirstOrThrow();
    assert.deepEqual(row.data, {
      id: 'norm-1',
      amount: 5,
      at: '2025-01-01T00:00:00.000Z',
      meta: { z: 1, a: [1, { b: null }] },
      anything: 'x',
      active: false,
      price: 0.5,
    });
  });

  test('any text survives the trip to the database, in entity ids, values and member names', async () => {
    // The rows travel as arrays (one per column): array-literal syntax in the text must not leak.
    const texts = ['NULL', 'null', '', ' ', '"', '\\', '\\"', 'a,b', '{}', '{a,b}', '{"a":1}', "it's", 'line\nbreak\ttab', 'é 😀 \u2028', '\u0001'];
    const items = texts.map((text, i) => ({
      observed_at: T0,
      data: { id: `${text}#${i}`, amount: i, anything: { [text]: text, list: [text] }, constructor: text },
    }));
    const r = await writeFacts(t.deps.db, scope, model, items);
    assert.deepEqual(r.errors, []);
    assert.equal(r.written, texts.length);
    const stored = await t.deps.db
      .selectFrom('facts')
      .select(['id', 'entity_id', 'data'])
      .where('id', 'in', r.ids as string[])
      .execute();
    const byId = new Map(stored.map((row) => [row.id, row]));
    items.forEach((item, i) => {
      const row = byId.get(r.ids[i]!)!;
      assert.equal(row.entity_id, item.data.id);
      assert.deepEqual(row.data, item.data);
    });
    const current = (await storedCurrent(t.deps.db, model.id)).filter((c) => r.ids.includes(c.fact_id));
    assert.deepEqual(
      current
        .filter((c) => c.axis === 'observed_at')
        .map((c) => c.entity_key)
        .sort(),
      items.map((item) => item.data.id).sort(),
    );
  });
});

describe('entity id', () => {
  test('is the primary-key value as a string', async () => {
    const cases: Array<[FieldSpecType, unknown, string]> = [
      ['string', 'abc', 'abc'],
      ['integer', 42, '42'],
      ['float', 1.5, '1.5'],
      ['boolean', true, 'true'],
      ['datetime', '2025-01-01T02:00:00+02:00', '2025-01-01T00:00:00.000Z'],
      ['map', { b: 1, a: 2 }, '{"a":2,"b":1}'],
      [null, [1, 'x'], '[1,"x"]'],
    ];
    for (const [type, value, expected] of cases) {
      const m = await createModel(t.deps.db, tenant, [{ name: 'k', type, is_primary_key: true }]);
      const r = await writeFacts(t.deps.db, scope, m, [{ observed_at: T0, data: { k: value } }]);
      assert.equal(r.written, 1, String(type));
      const row = await t.deps.db.selectFrom('facts').select('entity_id').where('id', '=', r.ids[0]!).executeTakeFirstOrThrow();
      assert.equal(row.entity_id, expected, String(type));
    }
  });

  test('is at most 512 characters as text (a btree key): a longer one is rejected per item, the rest written', async () => {
    const m = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'note', type: 'string' },
    ]);
    const detail = 'is the primary key: at most 512 characters as text';
    const r = await writeFacts(t.deps.db, scope, m, [
      { observed_at: T0, data: { k: '€'.repeat(512), note: 'x'.repeat(100_000) } },
      { observed_at: T0, data: { k: 'k'.repeat(513) } },
      { observed_at: T0, data: { k: '😀'.repeat(257) } },
    ]);
    assert.equal(r.written, 1);
    assert.deepEqual(r.errors, [
      { index: 1, pointer: '/data/k', detail },
      { index: 2, pointer: '/data/k', detail },
    ]);
    const map = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'map', is_primary_key: true }]);
    const long = await writeFacts(t.deps.db, scope, map, [{ observed_at: T0, data: { k: { a: 'x'.repeat(600) } } }]);
    assert.deepEqual(long.errors, [{ index: 0, pointer: '/data/k', detail }]);
  });

  test('is null without a primary-key field', async () => {
    const m = await createModel(t.deps.db, tenant, [{ name: 'v', type: 'integer' }]);
    const r = await writeFacts(t.deps.db, scope, m, [{ observed_at: T0, data: { v: 1 } }]);
    const row = await t.deps.db.selectFrom('facts').select('entity_id').where('id', '=', r.ids[0]!).executeTakeFirstOrThrow();
    assert.equal(row.entity_id, null);
  });

  test('is null when a primary key that is not required is absent or null; a required one is reported', async () => {
    const optional = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'v', type: 'integer' },
    ]);
    const r = await writeFacts(t.deps.db, scope, optional, [
      { observed_at: T0, data: { v: 1 } },
      { observed_at: T0, data: { k: null, v: 2 } },
    ]);
    assert.equal(r.written, 2);
    const rows = await t.deps.db.selectFrom('facts').select('entity_id').where('data_model_id', '=', optional.id).execute();
    assert.deepEqual(
      rows.map((x) => x.entity_id),
      [null, null],
    );

    const required = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true, is_required: true }]);
    const r2 = await writeFacts(t.deps.db, scope, required, [{ observed_at: T0, data: {} }]);
    assert.deepEqual(r2.errors, [{ index: 0, pointer: '/data/k', detail: 'is required' }]);
  });
});

type FieldSpecType = TestModel['fields'][number]['type'];

describe('duplicates', () => {
  let m: TestModel;
  before(async () => {
    m = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'v', type: 'integer' },
      { name: 'at', type: 'datetime' },
    ]);
  });

  test('a source key already stored is a duplicate, not an error', async () => {
    const first = await writeFacts(t.deps.db, scope, m, [{ observed_at: T0, data: { k: 'a', v: 1 }, source_key: 'run-1/step/0' }]);
    assert.equal(first.written, 1);
    const again = await writeFacts(t.deps.db, scope, m, [{ observed_at: '2025-04-01T00:00:00Z', data: { k: 'a', v: 2 }, source_key: 'run-1/step/0' }]);
    assert.deepEqual(again, { written: 0, duplicates: 1, errors: [], ids: [null] });
    const cur = await currentOf(m.id, 'observed_at', 'a');
    assert.equal(cur?.fact_id, first.ids[0], 'the duplicate does not touch the current state');
  });

  test('a source key repeated within one call is written once', async () => {
    const r = await writeFacts(t.deps.db, scope, m, [
      { observed_at: T0, data: { k: 'b', v: 1 }, source_key: 'same' },
      { observed_at: T0, data: { k: 'b', v: 2 }, source_key: 'same' },
    ]);
    assert.equal(r.written, 1);
    assert.equal(r.duplicates, 1);
    assert.equal(r.ids.filter((x) => x !== null).length, 1);
  });

  test('without a source key, an identical retry is a duplicate (same instant, same data in any member order)', async () => {
    const r1 = await writeFacts(t.deps.db, scope, m, [{ observed_at: '2025-05-01T12:00:00Z', data: { k: 'c', v: 1, at: '2025-01-01T00:00:00Z' } }]);
    assert.equal(r1.written, 1);
    const r2 = await writeFacts(t.deps.db, scope, m, [
      { observed_at: '2025-05-01T14:00:00+02:00', data: { at: '2025-01-01T01:00:00+01:00', v: 1, k: 'c' } },
      { observed_at: '2025-05-01T12:00:00.000Z', data: { k: 'c', v: 1, at: '2025-01-01T00:00:00.000Z' } },
    ]);
    assert.deepEqual(r2, { written: 0, duplicates: 2, errors: [], ids: [null, null] });
    const r3 = await writeFacts(t.deps.db, scope, m, [{ observed_at: '2025-05-01T12:00:00Z', data: { k: 'c', v: 2, at: '2025-01-01T00:00:00Z' } }]);
    assert.equal(r3.written, 1, 'different data is a different fact');
  });

  test('source keys are unique per data model, not across models', async () => {
    const other = await createModel(t.deps.db, tenant, [{ name: 'k', type: 'string', is_primary_key: true }]);
    const r = await writeFacts(t.deps.db, scope, other, [{ observed_at: T0, data: { k: 'a' }, source_key: 'run-1/step/0' }]);
    assert.equal(r.written, 1);
  });
});

describe('current state', () => {
  let m: TestModel;
  before(async () => {
    m = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'v', type: 'integer' },
    ]);
  });
  const fact = (k: string | null, observed: string, v: number) => ({ observed_at: observed, data: k === null ? { v } : { k, v } });

  test('out-of-order observed_at keeps the true latest on both axes', async () => {
    const w3 = await writeFacts(t.deps.db, scope, m, [fact('ooo', '2025-01-03T00:00:00Z', 3)]);
    await sleep(5);
    await writeFacts(t.deps.db, scope, m, [fact('ooo', '2025-01-01T00:00:00Z', 1)]);
    await sleep(5);
    const w2 = await writeFacts(t.deps.db, scope, m, [fact('ooo', '2025-01-02T00:00:00Z', 2)]);
    assert.equal((await currentOf(m.id, 'observed_at', 'ooo'))?.fact_id, w3.ids[0]);
    assert.equal((await currentOf(m.id, 'inserted_at', 'ooo'))?.fact_id, w2.ids[0]);
    assert.equal(JSON.parse((await currentOf(m.id, 'observed_at', 'ooo'))!.data).v, 3);
    await assertCurrentConsistent(m.id);
  });

  test('one call with several facts of an entity takes the greatest on each axis', async () => {
    const r = await writeFacts(t.deps.db, scope, m, [
      fact('multi', '2025-01-02T00:00:00Z', 2),
      fact('multi', '2025-01-05T00:00:00Z', 5),
      fact('multi', '2025-01-01T00:00:00Z', 1),
    ]);
    assert.equal((await currentOf(m.id, 'observed_at', 'multi'))?.fact_id, r.ids[1]);
    // One transaction: equal inserted_at, so the greatest id wins on the inserted_at axis.
    const maxId = [...r.ids].sort().at(-1);
    assert.equal((await currentOf(m.id, 'inserted_at', 'multi'))?.fact_id, maxId);
    await assertCurrentConsistent(m.id);
  });

  test('ties: equal observed_at goes to the later inserted_at, then to the greater id', async () => {
    const first = await writeFacts(t.deps.db, scope, m, [fact('tie', '2025-02-01T00:00:00Z', 1)]);
    await sleep(5);
    const second = await writeFacts(t.deps.db, scope, m, [fact('tie', '2025-02-01T00:00:00Z', 2)]);
    assert.notEqual(first.ids[0], second.ids[0]);
    assert.equal((await currentOf(m.id, 'observed_at', 'tie'))?.fact_id, second.ids[0]);
    assert.equal((await currentOf(m.id, 'inserted_at', 'tie'))?.fact_id, second.ids[0]);

    const same = await writeFacts(t.deps.db, scope, m, [
      fact('tie2', '2025-02-01T00:00:00Z', 1),
      fact('tie2', '2025-02-01T00:00:00Z', 2),
      fact('tie2', '2025-02-01T00:00:00Z', 3),
    ]);
    const maxId = [...same.ids].sort().at(-1);
    assert.equal((await currentOf(m.id, 'observed_at', 'tie2'))?.fact_id, maxId);
    assert.equal((await currentOf(m.id, 'inserted_at', 'tie2'))?.fact_id, maxId);
    await assertCurrentConsistent(m.id);
  });

  test('facts without an entity id are each their own current row', async () => {
    const r = await writeFacts(t.deps.db, scope, m, [fact(null, T0, 1), fact(null, T0, 2), fact(null, '2024-01-01T00:00:00Z', 3)]);
    assert.equal(r.written, 3);
    for (const id of r.ids) {
      for (const axis of ['observed_at', 'inserted_at']) {
        const row = await currentOf(m.id, axis, `#${id}`);
        assert.equal(row?.fact_id, id);
        assert.equal(row?.entity_id, null);
      }
    }
    await assertCurrentConsistent(m.id);
  });

  test('a call of thousands of facts keeps one row per entity', async () => {
    const items = Array.from({ length: 2500 }, (_, i) => fact(`big-${i % 40}`, new Date(Date.UTC(2025, 0, 1) + ((i * 7919) % 2500) * 60_000).toISOString(), i));
    const r = await writeFacts(t.deps.db, scope, m, items);
    assert.equal(r.written, 2500);
    await assertCurrentConsistent(m.id);
  });

  test('inside a caller transaction, facts and the current state roll back with it', async () => {
    const before = await factCount(t.deps.db, m.id);
    await assert.rejects(
      t.deps.db.transaction().execute(async (trx) => {
        const r = await writeFacts(trx, scope, m, [fact('rolled-back', T0, 1)]);
        assert.equal(r.written, 1);
        throw new Error('abort');
      }),
      /abort/,
    );
    assert.equal(await factCount(t.deps.db, m.id), before);
    assert.equal(await currentOf(m.id, 'observed_at', 'rolled-back'), undefined);
  });

  test(`concurrent writers of the same entities leave the current state equal to history (${ENGINE})`, async () => {
    const c = await createModel(t.deps.db, tenant, [
      { name: 'k', type: 'string', is_primary_key: true },
      { name: 'v', type: 'integer' },
    ]);
    const entities = Array.from({ length: 10 }, (_, i) => `conc-${i}`);
    let n = 0;
    const call = (w: number) =>
      writeFacts(
        t.deps.db,
        scope,
        c,
        Array.from({ length: 30 }, (_, i) => {
          const e = entities[(w * 7 + i * 3) % entities.length]!;
          // Few distinct instants, so equal observed_at across writers is common.
          return { observed_at: new Date(Date.UTC(2025, 0, 1 + ((w * 13 + i * 5) % 6))).toISOString(), data: { k: i % 11 === 0 ? null : e, v: n++ } };
        }),
      );
    const results: WriteResult[] = await Promise.all(Array.from({ length: 20 }, (_, w) => call(w)));
    assert.equal(
      results.reduce((s, r) => s + r.written + r.duplicates, 0),
      600,
    );
    assert.ok(results.every((r) => r.errors.length === 0));
    const stored = await storedCurrent(t.deps.db, c.id);
    assert.deepEqual(stored, await recomputedCurrent(t.deps.db, c.id));
    assert.ok(stored.length >= 20);
    if (ENGINE === 'postgres') {
      // The writers really overlapped: more than one distinct inserted_at (transaction start).
      const { rows } = await sql<{ n: number }>`select count(distinct inserted_at)::int as n from facts where data_model_id = ${c.id}`.execute(t.deps.db);
      assert.ok(rows[0]!.n > 1);
    }
  });
});
