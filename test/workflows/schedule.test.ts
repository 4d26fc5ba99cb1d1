/**
 * Schedule triggers in one process with a moved clock (both engines): the save and its
 * 422s, next_fire_at in reads, one run per tick between two processes' passes, the runs'
 * trigger_key and payload, catch-up (latest and none), and deactivation. Several processes
 * for real: test/worker/schedule-processes.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Deps } from '../../src/deps.ts';
import { dueTicks, refreshSchedules, scheduleState, schedulePass, startSchedules, type ScheduleState } from '../../src/worker/schedules.ts';
import { loadSchedules, type ScheduleRow } from '../../src/triggers/schedule.sql.ts';
import { latestTick, nextTick, ticksBetween } from '../../src/triggers/schedule.ts';
import { API, save, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const f: Flow = await startFlow({}, { worker: true });
// `delivery` is null for a schedule's run: $type says so (a missing name would give nothing, no member at all).
const STEPS = [{ key: 'echo', type: 'transform', config: { expression: '{"at": payload.scheduled_at, "by": trigger.key, "delivery": $type(delivery)}' } }];
const MINUTE = 60_000;

/**
 * A process as far as schedules go: its deps at a clock of its own, and its watched
 * schedules. Every process sees every active schedule, so the tests count runs of their
 * own workflow, not what a pass made.
 */
function process(startedAt: number): { deps: Deps; state: ScheduleState; pass(at: number): Promise<void> } {
  const state = scheduleState(new Date(startedAt));
  const deps = { ...f.t.deps, clock: () => startedAt };
  return {
    deps,
    state,
    async pass(at: number) {
      refreshSchedules(state, await loadSchedules(f.t.deps.db));
      await schedulePass({ ...deps, clock: () => at }, state, new Date(at));
    },
  };
}

async function count(workflowId: string): Promise<number> {
  return (await runsOf(workflowId)).length;
}

async function runsOf(
  workflowId: string,
): Promise<Array<{ id: string; trigger_key: string | null; payload: any; workflow_version: number; source_identity: string | null }>> {
  return f.t.deps.db
    .selectFrom('workflow_runs')
    .select(['id', 'trigger_key', 'payload', 'workflow_version', 'inserted_at', 'source_identity'])
    .where('workflow_id', '=', workflowId)
    .orderBy('inserted_at')
    .orderBy('id')
    .execute();
}

const scheduledAts = (runs: Array<{ payload: any }>) => runs.map((r) => r.payload.scheduled_at as string).sort();
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The workflow's schedules as if saved an hour ago: the tests' clocks then stay behind the
 * worker's (the real one), which executes the runs they make at once.
 */
async function savedAnHourAgo(workflowId: string): Promise<number> {
  const { db } = f.t.deps;
  const row = await db.selectFrom('workflow_triggers').select('schedule_since').where('workflow_id', '=', workflowId).executeTakeFirstOrThrow();
  const since = new Date(row.schedule_since!).getTime() - 3600_000;
  await db
    .updateTable('workflow_triggers')
    .set({ schedule_since: new Date(since) })
    .where('workflow_id', '=', workflowId)
    .execute();
  return since;
}

describe('saving a schedule trigger', () => {
  it('saves it beside a webhook, without a token, and reads show next_fire_at', async () => {
    const before = Date.now();
    const { workflow, tokens } = await saveOk(f, {
      step_params: STEPS,
      trigger_params: [
        { key: 'nightly', type: 'schedule', cron: '0 30 2 * * *', timezone: 'Europe/Berlin' },
        { key: 'hook', type: 'webhook', service_account_id: f.tenant.credentialId },
      ],
    });
    assert.deepEqual(Object.keys(tokens), ['hook']);
    const [nightly, hook] = workflow.attributes.triggers;
    assert.deepEqual(
      { ...nightly, id: undefined, next_fire_at: undefined },
      { id: undefined, key: 'nightly', type: 'schedule', cron: '0 30 2 * * *', timezone: 'Europe/Berlin', catch_up: 'latest', next_fire_at: undefined },
    );
    assert.equal(hook.type, 'webhook');
    assert.equal(hook.next_fire_at, undefined);
    // 02:30 in Berlin is 00:30 or 01:30 UTC, within a day of the read.
    const next = Date.parse(nightly.next_fire_at);
    assert.match(nightly.next_fire_at, /^\d{4}-\d\d-\d\dT0[01]:30:00\.000Z$/);
    assert.ok(next > before && next <= Date.now() + 24 * 3600_000, nightly.next_fire_at);

    const read = await f.api.get(`${API}/workflows/${workflow.id}`);
    assert.equal(read.body.data.attributes.triggers[0].next_fire_at, nightly.next_fire_at);

    // Inactive: nothing fires, so nothing is shown as next.
    const off = await saveOk(f, {
      workflow_id: workflow.id,
      wf_params: { name: 'Orders', is_active: false },
      step_params: STEPS,
      trigger_params: [{ id: nightly.id, key: 'nightly', type: 'schedule', cron: '0 30 2 * * *', timezone: 'Europe/Berlin' }],
    });
    assert.equal(off.workflow.attributes.triggers[0].next_fire_at, null);
  });

  it('refuses a bad cron, an unknown time zone and a change of type, with their pointers', async () => {
    const P = '/data/attributes/trigger_params';
    const cases: Array<[unknown, string]> = [
      [{ key: 's', type: 'schedule', cron: '* * *' }, `${P}/0/cron`],
      [{ key: 's', type: 'schedule', cron: '0 0 31 2 *' }, `${P}/0/cron`],
      [{ key: 's', type: 'schedule', cron: '* * * * *', timezone: 'Europe/Atlantis' }, `${P}/0/timezone`],
      [{ key: 's', type: 'schedule', cron: '* * * * *', catch_up: 'all' }, `${P}/0/catch_up`],
      [{ key: 's', type: 'schedule', cron: '* * * * *', service_account_id: f.tenant.credentialId }, `${P}/0/service_account_id`],
    ];
    for (const [trigger, pointer] of cases) {
      const r = await save(f, { step_params: STEPS, trigger_params: [trigger] });
      assert.equal(r.status, 422, r.text);
      assert.equal(r.body.errors[0].source.pointer, pointer, r.text);
    }
    const { workflow } = await saveOk(f, { step_params: STEPS });
    const hookId = workflow.attributes.triggers[0].id;
    const r = await save(f, {
      workflow_id: workflow.id,
      step_params: STEPS,
      trigger_params: [{ id: hookId, key: 'hook', type: 'schedule', cron: '* * * * *' }],
    });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, `${P}/0/type`);
  });
});

describe('firing', () => {
  it('makes one run per tick between two processes, with trigger_key and {scheduled_at, fired_at}', async () => {
    const { workflow } = await saveOk(f, { step_params: STEPS, trigger_params: [{ key: 'minutely', type: 'schedule', cron: '* * * * *' }] });
    const since = await savedAnHourAgo(workflow.id);
    const t0 = Math.ceil((since + 1) / MINUTE) * MINUTE; // the first tick after the save
    const a = process(since);
    const b = process(since);

    // Both try the tick at once: one run.
    await Promise.all([a.pass(t0 + 5), b.pass(t0 + 7)]);
    assert.equal(await count(workflow.id), 1);
    // Again, and a pass before any new tick: nothing more.
    await a.pass(t0 + 20_000);
    await b.pass(t0 + 30_000);
    assert.equal(await count(workflow.id), 1);
    // Three minutes later (a late pass, both processes running all along): each tick once.
    await Promise.all([a.pass(t0 + 3 * MINUTE + 50), b.pass(t0 + 3 * MINUTE + 10)]);
    assert.equal(await count(workflow.id), 4);

    const runs = await runsOf(workflow.id);
    assert.deepEqual(
      scheduledAts(runs),
      [0, 1, 2, 3].map((i) => iso(t0 + i * MINUTE)),
    );
    for (const r of runs) {
      assert.equal(r.trigger_key, 'minutely');
      assert.equal(r.workflow_version, 1);
      assert.deepEqual(Object.keys(r.payload).sort(), ['fired_at', 'scheduled_at']);
      assert.ok(Date.parse(r.payload.fired_at) >= Date.parse(r.payload.scheduled_at));
      // Its facts are the tick's: the trigger and the tick make the source identity.
      assert.equal(r.source_identity, `tick:${workflow.attributes.triggers[0].id}:${r.payload.scheduled_at}`);
    }
    // The run as the API shows it, executed by the worker.
    const done = await waitForRun(f, runs[0]!.id);
    assert.equal(done.attributes.status, 'succeeded', JSON.stringify(done.attributes));
    assert.equal(done.attributes.trigger_key, 'minutely');
    assert.equal(done.attributes.delivery_id, null);
    assert.equal(done.attributes.delivery_headers, null, 'no delivery made it');
    assert.deepEqual(done.attributes.steps[0].output, { at: runs[0]!.payload.scheduled_at, by: 'minutely', delivery: 'null' });
  });

  it('catches up the latest missed tick only (latest), or none (none)', async () => {
    const { workflow } = await saveOk(f, {
      step_params: STEPS,
      trigger_params: [
        { key: 'latest', type: 'schedule', cron: '* * * * *' },
        { key: 'none', type: 'schedule', cron: '* * * * *', catch_up: 'none' },
      ],
    });
    const since = await savedAnHourAgo(workflow.id);
    const t0 = Math.ceil((since + 1) / MINUTE) * MINUTE;
    const first = process(since);
    await first.pass(t0 + 1);
    assert.equal(await count(workflow.id), 2); // the tick at t0, once per trigger
    // No process ran for ten minutes; one starts half a minute after a tick.
    const restart = t0 + 10 * MINUTE + 30_000;
    const second = process(restart);
    await second.pass(restart);
    assert.equal(await count(workflow.id), 3);
    let runs = await runsOf(workflow.id);
    assert.deepEqual(
      runs.map((r) => [r.trigger_key, r.payload.scheduled_at]).sort(),
      [
        ['latest', iso(t0)],
        ['none', iso(t0)],
        ['latest', iso(t0 + 10 * MINUTE)],
      ].sort(),
    );
    // The next tick fires for both.
    await second.pass(t0 + 11 * MINUTE + 2);
    runs = await runsOf(workflow.id);
    assert.equal(runs.filter((r) => r.payload.scheduled_at === iso(t0 + 11 * MINUTE)).length, 2);
  });

  it('stops firing when the workflow is deactivated, and does not catch up the inactive time', async () => {
    const trigger = { key: 'tick', type: 'schedule', cron: '* * * * *' };
    const { workflow } = await saveOk(f, { step_params: STEPS, trigger_params: [trigger] });
    const id = workflow.attributes.triggers[0].id;
    const since = await savedAnHourAgo(workflow.id);
    const t0 = Math.ceil((since + 1) / MINUTE) * MINUTE;
    const p = process(since);
    await p.pass(t0);
    assert.equal(await count(workflow.id), 1);

    await saveOk(f, { workflow_id: workflow.id, wf_params: { name: 'Orders', is_active: false }, step_params: STEPS, trigger_params: [{ id, ...trigger }] });
    // A process that has not loaded since still holds the schedule: the statement refuses the tick.
    assert.ok(p.state.watched.has(id));
    await schedulePass({ ...p.deps, clock: () => t0 + MINUTE }, p.state, new Date(t0 + MINUTE));
    await p.pass(t0 + 2 * MINUTE);
    assert.ok(!p.state.watched.has(id));
    assert.equal(await count(workflow.id), 1);

    await saveOk(f, { workflow_id: workflow.id, wf_params: { name: 'Orders', is_active: true }, step_params: STEPS, trigger_params: [{ id, ...trigger }] });
    // As if it had been activated again ten and a half minutes after t0 (the save counts from its own clock).
    const activated = t0 + 10 * MINUTE + 30_000;
    await f.t.deps.db
      .updateTable('workflow_triggers')
      .set({ schedule_since: new Date(activated) })
      .where('id', '=', id)
      .execute();
    // The ticks while it was inactive are not missed ones: not even the latest (t0 + 10 min) is caught up.
    await p.pass(t0 + 12 * MINUTE + 1);
    const next = nextTick({ cron: '* * * * *', timezone: 'UTC' }, new Date(activated))!.getTime();
    assert.equal(next, t0 + 11 * MINUTE);
    const runs = await runsOf(workflow.id);
    assert.deepEqual(scheduledAts(runs), [iso(t0), iso(next), iso(next + MINUTE)]);
  });
});

describe('ticks', () => {
  const at = (s: string) => new Date(s);
  const isos = (ds: Date[]) => ds.map((d) => d.toISOString());

  it('reads the cron in its time zone, seconds included', () => {
    const berlin = { cron: '30 6 * * 1-5', timezone: 'Europe/Berlin' };
    // 2026-11-27 is a Friday; the next weekday after it is Monday the 30th.
    assert.equal(nextTick(berlin, at('2026-11-27T04:00:00Z'))?.toISOString(), '2026-11-27T05:30:00.000Z');
    assert.equal(nextTick(berlin, at('2026-11-27T05:30:00Z'))?.toISOString(), '2026-11-30T05:30:00.000Z');
    assert.equal(latestTick(berlin, at('2026-11-27T05:30:00Z'))?.toISOString(), '2026-11-27T05:30:00.000Z', 'at or before');
    const seconds = { cron: '*/20 * * * * *', timezone: 'UTC' };
    assert.deepEqual(isos(ticksBetween(seconds, at('2026-01-01T00:00:00Z'), at('2026-01-01T00:01:00Z'), 10)), [
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
    assert.equal(ticksBetween(seconds, at('2026-01-01T00:00:00Z'), at('2026-01-02T00:00:00Z'), 5).length, 5);
  });

  it('tries the ticks after prev, and of older unfired ones the latest (latest) or none (none)', () => {
    const row = {
      id: 'x',
      workspace_id: 'w',
      cron: '* * * * *',
      timezone: 'UTC',
      schedule_since: at('2026-01-01T00:00:30Z'),
      last_tick_at: at('2026-01-01T00:05:00Z'),
    };
    const prev = at('2026-01-01T00:10:30Z');
    const now = at('2026-01-01T00:12:10Z');
    const w = (r: ScheduleRow, behind = true) => ({ row: r, prev, next: null, behind });
    assert.deepEqual(isos(dueTicks(w({ ...row, catch_up: 'latest' }), now)), [
      '2026-01-01T00:10:00.000Z',
      '2026-01-01T00:11:00.000Z',
      '2026-01-01T00:12:00.000Z',
    ]);
    // A process that has kept up (not behind) does not look before prev.
    assert.deepEqual(isos(dueTicks(w({ ...row, catch_up: 'latest' }, false), now)), ['2026-01-01T00:11:00.000Z', '2026-01-01T00:12:00.000Z']);
    assert.deepEqual(isos(dueTicks(w({ ...row, catch_up: 'none' }), now)), ['2026-01-01T00:11:00.000Z', '2026-01-01T00:12:00.000Z']);
    // Nothing before the schedule's since, nothing at or before the last fired tick.
    const fresh = { ...row, catch_up: 'latest' as const, last_tick_at: null, schedule_since: at('2026-01-01T00:11:30Z') };
    assert.deepEqual(isos(dueTicks(w(fresh), now)), ['2026-01-01T00:12:00.000Z']);
    assert.deepEqual(isos(dueTicks(w({ ...row, catch_up: 'latest', last_tick_at: at('2026-01-01T00:12:00Z') }), now)), []);
  });
});

describe('the loop', () => {
  it('fires a schedule every second while it runs, and stops', async () => {
    const { workflow } = await saveOk(f, { step_params: STEPS, trigger_params: [{ key: 'each_second', type: 'schedule', cron: '* * * * * *' }] });
    const loop = startSchedules(f.t.deps);
    const deadline = Date.now() + 20_000;
    while ((await count(workflow.id)) < 3) {
      assert.ok(Date.now() < deadline, 'three runs within 20 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await loop.stop();
    // Deactivated, so that the passes of the other tests do not fire it.
    await saveOk(f, {
      workflow_id: workflow.id,
      wf_params: { name: 'Orders', is_active: false },
      step_params: STEPS,
      trigger_params: [{ id: workflow.attributes.triggers[0].id, key: 'each_second', type: 'schedule', cron: '* * * * * *' }],
    });
    const ticks = scheduledAts(await runsOf(workflow.id)).map((s) => Date.parse(s));
    assert.equal(new Set(ticks).size, ticks.length);
    for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 1000, 'one run for each second, none skipped');
  });
});
