/**
 * The worker's fact writer (src/facts/fact-writer.ts): the stores of concurrent writeFacts
 * calls go in one statement; each call learns which of its own facts were written; one fact
 * per (model, source key) whatever the batch holds; fact_current as history says; an error
 * fails only the calls it belongs to (a transient one: every call of its batch, nothing
 * stored, and their retries store each fact once).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { writeFacts, type FactScope, type WriteResult } from '../../src/facts/write.ts';
import { factWriter } from '../../src/facts/fact-writer.ts';
import { uuidv7 } from '../../src/ids.ts';
import { createModel, factCount, recomputedCurrent, storedCurrent, type TestModel } from './helpers.ts';

let t: TestApp;
let tenants: Tenant[];
let models: Array<{ scope: FactScope; model: TestModel }>;

before(async () => {
  t = await startApp();
  tenants = [await seedTenant(t.deps), await seedTenant(t.deps)];
  const fields = [
    { name: 'id', type: 'string' as const, is_primary_key: true, is_required: true },
    { name: 'amount', type: 'integer' as const, is_required: true },
  ];
  // Two models in two workspaces: one statement carries both scopes.
  models = [];
  for (const tenant of tenants) {
    models.push({ scope: { organizationId: tenant.organizationId, workspaceId: tenant.workspaceId }, model: await createModel(t.deps.db, tenant, fields) });
  }
});
after(async () => {
  await t.close();
});

const T0 = Date.parse('2025-03-01T12:00:00.000Z');
const item = (entity: string, key: string, minutes: number, amount = 1) => ({
  observed_at: new Date(T0 + minutes * 60_000).toISOString(),
  data: { id: entity, amount },
  source_key: key,
});

/** Rows of `facts` per writing transaction: a batch is one statement, so one transaction. */
async function transactionsOf(dataModelIds: string[]): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(distinct xmin::text)::int as n from facts where data_model_id = any(${dataModelIds}::uuid[])
  `.execute(t.deps.db);
  return rows[0]!.n;
}

async function assertCurrentRight(): Promise<void> {
  for (const { model } of models) assert.deepEqual(await storedCurrent(t.deps.db, model.id), await recomputedCurrent(t.deps.db, model.id));
}

describe('fact writer', () => {
  test('concurrent calls on two models: few statements, one fact per source key, fact_current right, counts right', async () => {
    const writer = factWriter(t.deps.db);
    let counted = 0;
    const metrics = { factsWritten: (n: number) => void (counted += n) };
    const calls: Array<Promise<WriteResult>> = [];
    const keys = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const { scope, model } = models[i % 2]!;
      // Entities shared between calls (fact_current folds several calls' facts), and each
      // call's second key repeats another call's first: a replay racing its original.
      const a = `c${i}:0`;
      const b = `c${(i + 2) % 40}:0`;
      keys.add(`${model.id}/${a}`).add(`${model.id}/${b}`);
      calls.push(writeFacts(t.deps.db, scope, model, [item(`e${i % 5}`, a, i), item(`e${(i + 1) % 5}`, b, 40 - i)], metrics, writer.store));
    }
    const results = await Promise.all(calls);
    // The first call goes alone; the 39 that arrived while it was stored go together.
    assert.equal(writer.statements(), 2);
    assert.equal(await transactionsOf(models.map((m) => m.model.id)), 2);
    const written = results.reduce((n, r) => n + r.written, 0);
    assert.equal(written, keys.size, 'each source key written by exactly one call');
    assert.equal(counted, written, 'factsWritten counts what was stored');
    for (const r of results) {
      assert.equal(r.written + r.duplicates, 2);
      assert.equal(r.ids.filter((id) => id !== null).length, r.written, "a call's ids are its own written facts");
    }
    // Every returned id is a stored fact, of its call's model.
    const ids = results.flatMap((r, i) => r.ids.filter((id): id is string => id !== null).map((id) => ({ id, model: models[i % 2]!.model.id })));
    const { rows } = await sql<{
      id: string;
      data_model_id: string;
    }>`select id::text as id, data_model_id::text as data_model_id from facts where id = any(${ids.map((x) => x.id)}::uuid[])`.execute(t.deps.db);
    assert.equal(rows.length, ids.length);
    const modelOf = new Map(rows.map((r) => [r.id, r.data_model_id]));
    for (const x of ids) assert.equal(modelOf.get(x.id), x.model);
    assert.equal((await factCount(t.deps.db, models[0]!.model.id)) + (await factCount(t.deps.db, models[1]!.model.id)), keys.size);
    await assertCurrentRight();
  });

  test('a call whose fact collides with a stored source key gets a duplicate; the rest of its batch is written', async () => {
    const writer = factWriter(t.deps.db);
    const { scope, model } = models[0]!;
    const first = await writeFacts(t.deps.db, scope, model, [item('x1', 'collide:1', 0)]);
    assert.equal(first.written, 1);
    const calls = [
      writeFacts(t.deps.db, scope, model, [item('x0', 'collide:0', 1)], undefined, writer.store),
      writeFacts(t.deps.db, scope, model, [item('x1', 'collide:1', 5, 9), item('x2', 'collide:2', 1)], undefined, writer.store),
      writeFacts(t.deps.db, models[1]!.scope, models[1]!.model, [item('x1', 'collide:1', 2)], undefined, writer.store),
    ];
    const [a, b, c] = await Promise.all(calls);
    assert.equal(writer.statements(), 2);
    assert.deepEqual([a!.written, a!.duplicates], [1, 0]);
    assert.deepEqual([b!.written, b!.duplicates], [1, 1], 'collide:1 was stored before: a duplicate, not written again');
    assert.equal(b!.ids[0], null);
    assert.notEqual(b!.ids[1], null);
    assert.deepEqual([c!.written, c!.duplicates], [1, 0], 'the same source key in another model is another fact');
    const { rows } = await sql<{ n: number; amount: number }>`
      select count(*)::int as n, min((data->>'amount')::int) as amount from facts where data_model_id = ${model.id} and source_key = 'collide:1'
    `.execute(t.deps.db);
    assert.deepEqual(rows[0], { n: 1, amount: 1 }, 'the stored fact is the first one');
    await assertCurrentRight();
  });

  test("an error that is not transient fails only its call's store; the others of the batch are written", async () => {
    const writer = factWriter(t.deps.db);
    const { scope, model } = models[0]!;
    // A model deleted under a run: its facts break a foreign key.
    const gone = { ...model, id: uuidv7() };
    const calls = [
      writeFacts(t.deps.db, scope, model, [item('p0', 'perm:0', 0)], undefined, writer.store),
      writeFacts(t.deps.db, scope, model, [item('p1', 'perm:1', 0)], undefined, writer.store),
      writeFacts(t.deps.db, scope, gone, [item('p2', 'perm:2', 0)], undefined, writer.store),
      writeFacts(t.deps.db, scope, model, [item('p3', 'perm:3', 0)], undefined, writer.store),
    ];
    const settled = await Promise.allSettled(calls);
    assert.deepEqual(
      settled.map((s) => s.status),
      ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
    );
    assert.equal(((settled[2] as PromiseRejectedResult).reason as { code?: string }).code, '23503');
    for (const i of [0, 1, 3]) assert.equal((settled[i] as PromiseFulfilledResult<WriteResult>).value.written, 1);
    // 1 alone, 1 failed batch of three, then each of the three on its own.
    assert.equal(writer.statements(), 5);
    await assertCurrentRight();
  });

  test('a transient error fails every call of its batch and stores nothing; their retries store each fact once', async () => {
    const db = t.deps.db;
    // A serialization failure on one key, raised from inside the statement.
    await sql`create or replace function fail_flaky_fact() returns trigger language plpgsql as $$
      begin
        if new.source_key = 'flaky:2' then raise exception 'flaky' using errcode = '40001'; end if;
        return new;
      end $$`.execute(db);
    await sql`create trigger fail_flaky_fact before insert on facts for each row execute function fail_flaky_fact()`.execute(db);
    try {
      const writer = factWriter(db);
      const { scope, model } = models[1]!;
      const batch = (w: typeof writer) =>
        [0, 1, 2, 3].map((i) => writeFacts(db, scope, model, [item(`f${i}`, `flaky:${i}`, i), item('f-shared', `flaky:${i}:b`, i)], undefined, w.store));
      const settled = await Promise.allSettled(batch(writer));
      // The first call went alone and was stored; the other three shared the failing statement.
      assert.deepEqual(
        settled.map((s) => s.status),
        ['fulfilled', 'rejected', 'rejected', 'rejected'],
      );
      for (const s of settled.slice(1)) assert.equal(((s as PromiseRejectedResult).reason as { code?: string }).code, '40001');
      assert.equal(writer.statements(), 2, 'a transient error is not retried row by row');
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts where source_key like 'flaky:%'`.execute(db);
      assert.equal(rows[0]!.n, 2, 'nothing of the failed batch was stored');
      await sql`drop trigger fail_flaky_fact on facts`.execute(db);
      // The retries (all four: a retry does not know what an earlier attempt stored).
      const retried = await Promise.all(batch(factWriter(db)));
      assert.deepEqual(
        retried.map((r) => [r.written, r.duplicates]),
        [
          [0, 2],
          [2, 0],
          [2, 0],
          [2, 0],
        ],
      );
      const again = await Promise.all(batch(factWriter(db)));
      assert.equal(
        again.reduce((n, r) => n + r.written, 0),
        0,
      );
      const { rows: after } = await sql<{ n: number; keys: number }>`
        select count(*)::int as n, count(distinct source_key)::int as keys from facts where source_key like 'flaky:%'
      `.execute(db);
      assert.deepEqual(after[0], { n: 8, keys: 8 });
      await assertCurrentRight();
    } finally {
      await sql`drop trigger if exists fail_flaky_fact on facts`.execute(db);
      await sql`drop function if exists fail_flaky_fact()`.execute(db);
    }
  });
});
