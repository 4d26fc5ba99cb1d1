/**
 * A schedule flood (both engines, one process with a moved clock): workspace A has 2,000
 * every-second schedules, then workspace B saves one. Each pass fires at most the
 * documented ticks per pass and per workspace, B's schedule fires its tick in every pass
 * from the first after its save, and A's backlog is caught up by its catch_up rule only
 * (`none`: no missed tick; `latest`: at most the latest missed one per pass).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { planPass, refreshSchedules, scheduleState, schedulePass } from '../../src/worker/schedules.ts';
import { loadSchedules } from '../../src/triggers/schedule.sql.ts';
import { jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { saveOk, startFlow, type Flow } from '../webhooks/helpers.ts';

const STEPS = [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }];
const EVERY_SECOND = '* * * * * *';
const a: Flow = await startFlow({ SCHEDULE_TICKS_PER_PASS: '1000', SCHEDULE_TICKS_PER_WORKSPACE: '100' }, { worker: false });
const { db, config } = a.t.deps;

async function tenant(): Promise<Flow> {
  const t = await seedTenant(a.t.deps);
  const bearer = await tokenFor(a.t, t);
  return { t: a.t, tenant: t, api: jsonApi(a.t, bearer), bearer };
}

/** A's workflow with `n` every-second schedules: one saved by the service, the rest beside it as the save stores them (odd keys catch_up latest, even none). */
async function flood(n: number): Promise<string> {
  const { workflow } = await saveOk(a, { step_params: STEPS, trigger_params: [{ key: 's1', type: 'schedule', cron: EVERY_SECOND }] });
  await sql`insert into workflow_triggers (id, workflow_id, organization_id, workspace_id, key, type, cron, timezone, catch_up, schedule_since, inserted_at, updated_at)
    select gen_random_uuid(), t.workflow_id, t.organization_id, t.workspace_id, 's' || i, 'schedule', t.cron, t.timezone,
           case when i % 2 = 0 then 'none' else 'latest' end, t.schedule_since, t.inserted_at, t.updated_at
    from workflow_triggers as t, generate_series(2, ${n}) as i
    where t.workflow_id = ${workflow.id}`.execute(db);
  return workflow.id;
}

interface TickRun {
  key: string;
  scheduled_at: number;
}

async function runsAt(workflowId: string, insertedAt: number): Promise<TickRun[]> {
  const { rows } = await sql<{ key: string; scheduled_at: string }>`
    select trigger_key as key, payload->>'scheduled_at' as scheduled_at from workflow_runs
    where workflow_id = ${workflowId} and inserted_at = ${new Date(insertedAt)}`.execute(db);
  return rows.map((r) => ({ key: r.key, scheduled_at: Date.parse(r.scheduled_at) }));
}

describe('a schedule flood', () => {
  it("bounds each pass, serves B's new schedule at once, and catches A up by catch_up only", { timeout: 600_000 }, async () => {
    assert.equal(config.scheduleTicksPerPass, 1000);
    assert.equal(config.scheduleTicksPerWorkspace, 100);
    const aWorkflow = await flood(2000);
    // The passes' clock: whole seconds ahead of every save, so every tick is after each schedule's since.
    const t0 = Math.ceil(Date.now() / 1000) * 1000 + 5000;
    const state = scheduleState(new Date(t0 - 500));
    const deps = { ...a.t.deps, clock: () => t0 - 500 };
    const passAt = (k: number) => t0 + k * 1000 + 500;
    const pass = async (k: number) => {
      refreshSchedules(state, await loadSchedules(db));
      return schedulePass({ ...deps, clock: () => passAt(k) }, state, new Date(passAt(k)));
    };

    await pass(0);
    const first = await runsAt(aWorkflow, passAt(0));
    assert.ok(first.length > 0 && first.length <= 100, `A's ticks in the first pass: ${first.length}`);

    const b = await tenant();
    const { workflow: bWorkflow } = await saveOk(b, { step_params: STEPS, trigger_params: [{ key: 'b', type: 'schedule', cron: EVERY_SECOND }] });
    // B's schedule, first seen, is served in the pass's first turn.
    refreshSchedules(state, await loadSchedules(db));
    const plan = planPass(state, new Date(passAt(1)), { perPass: 1000, perWorkspace: 100 });
    const workspaces = new Set(plan.planned.map((p) => p.w.row.workspace_id)).size;
    const bAt = plan.planned.findIndex((p) => p.w.row.workspace_id === b.tenant.workspaceId);
    assert.ok(bAt >= 0 && bAt < workspaces, `B's schedule is in the first turn (at ${bAt} of ${plan.planned.length}, ${workspaces} workspaces)`);

    const served = new Map<string, number>();
    let aTotal = first.length;
    for (let k = 1; k <= 12; k++) {
      const made = await pass(k);
      assert.ok(made <= config.scheduleTicksPerPass, `pass ${k} made ${made}`);
      // B: its tick of this second, in this pass.
      const bRuns = await runsAt(bWorkflow.id, passAt(k));
      assert.ok(
        bRuns.some((r) => r.scheduled_at === t0 + k * 1000),
        `pass ${k}: B's tick ${new Date(t0 + k * 1000).toISOString()} fired (B's runs: ${JSON.stringify(bRuns)})`,
      );
      // A: bounded, going on, and caught up by its catch_up rule only.
      const aRuns = await runsAt(aWorkflow, passAt(k));
      assert.ok(aRuns.length > 0 && aRuns.length <= config.scheduleTicksPerWorkspace, `pass ${k}: A fired ${aRuns.length}`);
      aTotal += aRuns.length;
      const missed = new Map<string, number>();
      for (const r of aRuns) {
        served.set(r.key, (served.get(r.key) ?? 0) + 1);
        if (r.scheduled_at > passAt(k - 1)) continue; // came due since the previous pass
        const even = Number(r.key.slice(1)) % 2 === 0;
        assert.ok(!even, `pass ${k}: ${r.key} (catch_up none) fired a missed tick`);
        missed.set(r.key, (missed.get(r.key) ?? 0) + 1);
      }
      for (const [key, n] of missed) assert.equal(n, 1, `pass ${k}: ${key} (catch_up latest) fired ${n} missed ticks`);
    }
    assert.ok(aTotal <= 13 * config.scheduleTicksPerWorkspace, `A fired ${aTotal} ticks in 13 passes`);
    // Not every missed tick: 2,000 schedules over 13 seconds would be 26,000.
    const bCount = (await sql<{ n: string }>`select count(*) as n from workflow_runs where workflow_id = ${bWorkflow.id}`.execute(db)).rows[0]!.n;
    assert.ok(Number(bCount) >= 12, `B made ${bCount} runs`);
    await sql`update workflows set is_active = false where id in (${aWorkflow}, ${bWorkflow.id})`.execute(db);
  });
});
