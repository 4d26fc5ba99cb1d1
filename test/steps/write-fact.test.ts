/**
 * A fact written by write_fact is validated once: by the step, which fails all or nothing
 * on any bad item; the effects store what it validated as it is (facts/write.ts
 * storeValidFacts), without a second validation. And the dry effects of a test run show the
 * same facts without storing them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { seedTenant, startApp, type Tenant, type TestApp } from '../helpers/app.ts';
import { createModel, type TestModel } from '../facts/helpers.ts';
import { dryEffects, realEffects, type Effects, type FactsToStore } from '../../src/steps/effects.ts';
import { writeFact } from '../../src/steps/write-fact.ts';
import { runContext } from '../../src/worker/execute.ts';
import type { ClaimedRun } from '../../src/runs/queue.sql.ts';
import type { ValidFact } from '../../src/facts/validate.ts';
import { uuidv7 } from '../../src/ids.ts';

let t: TestApp;
let tenant: Tenant;
let model: TestModel;

before(async () => {
  t = await startApp();
  tenant = await seedTenant(t.deps);
  model = await createModel(t.deps.db, tenant, [
    { name: 'id', type: 'string', is_primary_key: true, is_required: true },
    { name: 'at', type: 'datetime' },
  ]);
});
after(async () => {
  await t.close();
});

const runOf = (payload: unknown): ClaimedRun =>
  ({
    id: uuidv7(),
    organization_id: tenant.organizationId,
    workspace_id: tenant.workspaceId,
    workflow_version: 1,
    trigger_key: null,
    payload,
    attempt: 1,
    max_attempts: 1,
    inserted_at: new Date('2025-03-01T12:00:00.000Z'),
    source_identity: null,
    delivery_id: null,
    delivery_headers: null,
    models: [{ ...model, fields: model.fields }],
  }) as unknown as ClaimedRun;

const stepCtx = (run: ClaimedRun) => ({
  db: t.deps.db,
  clock: t.deps.clock,
  run,
  key: 'store',
  input: runContext(run),
  expressions: t.deps.expressions,
  reads: { connectors: new Map() },
  span: undefined,
});

/** Effects that keep what the step hands them. */
function keeping(): Effects & { asked: FactsToStore[] } {
  const asked: FactsToStore[] = [];
  return {
    asked,
    storeFacts: async (what) => {
      asked.push(what);
      if (what.refusal !== undefined) throw new Error(what.refusal);
      return { written: what.facts.length, duplicates: 0 };
    },
    callOut: () => assert.fail('write_fact does not call out'),
    wait: () => assert.fail('write_fact does not wait'),
    setState: () => assert.fail('write_fact does not set state'),
  };
}

const factCount = async (id: string) =>
  (await sql<{ n: number }>`select count(*)::int as n from facts where data_model_id = ${model.id} and data->>'id' = ${id}`.execute(t.deps.db)).rows[0]!.n;

describe('write_fact validates each fact once', () => {
  it('hands the effects the facts it validated: normalized, with their entity and source key', async () => {
    const effects = keeping();
    const config = { data_model_slug: model.slug, mapping: { id: 'payload.id', at: 'payload.at' }, for_each: 'payload.items' };
    const run = runOf({ items: [1, 2], id: 'e-1', at: '2025-03-01T13:00:00+01:00' });
    const result = await writeFact.run(config, stepCtx(run), effects);
    assert.equal(effects.asked.length, 1);
    const [asked] = effects.asked;
    assert.equal(asked!.refusal, undefined);
    assert.deepEqual(
      asked!.facts.map((f) => ({ at: f.data.at, entity: f.entityId, key: f.sourceKey })),
      [0, 1].map((i) => ({ at: '2025-03-01T12:00:00.000Z', entity: 'e-1', key: `run:${run.id}:store:${i}` })),
    );
    assert.deepEqual(result.output, { data_model_slug: model.slug, items: 2, written: 2, duplicates: 0 });
  });

  it('refuses all on one bad item: nothing to store, every problem at its pointer', async () => {
    const effects = keeping();
    const config = { data_model_slug: model.slug, data: 'payload.fact' };
    await assert.rejects(writeFact.run(config, stepCtx(runOf({ fact: { id: 'e-2', at: 'not a time' } })), effects), /does not fit/);
    assert.equal(effects.asked.length, 1);
    assert.match(effects.asked[0]!.refusal!, /does not fit the data model/);
    assert.deepEqual(effects.asked[0]!.facts, []);
    assert.deepEqual(effects.asked[0]!.problems, [{ pointer: '/data/at', detail: effects.asked[0]!.problems[0]!.detail }]);
  });

  it('the real effects store a validated fact as it is, without validating it again', async () => {
    // Not what validateFact would accept (a member the model does not have): stored as
    // given proves the store trusts the step's validation instead of repeating it.
    const fact: ValidFact = { observedAt: '2025-03-01T12:00:00.000Z', data: { id: 'e-3', not_a_field: true }, entityId: 'e-3', sourceKey: `once:${uuidv7()}` };
    const effects = realEffects({ db: t.deps.db, clock: t.deps.clock });
    const stored = await effects.storeFacts({ key: 'store', run: runOf(null), model, items: [], facts: [fact], problems: [] });
    assert.deepEqual(stored, { written: 1, duplicates: 0 });
    assert.equal(await factCount('e-3'), 1);
  });

  it('the real effects store nothing when the step refuses, and the dry ones show the facts and store none', async () => {
    const fact: ValidFact = { observedAt: '2025-03-01T12:00:00.000Z', data: { id: 'e-4' }, entityId: 'e-4', sourceKey: `once:${uuidv7()}` };
    const what = { key: 'store', run: runOf(null), model, items: [{ observed_at: fact.observedAt, data: fact.data }], facts: [fact], problems: [] };
    await assert.rejects(realEffects({ db: t.deps.db, clock: t.deps.clock }).storeFacts({ ...what, refusal: 'refused' }), /refused/);
    const dry = dryEffects('none', new Map());
    assert.deepEqual(await dry.storeFacts(what), { written: 1, duplicates: 0 });
    assert.deepEqual(dry.notes.get('store'), { facts: what.items, problems: [] });
    assert.equal(await factCount('e-4'), 0);
  });
});
