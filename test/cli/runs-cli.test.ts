/** `tributary runs list|show|replay` against a running server with the worker. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { runCli } from '../helpers/cli.ts';
import { createModel, deliver, saveOk, startFlow, waitForRun } from '../webhooks/helpers.ts';

const f = await startFlow();
await createModel(f, 'pings', [{ name: 'ping_id', type: 'string' }]);
const { tokens, workflow } = await saveOk(f, {
  step_params: [{ key: 'store', type: 'write_fact', config: { data_model_slug: 'pings', mapping: { ping_id: 'payload.id' } } }],
});
const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, JSON.stringify({ id: 'p-1' }));
const original = await waitForRun(f, d.body.workflow_run_id);

const cli = (args: string[]) => runCli(['--url', f.t.url, '--admin-token', f.t.adminToken, ...args], { ...process.env, NO_COLOR: '1' });

it('lists runs, newest first, narrowed by workspace, workflow and status', async () => {
  const r = await cli(['--json', 'runs', 'list', '--workspace', f.tenant.workspaceId, '--workflow', workflow.id, '--status', 'succeeded']);
  assert.equal(r.code, 0, r.stderr);
  const page = JSON.parse(r.stdout);
  assert.deepEqual(
    page.data.map((x: any) => x.id),
    [original.id],
  );
  assert.equal(page.has_more, false);
  assert.ok(!('locked_by' in page.data[0]), 'no queue columns');
  const human = await cli(['runs', 'list', '--workspace', f.tenant.workspaceId]);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, new RegExp(`${original.id}.*succeeded +completed +1 +1 `));
  assert.match(human.stdout.split('\n')[0]!, /^id +workflow +workflow_version +trigger_key +status +outcome +attempt +facts_written/);
  // The workflow by its name, from the same answer: no lookup per run.
  assert.match(human.stdout, new RegExp(`${original.id}  Orders +1 +hook +succeeded`));
  assert.equal(page.data[0].workflow_name, 'Orders');
  assert.ok(human.stdout.endsWith('\n'));
  const completed = JSON.parse((await cli(['--json', 'runs', 'list', '--workflow', workflow.id, '--outcome', 'completed'])).stdout);
  assert.deepEqual(
    completed.data.map((x: any) => [x.id, x.outcome, x.facts_written]),
    [[original.id, 'completed', 1]],
  );
  const dead = JSON.parse((await cli(['--json', 'runs', 'list', '--workflow', workflow.id, '--outcome', 'dead_letter'])).stdout);
  assert.deepEqual(dead.data, []);
  const badOutcome = await cli(['--json', 'runs', 'list', '--outcome', 'done']);
  assert.notEqual(badOutcome.code, 0);
  assert.match(badOutcome.stdout, /outcome must be one of completed, stopped_at_condition, failed, dead_letter/);
  const bad = await cli(['--json', 'runs', 'list', '--status', 'done']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr + bad.stdout, /status must be one of/);
});

it('shows a run with its steps, and replays it', async () => {
  const show = await cli(['--json', 'runs', 'show', original.id]);
  assert.equal(show.code, 0, show.stderr);
  const run = JSON.parse(show.stdout);
  assert.equal(run.status, 'succeeded');
  assert.deepEqual(run.payload, { id: 'p-1' });
  assert.equal(run.steps[0].key, 'store');
  assert.equal(run.workflow_name, 'Orders');
  for (const internal of ['locked_by', 'locked_until', 'source_identity', 'lease_losses', 'delivery_headers']) assert.ok(!(internal in run), internal);
  const human = await cli(['runs', 'show', original.id]);
  assert.equal(human.code, 0, human.stderr);
  const lines = human.stdout.split('\n');
  assert.equal(lines[0], `run ${original.id}: succeeded (completed)`);
  assert.equal(lines[1], `workflow: Orders (${workflow.id}), version 1`);
  assert.equal(lines[2], `trigger: hook, delivery ${run.delivery_id}`);
  assert.ok(lines.includes('facts written: 1'), human.stdout);
  const stepsAt = lines.indexOf('steps:');
  assert.ok(stepsAt > 0, human.stdout);
  assert.match(lines[stepsAt + 1]!, /^ {2}1\. store {2}succeeded {2}\d+(\.\d)? m?s$/);
  assert.ok(human.stdout.endsWith('\n'));
  assert.doesNotMatch(human.stdout, /locked_by|source_identity|lease_losses|"key":/);
  const replay = await cli(['--json', 'runs', 'replay', original.id]);
  assert.equal(replay.code, 0, replay.stderr);
  const created = JSON.parse(replay.stdout);
  assert.equal(created.replay_of, original.id);
  const done = await waitForRun(f, created.id);
  assert.equal(done.attributes.status, 'succeeded');
  const missing = await cli(['--json', 'runs', 'show', '00000000-0000-7000-8000-000000000000']);
  assert.notEqual(missing.code, 0);
});

it('tributary worker refuses on PGlite and says why', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete env.DATABASE_URL;
  const r = await runCli(['worker'], env);
  assert.equal(r.code, 78, r.stdout + r.stderr);
  assert.match(r.stderr, /DATABASE_URL must be set for `tributary worker`: embedded PGlite belongs to one process/);
});
