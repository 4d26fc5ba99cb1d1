/** `tributary runs replay`: one run by id (on its own or the current version), or every finished run the filters match. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { adminCall } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';
import { saveOk, startFlow } from '../webhooks/helpers.ts';

// No worker: the replays stay queued, so what a command made is what the database holds.
const f = await startFlow({}, { worker: false });
const { workflow } = await saveOk(f, { step_params: [{ key: 'noop', type: 'transform', config: { expression: '1' } }] });
await saveOk(f, {
  workflow_id: workflow.id,
  is_new_version: true,
  step_params: [{ key: 'noop', type: 'transform', config: { expression: '2' } }],
  trigger_params: workflow.attributes.triggers,
});
const db = f.t.deps.db;

const cli = (args: string[]) => runCli(['--url', f.t.url, '--admin-token', f.t.adminToken, ...args], { ...process.env, NO_COLOR: '1' });

/** Finished runs of version 1 inserted `agoSeconds` before now, one second apart. */
async function seedRuns(rows: number, opts: { trigger: string; status?: string; outcome?: string; agoSeconds?: number }): Promise<string[]> {
  const r = await sql<{ id: string }>`
    insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, status, outcome,
      inserted_at, updated_at, run_at, finished_at)
    select gen_random_uuid(), ${f.tenant.organizationId}, ${f.tenant.workspaceId}, ${workflow.id}, 1, ${opts.trigger}, '{}'::jsonb,
      ${opts.status ?? 'failed'}, ${opts.outcome ?? 'failed'}, t, t, t, t
    from generate_series(1, ${rows}::int) as g,
      lateral (select now() - ${opts.agoSeconds ?? 86_400} * interval '1 second' + g * interval '1 second' as t) as x
    returning id`.execute(db);
  return r.rows.map((x) => x.id);
}

const replaysOf = async (ids: string[]) =>
  (
    await sql<{ id: string; replay_of: string; workflow_version: number }>`select id, replay_of, workflow_version from workflow_runs
    where replay_of = any(${ids}::uuid[]) order by replay_of`.execute(db)
  ).rows;

it('replays one run on its own version, or on the current one with --workflow-version current', async () => {
  const [original] = await seedRuns(1, { trigger: 'one' });
  const r = await cli(['--json', 'runs', 'replay', original!]);
  assert.equal(r.code, 0, r.stderr);
  const created = JSON.parse(r.stdout);
  assert.equal(created.replay_of, original);
  assert.equal(created.workflow_version, 1);
  const current = await cli(['--json', 'runs', 'replay', original!, '--workflow-version', 'current']);
  assert.equal(current.code, 0, current.stderr);
  assert.equal(JSON.parse(current.stdout).workflow_version, 2);
  assert.equal((await replaysOf([original!])).length, 2);
});

it('replays the runs that match the filters, at most --limit, and says how many', async () => {
  const ids = await seedRuns(3, { trigger: 'many' });
  const since = new Date(Date.now() - 2 * 86_400_000).toISOString();
  const until = new Date(Date.now() + 60_000).toISOString();
  const base = ['runs', 'replay', '--status', 'failed', '--workflow', workflow.id, '--trigger', 'many', '--since', since, '--until', until];
  const first = await cli(['--json', ...base, '--workspace', f.tenant.workspaceId, '--limit', '2', '--workflow-version', 'current']);
  assert.equal(first.code, 0, first.stderr);
  const doc = JSON.parse(first.stdout);
  assert.equal(doc.replayed, 2);
  assert.equal(doc.has_more, true);
  assert.equal(doc.run_ids.length, 2);
  const made = await replaysOf(ids);
  assert.deepEqual(made.map((m) => m.id).sort(), [...doc.run_ids].sort());
  assert.ok(made.every((m) => m.workflow_version === 2));
  const human = await cli([...base, '--limit', '1']);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /^replayed 1 run$/m);
  assert.ok(human.stdout.endsWith('\n'), 'the last line ends with a newline');
  assert.doesNotMatch(human.stdout, /more runs matched/);
  const none = await cli(base);
  assert.equal(none.code, 0, none.stderr);
  assert.match(none.stdout, /^replayed 0 runs$/m);
  assert.equal((await replaysOf(ids)).length, 3);
});

it('narrows by outcome and by a relative --since', async () => {
  const dead = await seedRuns(2, { trigger: 'outcomes', outcome: 'dead_letter' });
  const plain = await seedRuns(2, { trigger: 'outcomes', outcome: 'failed' });
  const r = await cli(['--json', 'runs', 'replay', '--outcome', 'dead_letter', '--trigger', 'outcomes']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).replayed, 2);
  assert.equal((await replaysOf(dead)).length, 2);
  assert.equal((await replaysOf(plain)).length, 0);

  const old = await seedRuns(2, { trigger: 'recent', agoSeconds: 3 * 3600 });
  const recent = await seedRuns(2, { trigger: 'recent', agoSeconds: 1800 });
  const rel = await cli(['--json', 'runs', 'replay', '--since', '2h', '--trigger', 'recent']);
  assert.equal(rel.code, 0, rel.stderr);
  assert.equal(JSON.parse(rel.stdout).replayed, 2);
  assert.equal((await replaysOf(recent)).length, 2);
  assert.equal((await replaysOf(old)).length, 0);
});

it('refuses a replay without a run id or a filter, or with both, and bad values', async () => {
  for (const args of [
    ['runs', 'replay'],
    ['runs', 'replay', '--workspace', f.tenant.workspaceId],
    ['runs', 'replay', '00000000-0000-7000-8000-000000000000', '--status', 'failed'],
    ['runs', 'replay', '--status', 'queued'],
    ['runs', 'replay', '00000000-0000-7000-8000-000000000000', '--workflow-version', 'latest'],
    ['runs', 'replay', '--status', 'failed', '--limit', '1001'],
  ]) {
    const r = await cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
  }
  const noFilter = await cli(['runs', 'replay']);
  assert.match(noFilter.stderr, /give a run id, or at least one of --workflow, --status/);
  const badTime = await cli(['--json', 'runs', 'replay', '--since', 'yesterday']);
  assert.equal(badTime.code, 1);
  assert.equal(JSON.parse(badTime.stdout).status, 422);
  assert.match(JSON.parse(badTime.stdout).error, /since must be an ISO 8601 date-time/);
  const missing = await cli(['--json', 'runs', 'replay', '00000000-0000-7000-8000-000000000000']);
  assert.equal(missing.code, 1);
  assert.equal(JSON.parse(missing.stdout).status, 404);
});

it('the admin route refuses an empty filter, unknown members and bad values with 422', async () => {
  const cases: Array<[unknown, string]> = [
    [{}, ''],
    [{ workspace_id: f.tenant.workspaceId, version: 'current' }, ''],
    [{ status: 'failed', colour: 'red' }, '/colour'],
    [{ status: 'running' }, '/status'],
    [{ outcome: 'done' }, '/outcome'],
    [{ status: 'failed', limit: 5000 }, '/limit'],
    [{ status: 'failed', version: 'latest' }, '/version'],
    [{ since: '2026-01-02T00:00:00Z', until: '2026-01-01T00:00:00Z' }, '/until'],
    [{ workflow_id: 'nope' }, '/workflow_id'],
  ];
  for (const [body, pointer] of cases) {
    const r = await adminCall(f.t, 'POST', '/runs/replay', body);
    assert.equal(r.status, 422, `${JSON.stringify(body)}: ${r.text}`);
    assert.deepEqual(r.body.errors[0].source, { pointer }, r.text);
  }
  const [original] = await seedRuns(1, { trigger: 'admin-one' });
  const bad = await adminCall(f.t, 'POST', `/runs/${original}/replay`, { versions: 'current' });
  assert.equal(bad.status, 422, bad.text);
  assert.deepEqual(bad.body.errors[0].source, { pointer: '/versions' });
  assert.equal((await replaysOf([original!])).length, 0);
});
