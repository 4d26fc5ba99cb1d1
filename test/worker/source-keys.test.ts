/**
 * Facts' source keys come from the delivery, the workflow version, the step and the item,
 * not from the run: replays of a run on its version store nothing new, while the same
 * delivery on a newer version stores new facts that become current (same entity, same
 * observed_at: the newer write wins). Runs without a source identity keep run-id keys.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { claimRuns, finishRuns } from '../../src/runs/queue.sql.ts';
import { executeRun, sourceKey } from '../../src/worker/execute.ts';
import { startWorker, type Worker } from '../../src/worker/worker.ts';
import { gql, gqlClient } from '../graphql/helpers.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({}, { worker: false });
const db = f.t.deps.db;
await createModel(f, 'lines', [
  { name: 'sku', type: 'string' },
  { name: 'qty', type: 'integer' },
]);
const STEPS = [
  {
    key: 'store',
    type: 'write_fact',
    config: { data_model_slug: 'lines', for_each: 'payload.lines', mapping: { sku: 'item.sku', qty: 'item.qty' }, observed_at: 'payload.at' },
  },
];
const { workflow, tokens } = await saveOk(f, { step_params: STEPS });
const AT = new Date(Date.now() - 86_400_000).toISOString();
const PAYLOAD = JSON.stringify({
  at: AT,
  lines: [
    { sku: 'a', qty: 1 },
    { sku: 'b', qty: 2 },
  ],
});

const count = async (table: 'facts' | 'fact_current') =>
  Number((await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(db)).rows[0]!.n);
/** Entries of the model's timeline, as the GraphQL API shows them. */
async function timeline(): Promise<number> {
  const r = await gql(gqlClient(f.t, f.bearer), '{ factQuery(dataModelSlug: "lines", mode: "timeline") { count } }');
  assert.equal(r.errors, undefined, JSON.stringify(r.errors));
  return r.data.factQuery.count;
}
const runRow = (id: string) => db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

let worker: Worker | undefined;
let original: any;

describe('a delivery', () => {
  it('stores its facts under keys of its identity, version, step and item', async () => {
    worker = startWorker(f.t.deps);
    const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, PAYLOAD, { 'idempotency-key': 'order-77' });
    assert.equal(d.status, 202, d.text);
    original = await waitForRun(f, d.body.workflow_run_id);
    assert.equal(original.attributes.outcome, 'completed');
    assert.equal(original.attributes.facts_written, 2);
    const row = await runRow(original.id);
    // The guard's key (a digest of the header, never its value) and when it was taken.
    assert.match(row.source_identity!, /^delivery:h:[0-9a-f]{64}@\d{4}-\d\d-\d\dT/);
    assert.ok(!row.source_identity!.includes('order-77'));
    const keys = (await sql<{ source_key: string }>`select source_key from facts order by source_key`.execute(db)).rows.map((r) => r.source_key);
    assert.deepEqual(keys, [sourceKey(row, 'store', 0), sourceKey(row, 'store', 1)]);
    for (const k of keys) assert.match(k, /^d:[A-Za-z0-9_-]{43}:v1:store:[01]$/);
    assert.equal(await count('facts'), 2);
    assert.equal(await timeline(), 2);
  });

  it('replayed three times on its version: exactly the original facts', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await f.api.post(`${API}/workflow_runs/${original.id}/replay`, undefined);
      assert.equal(r.status, 201, r.text);
      const replay = await waitForRun(f, r.body.data.id);
      // The replay carries the original's source identity: its facts are the original's.
      assert.equal((await runRow(replay.id)).source_identity, (await runRow(original.id)).source_identity);
      assert.equal(replay.attributes.outcome, 'completed');
      assert.equal(replay.attributes.facts_written, 0, `replay ${i + 1}`);
      assert.equal(replay.attributes.steps[0].output.duplicates, 2);
    }
    assert.equal(await count('facts'), 2);
    assert.equal(await count('fact_current'), 4, 'two entities, on two axes');
    assert.equal(await timeline(), 2);
  });

  it('on a newer version: new facts, current for their entities though observed at the same instant', async () => {
    await worker!.stop(1000);
    const saved = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          workflow_id: workflow.id,
          lock_version: (await f.api.get(`${API}/workflows/${workflow.id}`)).body.data.attributes.lock_version,
          is_new_version: true,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'Orders', is_active: true },
          trigger_params: [{ id: workflow.attributes.triggers[0].id, key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId }],
          step_params: STEPS,
        },
      },
    });
    assert.equal(saved.status, 201, saved.text);
    // The same delivery replayed on the current version: claimed, and executed here.
    const r = await f.api.post(`${API}/workflow_runs/${original.id}/replay`, { meta: { version: 'current' } });
    assert.equal(r.status, 201, r.text);
    const [claimed] = await claimRuns(db, 'test', 10, new Date(), new Date(Date.now() + 60_000));
    assert.equal(claimed?.id, r.body.data.id);
    assert.equal(claimed!.workflow_version, 2);
    assert.equal(claimed!.source_identity, (await runRow(original.id)).source_identity);
    const facts = await count('facts');
    const entries = await timeline();
    const v2 = claimed!;
    const outcome = await executeRun(
      { db, clock: () => Date.now(), expressions: f.t.deps.expressions, outputMaxBytes: f.t.deps.config.runRecord.outputBytes },
      v2,
      { schedule: [10], retryAfterMaxMs: 1000 },
    );
    assert.equal(outcome.outcome, 'completed');
    assert.equal(outcome.factsWritten, 2);
    await finishRuns(db, 'test', [{ id: claimed!.id, outcome }], new Date());
    assert.equal((await runRow(claimed!.id)).facts_written, 2);
    assert.equal(await count('facts'), facts + 2);
    assert.equal(await timeline(), entries + 2);
    // Same entity, same observed_at: the version 2 facts are the current ones, on both axes.
    const current = (
      await sql<{
        source_key: string;
        axis: string;
      }>`select f.source_key, c.axis from fact_current c join facts f on f.id = c.fact_id order by c.axis, c.entity_key`.execute(db)
    ).rows;
    assert.equal(current.length, 4);
    for (const c of current) assert.match(c.source_key, /:v2:store:[01]$/, JSON.stringify(current));
    // And run again as version 2 (a retry): nothing new.
    const again = await executeRun(
      { db, clock: () => Date.now(), expressions: f.t.deps.expressions, outputMaxBytes: f.t.deps.config.runRecord.outputBytes },
      v2,
      { schedule: [10], retryAfterMaxMs: 1000 },
    );
    assert.equal(again.factsWritten, 0);
    assert.equal(await count('facts'), facts + 2);
  });
});

describe('source keys', () => {
  it('a run without a source identity (made before them) keeps its run-id keys; others are compact', () => {
    const id = '0199a3c1-7e0a-7c4e-9a51-0d3f4e6b2a10';
    assert.equal(sourceKey({ id, workflow_version: 3, source_identity: null }, 'store', 4), `run:${id}:store:4`);
    const k = sourceKey({ id, workflow_version: 3, source_identity: `delivery:h:${'f'.repeat(64)}@2026-11-27T01:00:00.000Z` }, 'store', 4);
    assert.match(k, /^d:[A-Za-z0-9_-]{43}:v3:store:4$/);
    assert.equal(
      sourceKey({ id: 'another-run', workflow_version: 3, source_identity: `delivery:h:${'f'.repeat(64)}@2026-11-27T01:00:00.000Z` }, 'store', 4),
      k,
    );
    assert.notEqual(sourceKey({ id, workflow_version: 4, source_identity: `delivery:h:${'f'.repeat(64)}@2026-11-27T01:00:00.000Z` }, 'store', 4), k);
  });
});
