/**
 * The waiting-runs quota (QUOTA_WAITING_RUNS): a workspace with that many runs queued or
 * retrying gets 429 `Rate limit exceeded` with Retry-After on a delivery (stored nowhere, so
 * the same delivery is accepted once runs drained), 429 rate_limited on replays, and its
 * schedule ticks are skipped (counted); another workspace is not affected.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { startWorker } from '../../src/worker/worker.ts';
import { refreshSchedules, schedulePass, scheduleState } from '../../src/worker/schedules.ts';
import { loadSchedules } from '../../src/triggers/schedule.sql.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from './helpers.ts';

const LIMIT = 2;
// The worker is off: runs stay queued until the test starts one.
const a: Flow = await startFlow({ QUOTA_WAITING_RUNS: String(LIMIT) }, { worker: false });
const otherTenant = await seedTenant(a.t.deps);
const otherBearer = await tokenFor(a.t, otherTenant);
const b: Flow = { ...a, tenant: otherTenant, bearer: otherBearer, api: jsonApi(a.t, otherBearer) };
const STEPS = [{ key: 'shape', type: 'transform', config: { expression: 'payload' } }];

const hookA = (await saveOk(a, { step_params: STEPS })).tokens.hook!;
const hookB = (await saveOk(b, { step_params: STEPS })).tokens.hook!;
const send = (f: Flow, hook: string, key: string) => deliver(f, `/api/v1/webhooks/${hook}`, JSON.stringify({ key }), { 'idempotency-key': key });

async function refusals(path: string): Promise<number> {
  const text = await a.t.deps.metrics.registry.metrics();
  const m = new RegExp(`quota_refusals_total\\{quota="waiting_runs",path="${path}"\\} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
}

describe('runs waiting in the queue (QUOTA_WAITING_RUNS)', () => {
  const accepted: string[] = [];

  it('past the limit a delivery is 429 Rate limit exceeded with Retry-After, naming the limit; another workspace is accepted', async () => {
    for (const key of ['k1', 'k2']) {
      const d = await send(a, hookA, key);
      assert.equal(d.status, 202, d.text);
      assert.equal(d.body.status, 'accepted');
      accepted.push(d.body.workflow_run_id);
    }
    const before = await refusals('webhook');
    const refused = await send(a, hookA, 'k3');
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.body.error, 'Rate limit exceeded');
    assert.match(refused.body.detail, new RegExp(`QUOTA_WAITING_RUNS = ${LIMIT}`));
    assert.ok(Number(refused.headers.get('retry-after')) >= 1, refused.text);
    assert.equal(await refusals('webhook'), before + 1);
    const other = await send(b, hookB, 'k3');
    assert.equal(other.status, 202, other.text);
    assert.equal(other.body.status, 'accepted');
  });

  it('replays and bulk replays of the workspace are 429 rate_limited', async () => {
    const one = await a.api.post(`${API}/workflow_runs/${accepted[0]}/replay`, undefined);
    assert.equal(one.status, 429, one.text);
    assert.equal(one.body.errors[0].code, 'rate_limited');
    assert.match(one.body.errors[0].detail, /QUOTA_WAITING_RUNS/);
    assert.ok(one.headers.get('retry-after'));
    const bulk = await a.api.post(`${API}/workflow_runs/replay?filter[status]=succeeded`, { meta: { limit: 10 } });
    assert.equal(bulk.status, 429, bulk.text);
    assert.equal(bulk.body.errors[0].code, 'rate_limited');
  });

  it("the workspace's schedule ticks are skipped and counted; another workspace's fire", async () => {
    const every = [{ key: 'tick', type: 'schedule', cron: '* * * * * *' }];
    const wa = (await saveOk(a, { step_params: STEPS, trigger_params: every })).workflow.id;
    const wb = (await saveOk(b, { step_params: STEPS, trigger_params: every })).workflow.id;
    const t0 = Date.now();
    const state = scheduleState(new Date(t0 - 60_000));
    refreshSchedules(state, await loadSchedules(a.t.deps.db));
    const before = await refusals('schedule');
    const at = t0 + 3000;
    await schedulePass({ ...a.t.deps, clock: () => at }, state, new Date(at));
    const runsOf = (id: string) => a.t.deps.db.selectFrom('workflow_runs').select('id').where('workflow_id', '=', id).execute();
    assert.equal((await runsOf(wa)).length, 0);
    assert.ok((await runsOf(wb)).length >= 1);
    assert.ok((await refusals('schedule')) > before);
    // Deactivated: the drain below runs only the deliveries' runs.
    for (const [f, id] of [[a, wa] as const, [b, wb] as const]) {
      const r = await f.api.get(`${API}/workflows/${id}`);
      const triggers = r.body.data.attributes.triggers.map(({ next_fire_at: _, ...tr }: Record<string, unknown>) => tr);
      await saveOk(f, { workflow_id: id, wf_params: { name: 'Orders', is_active: false }, step_params: STEPS, trigger_params: triggers });
    }
  });

  it('the refused delivery was stored nowhere: once the runs drained, the same delivery is accepted', async () => {
    const worker = startWorker(a.t.deps);
    try {
      for (const id of accepted) await waitForRun(a, id);
    } finally {
      await worker.stop(1000);
    }
    // The count is cached for up to a second: the sender's retry comes after Retry-After anyway.
    const deadline = Date.now() + 10_000;
    let d = await send(a, hookA, 'k3');
    while (d.status === 429 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      d = await send(a, hookA, 'k3');
    }
    assert.equal(d.status, 202, d.text);
    assert.equal(d.body.status, 'accepted');
  });
});
