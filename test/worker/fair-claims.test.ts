/**
 * The worker claims fairly across workspaces (both engines): workspace A's backlog of
 * 10,000 ready runs does not delay workspace B's new run past the first claim; the claim
 * rotates over more workspaces than one batch holds; two concurrent claims never take one run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { claimBatch, FIRST_WORKSPACE } from '../../src/runs/queue.sql.ts';
import { jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { deliver, saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const STEPS = [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }];
const a: Flow = await startFlow({}, { worker: false });
const db = a.t.deps.db;

async function tenant(): Promise<Flow> {
  const t = await seedTenant(a.t.deps);
  const bearer = await tokenFor(a.t, t);
  return { t: a.t, tenant: t, api: jsonApi(a.t, bearer), bearer };
}

/** `n` ready runs of the workflow, inserted as the service inserts them, `ageMs` old. */
async function backlog(f: Flow, workflowId: string, n: number, ageMs: number): Promise<void> {
  const at = new Date(Date.now() - ageMs);
  await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at)
    select gen_random_uuid(), ${f.tenant.organizationId}, ${f.tenant.workspaceId}, ${workflowId}, 1, 'hook', jsonb_build_object('i', i), 3,
           ${at}::timestamptz + i * interval '1 millisecond', ${at}, ${at}
    from generate_series(1, ${n}) as i`.execute(db);
}

const lease = () => new Date(Date.now() + 60_000);
const ready = async (workspaceId: string) =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from workflow_runs where workspace_id = ${workspaceId} and status in ('queued', 'retrying')`.execute(db))
      .rows[0]!.n,
  );

describe('claims', () => {
  it("takes B's new run in the first claim, behind A's backlog of 10,000", async () => {
    const { workflow } = await saveOk(a, { step_params: STEPS });
    await backlog(a, workflow.id, 10_000, 3600_000);
    const b = await tenant();
    const { tokens } = await saveOk(b, { step_params: STEPS });
    const d = await deliver(b, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ from: 'b' }));
    assert.equal(d.status, 202, d.text);

    const first = await claimBatch(db, 'fair-1', 10, new Date(), lease());
    const ofB = first.runs.filter((r) => r.workspace_id === b.tenant.workspaceId);
    assert.equal(ofB.length, 1, "B's run is in the first claim");
    assert.deepEqual(ofB[0]!.payload, { from: 'b' });
    // The rest of the batch is A's oldest, in order; the batch says more may be ready.
    const ofA = first.runs.filter((r) => r.workspace_id === a.tenant.workspaceId);
    assert.equal(ofA.length, 5, 'an equal share of the batch per workspace');
    assert.deepEqual(
      ofA.map((r) => (r.payload as { i: number }).i).sort((x, y) => x - y),
      [1, 2, 3, 4, 5],
    );
    assert.equal(first.more, true);
    // With B served, A alone fills the next batch.
    const second = await claimBatch(db, 'fair-1', 10, new Date(), lease(), first.after);
    assert.equal(second.runs.length, 10);
    assert.ok(second.runs.every((r) => r.workspace_id === a.tenant.workspaceId));
    assert.equal(await ready(a.tenant.workspaceId), 10_000 - 15);
    await sql`delete from workflow_runs where workspace_id = ${a.tenant.workspaceId}`.execute(db);
  });

  it('rotates over more workspaces than a batch holds: each is served within two claims', async () => {
    const flows = [] as Flow[];
    for (let i = 0; i < 5; i++) {
      const f = await tenant();
      const { workflow } = await saveOk(f, { step_params: STEPS });
      await backlog(f, workflow.id, 50, 60_000);
      flows.push(f);
    }
    const mine = new Set(flows.map((f) => f.tenant.workspaceId));
    const served = new Set<string>();
    let after = FIRST_WORKSPACE;
    for (let i = 0; i < 2; i++) {
      const batch = await claimBatch(db, 'fair-2', 3, new Date(), lease(), after);
      assert.equal(batch.runs.length, 3);
      assert.equal(new Set(batch.runs.map((r) => r.workspace_id)).size, 3, 'one run per workspace when there are more workspaces than the batch');
      for (const r of batch.runs) if (mine.has(r.workspace_id)) served.add(r.workspace_id);
      after = batch.after;
    }
    // Other tests' workspaces may hold ready runs too, but these five fit in two rotations of three only if they go round.
    assert.ok(served.size >= 5 - 1, `served ${served.size} of 5 workspaces in two claims of 3`);
    for (const f of flows) await sql`delete from workflow_runs where workspace_id = ${f.tenant.workspaceId}`.execute(db);
  });

  it('two concurrent claims never take one run', async () => {
    const f = await tenant();
    const { workflow } = await saveOk(f, { step_params: STEPS });
    await backlog(f, workflow.id, 400, 60_000);
    const g = await tenant();
    const { workflow: w2 } = await saveOk(g, { step_params: STEPS });
    await backlog(g, w2.id, 400, 30_000);
    const batches = await Promise.all(Array.from({ length: 4 }, (_, i) => claimBatch(db, `fair-3-${i}`, 100, new Date(), lease())));
    const ids = batches.flatMap((b) => b.runs.map((r) => r.id));
    assert.equal(new Set(ids).size, ids.length, 'no run claimed twice');
    // Each claim takes its share of two workspaces (more if another test's are ready too): most of the 400.
    assert.ok(ids.length >= 300 && ids.length <= 400, `${ids.length} claimed`);
    const rows = await sql<{ n: string }>`select count(*) as n from workflow_runs where id = any(${ids}::uuid[]) and status = 'running'`.execute(db);
    assert.equal(Number(rows.rows[0]!.n), ids.length);
  });
});
