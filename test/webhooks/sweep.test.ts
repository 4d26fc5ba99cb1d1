/** The sweep deletes delivery guards past DELIVERY_GUARD_DAYS and finished runs past RUN_RETENTION_DAYS, nothing younger. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { adminCall } from '../helpers/app.ts';
import { createModel, deliver, saveOk, startFlow, waitForRun } from './helpers.ts';

const f = await startFlow({ DELIVERY_GUARD_DAYS: '7', RUN_RETENTION_DAYS: '30' });
await createModel(f, 'pings', [{ name: 'ping_id', type: 'string' }]);
const { tokens } = await saveOk(f, {
  step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'pings', mapping: { ping_id: 'payload.id' } } }],
});
const hook = `/api/v1/webhooks/${tokens.hook}`;

it('deletes expired guards (the delivery id deduplicates no more) and old finished runs', async () => {
  const ids: string[] = [];
  for (const n of [1, 2, 3]) {
    const d = await deliver(f, hook, JSON.stringify({ id: `p-${n}` }), { 'idempotency-key': `k-${n}` });
    assert.equal(d.body.status, 'accepted');
    ids.push(d.body.workflow_run_id);
    await waitForRun(f, d.body.workflow_run_id);
  }
  const db = f.t.deps.db;
  // k-1: guard 8 days old, run finished 31 days ago; k-2: guard 6 days old, run finished 29 days ago.
  await sql`update delivery_guards set inserted_at = now() - interval '8 days' where run_id = ${ids[0]}`.execute(db);
  await sql`update delivery_guards set inserted_at = now() - interval '6 days' where run_id = ${ids[1]}`.execute(db);
  await sql`update workflow_runs set finished_at = now() - interval '31 days' where id = ${ids[0]}`.execute(db);
  await sql`update workflow_runs set finished_at = now() - interval '29 days' where id = ${ids[1]}`.execute(db);

  const res = await adminCall(f.t, 'POST', '/sweep');
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.data.delivery_guards_deleted, 1);
  assert.equal(res.body.data.workflow_runs_deleted, 1);
  const left = await db.selectFrom('workflow_runs').select('id').orderBy('id').execute();
  assert.deepEqual(
    left.map((r) => r.id),
    [ids[1], ids[2]],
  );

  // The expired identity starts a run again; the younger one is still a duplicate.
  assert.equal((await deliver(f, hook, JSON.stringify({ id: 'p-1' }), { 'idempotency-key': 'k-1' })).body.status, 'accepted');
  assert.equal((await deliver(f, hook, JSON.stringify({ id: 'p-2' }), { 'idempotency-key': 'k-2' })).body.status, 'duplicate');
});

it('takes over a guard past its window even before the sweep ran', async () => {
  const d = await deliver(f, hook, JSON.stringify({ id: 'p-9' }), { 'idempotency-key': 'k-9' });
  await sql`update delivery_guards set inserted_at = now() - interval '8 days' where run_id = ${d.body.workflow_run_id}`.execute(f.t.deps.db);
  const again = await deliver(f, hook, JSON.stringify({ id: 'p-9' }), { 'idempotency-key': 'k-9' });
  assert.equal(again.body.status, 'accepted');
  assert.notEqual(again.body.workflow_run_id, d.body.workflow_run_id);
});
