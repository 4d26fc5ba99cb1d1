/**
 * `tributary runs cancel`: a waiting run (parked on a delay) and a queued one end cancelled and
 * never run; a running or finished run is refused with 409, an unknown id 404. `runs list
 * --status waiting` lists the parked run, `runs show` says when it resumes.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import { sql } from 'kysely';
import { runCli } from '../helpers/cli.ts';
import { deliver, saveOk, startFlow } from '../webhooks/helpers.ts';

const f = await startFlow({ WORKER_POLL_MS: '20' });
const { tokens, workflow } = await saveOk(f, {
  step_params: [
    { key: 'pause', type: 'delay', config: { duration: '"1h"' } },
    { key: 'after', type: 'transform', config: { expression: '1' } },
  ],
});
const db = f.t.deps.db;
const cli = (args: string[]) => runCli(['--url', f.t.url, '--admin-token', f.t.adminToken, ...args], { ...process.env, NO_COLOR: '1' });
const row = (id: string) => db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

async function parkedRun(): Promise<string> {
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ id: randomUUID() }));
  assert.equal(d.status, 202, d.text);
  const id: string = d.body.workflow_run_id;
  const deadline = Date.now() + 20_000;
  while ((await row(id)).status !== 'waiting') {
    assert.ok(Date.now() < deadline, 'the run parks on its delay');
    await new Promise((r) => setTimeout(r, 20));
  }
  return id;
}

/** A run of the workflow in this state, made by hand: the worker never claims it (a queued one runs in a day). */
async function seeded(status: 'queued' | 'running' | 'succeeded'): Promise<string> {
  const id = randomUUID();
  await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, status, outcome,
      inserted_at, updated_at, run_at, finished_at)
    values (${id}, ${f.tenant.organizationId}, ${f.tenant.workspaceId}, ${workflow.id}, 1, 'hook', '{}'::jsonb, ${status},
      ${status === 'succeeded' ? 'completed' : null}, now(), now(), now() + interval '1 day', ${status === 'succeeded' ? sql`now()` : null})`.execute(db);
  return id;
}

it('cancels a waiting run: cancelled, its wait skipped, never resumed; runs list --status waiting and runs show say it waits', async () => {
  const id = await parkedRun();
  const listed = await cli(['--json', 'runs', 'list', '--workflow', workflow.id, '--status', 'waiting']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.ok(
    JSON.parse(listed.stdout).data.some((r: { id: string }) => r.id === id),
    listed.stdout,
  );
  const shown = await cli(['runs', 'show', id]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, new RegExp(`^run ${id}: waiting$`, 'm'));
  assert.match(shown.stdout, /^resumes at: \d{4}-\d\d-\d\dT.*\(at the latest; it waits\)$/m);

  const r = await cli(['--json', 'runs', 'cancel', id]);
  assert.equal(r.code, 0, r.stderr);
  const run = JSON.parse(r.stdout);
  assert.equal(run.id, id);
  assert.equal(run.status, 'cancelled');
  assert.equal(run.outcome, 'cancelled');
  assert.equal(run.resume_at, null);
  assert.deepEqual(
    run.steps.map((s: { key: string; status: string; reason?: string }) => [s.key, s.status, s.reason]),
    [['pause', 'skipped', 'run cancelled']],
  );
  const stored = await row(id);
  assert.equal(stored.status, 'cancelled');
  assert.ok(stored.finished_at !== null);
  // Due now: a worker that could still resume it would claim it within a few polls.
  await sql`update workflow_runs set run_at = now() where id = ${id}`.execute(db);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await row(id)).status, 'cancelled', 'a cancelled run never resumes');
});

it('cancels a queued run and prints it as runs show does', async () => {
  const id = await seeded('queued');
  const r = await cli(['runs', 'cancel', id]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^run ${id}: cancelled \\(cancelled\\)$`, 'm'));
  assert.ok(r.stdout.endsWith('\n'));
  assert.equal((await row(id)).status, 'cancelled');
});

it('refuses a running or finished run (409) and an unknown one (404), changing nothing', async () => {
  for (const status of ['running', 'succeeded'] as const) {
    const id = await seeded(status);
    const r = await cli(['--json', 'runs', 'cancel', id]);
    assert.equal(r.code, 1, r.stdout);
    const err = JSON.parse(r.stdout);
    assert.equal(err.status, 409);
    assert.match(err.error, new RegExp(`The run is ${status}`));
    assert.equal((await row(id)).status, status);
  }
  const human = await cli(['runs', 'cancel', await seeded('running')]);
  assert.equal(human.code, 1);
  assert.match(human.stderr, /cancel it once it waits/);
  const missing = await cli(['--json', 'runs', 'cancel', randomUUID()]);
  assert.equal(missing.code, 1);
  assert.equal(JSON.parse(missing.stdout).status, 404);
  const usage = await cli(['runs', 'cancel']);
  assert.equal(usage.code, 2);
});
