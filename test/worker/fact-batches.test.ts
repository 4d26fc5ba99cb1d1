/**
 * The worker stores the facts of runs executing together in shared statements (the fact
 * writer, src/facts/fact-writer.ts), and write_fact stays at most once per (delivery,
 * version, step, item): many runs of two workflows writing to two models end with one fact
 * per delivery, fact_current as history says, and each run's facts_written right; a
 * transient failure of a shared statement fails its runs for a retry that stores nothing
 * twice; replays racing each other store nothing new.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { startWorker } from '../../src/worker/worker.ts';
import { recomputedCurrent, storedCurrent } from '../facts/helpers.ts';
import { API, createModel, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

// Dozens of runs are polled every 20 ms each, past the default 600 requests a minute of one
// client (on PGlite that held only while the API could not answer during a statement).
const f: Flow = await startFlow({ RUN_MAX_ATTEMPTS: '4', RUN_RETRY_SCHEDULE: '20ms', RATE_LIMIT_MAX: '100000' }, { worker: false });
const db = f.t.deps.db;
const models = {
  orders: await createModel(f, 'orders', [
    { name: 'order_id', type: 'string' },
    { name: 'amount', type: 'float', is_required: true },
  ]),
  refunds: await createModel(f, 'refunds', [
    { name: 'order_id', type: 'string' },
    { name: 'amount', type: 'float', is_required: true },
  ]),
};
const flow = async (slug: string) =>
  saveOk(f, {
    wf_params: { name: `To ${slug}`, is_active: true },
    step_params: [
      { key: 'shape', type: 'transform', config: { expression: 'payload.amount * 2' } },
      { key: 'store', type: 'write_fact', config: { data_model_slug: slug, mapping: { order_id: 'payload.id', amount: 'steps.shape' } } },
    ],
  });
const hooks = { orders: (await flow('orders')).tokens.hook!, refunds: (await flow('refunds')).tokens.hook! };

const PER_MODEL = 20;

async function factsOf(modelId: string): Promise<{ n: number; keys: number; transactions: number }> {
  const { rows } = await sql<{ n: number; keys: number; transactions: number }>`
    select count(*)::int as n, count(distinct source_key)::int as keys, count(distinct xmin::text)::int as transactions
    from facts where data_model_id = ${modelId}
  `.execute(db);
  return rows[0]!;
}

let runIds: string[] = [];

describe('write_fact in shared statements', () => {
  it('runs of two workflows and models, one failing transiently in a shared statement: one fact per delivery, each counted once', async () => {
    // The first statement that holds a "flaky" fact fails as a serialization failure would
    // (a sequence is not rolled back, so it fails once): every run of that statement retries.
    await sql`create sequence flaky_fact_seq`.execute(db);
    await sql`create function fail_flaky_fact() returns trigger language plpgsql as $$
      begin
        if new.data->>'order_id' like 'flaky%' and nextval('flaky_fact_seq') = 1 then raise exception 'flaky' using errcode = '40001'; end if;
        return new;
      end $$`.execute(db);
    await sql`create trigger fail_flaky_fact before insert on facts for each row execute function fail_flaky_fact()`.execute(db);
    // Queued before the worker starts, so that it claims them together.
    const deliveries = [];
    for (const slug of ['orders', 'refunds'] as const)
      for (let i = 0; i < PER_MODEL; i++) {
        const id = i === PER_MODEL - 1 ? `flaky-${slug}` : `${slug}-${i}`;
        deliveries.push(deliver(f, `/api/v1/webhooks/${hooks[slug]}`, JSON.stringify({ id, amount: i + 1 }), { 'idempotency-key': `${slug}-${i}` }));
      }
    const accepted = await Promise.all(deliveries);
    for (const d of accepted) assert.equal(d.status, 202, d.text);
    runIds = accepted.map((d) => d.body.workflow_run_id);

    const worker = startWorker(f.t.deps);
    try {
      const runs = await Promise.all(runIds.map((id) => waitForRun(f, id, 30_000)));
      for (const run of runs) {
        assert.equal(run.attributes.outcome, 'completed', JSON.stringify(run.attributes));
        assert.equal(run.attributes.facts_written, 1, 'the attempt that stored its fact counts it, once');
      }
      const retried = runs.filter((r) => r.attributes.attempt > 1);
      assert.ok(retried.length >= 1, 'the flaky statement failed its runs transiently');
    } finally {
      await worker.stop(1000);
      await sql`drop trigger fail_flaky_fact on facts`.execute(db);
    }
    let transactions = 0;
    for (const id of Object.values(models)) {
      const facts = await factsOf(id);
      assert.deepEqual([facts.n, facts.keys], [PER_MODEL, PER_MODEL], 'one fact per delivery');
      transactions += facts.transactions;
      assert.deepEqual(await storedCurrent(db, id), await recomputedCurrent(db, id));
    }
    // 40 runs claimed together: their facts went in fewer statements (transactions) than runs.
    assert.ok(transactions < 2 * PER_MODEL, `facts written in ${transactions} transactions for ${2 * PER_MODEL} runs`);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from facts where data->>'order_id' like 'flaky%'`.execute(db);
    assert.equal(rows[0]!.n, 2);
  });

  it('every run replayed twice at once: the replays store nothing', async () => {
    const worker = startWorker(f.t.deps);
    try {
      const replays = await Promise.all(
        [...runIds, ...runIds].map(async (id) => {
          const r = await f.api.post(`${API}/workflow_runs/${id}/replay`, undefined);
          assert.equal(r.status, 201, r.text);
          return r.body.data.id as string;
        }),
      );
      const runs = await Promise.all(replays.map((id) => waitForRun(f, id, 30_000)));
      for (const run of runs) {
        assert.equal(run.attributes.outcome, 'completed');
        assert.equal(run.attributes.facts_written, 0);
        assert.equal(run.attributes.steps[1].output.duplicates, 1);
      }
    } finally {
      await worker.stop(1000);
    }
    for (const id of Object.values(models)) {
      const facts = await factsOf(id);
      assert.deepEqual([facts.n, facts.keys], [PER_MODEL, PER_MODEL]);
      assert.deepEqual(await storedCurrent(db, id), await recomputedCurrent(db, id));
    }
  });
});
