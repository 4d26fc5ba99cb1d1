/**
 * Replay that repairs: one run on its original or the workflow's current version, and
 * bulk replay by the list's filters (POST /workflow_runs/replay), within the caller's
 * workspace, finished runs only, at most 1,000 per call.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { adminCall, assertJsonApiError, jsonApi, seedTenant, tokenFor } from '../helpers/app.ts';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';

const BULK = `${API}/workflow_runs/replay`;

describe('replaying one run', async () => {
  const f = await startFlow();
  const v1 = await saveOk(f, { step_params: [{ key: 'old_step', type: 'transform', config: { expression: '"v1"' } }] });
  const run1 = await waitForRun(f, (await deliver(f, `/api/v1/webhooks/${v1.tokens.hook}`, '{"n":1}')).body.workflow_run_id);
  // The worker on this branch may not record a source identity: set one the replay must carry.
  await sql`update workflow_runs set source_identity = 'delivery:abc' where id = ${run1.id}`.execute(f.t.deps.db);
  const v2 = await saveOk(f, {
    workflow_id: v1.workflow.id,
    is_new_version: true,
    step_params: [{ key: 'new_step', type: 'transform', config: { expression: '"v2"' } }],
    trigger_params: v1.workflow.attributes.triggers,
  });
  assert.equal(v2.workflow.attributes.version, 2);
  const replay = (body?: unknown) => f.api.post(`${API}/workflow_runs/${run1.id}/replay`, body);
  const sourceOf = async (id: string) =>
    (await sql<{ source_identity: string | null }>`select source_identity from workflow_runs where id = ${id}`.execute(f.t.deps.db)).rows[0]!.source_identity;

  it('runs on the original version without a body, and with meta.version "original"', async () => {
    for (const body of [undefined, { meta: { version: 'original' } }, { meta: {} }]) {
      const r = await replay(body);
      assert.equal(r.status, 201, r.text);
      const done = await waitForRun(f, r.body.data.id);
      assert.equal(done.attributes.workflow_version, 1);
      assert.equal(done.attributes.replay_of, run1.id);
      assert.equal(done.attributes.trigger_key, 'hook');
      assert.deepEqual(done.attributes.payload, { n: 1 });
      assert.deepEqual(
        done.attributes.steps.map((s: any) => [s.key, s.output]),
        [['old_step', 'v1']],
      );
      assert.equal(await sourceOf(done.id), 'delivery:abc');
    }
  });

  it('runs on the current version with meta.version "current"', async () => {
    const r = await replay({ meta: { version: 'current' } });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.body.data.attributes.workflow_version, 2);
    const done = await waitForRun(f, r.body.data.id);
    assert.equal(done.attributes.status, 'succeeded');
    assert.deepEqual(
      done.attributes.steps.map((s: any) => [s.key, s.output]),
      [['new_step', 'v2']],
    );
    assert.deepEqual(done.attributes.payload, { n: 1 });
    assert.equal(await sourceOf(done.id), 'delivery:abc');
  });

  it('a null source identity stays null', async () => {
    await sql`update workflow_runs set source_identity = null where id = ${run1.id}`.execute(f.t.deps.db);
    const r = await replay({ meta: { version: 'current' } });
    assert.equal(r.status, 201, r.text);
    assert.equal(await sourceOf(r.body.data.id), null);
  });

  it('refuses any other body with 422 at the member', async () => {
    const cases: Array<[unknown, string]> = [
      [{ meta: { version: 'latest' } }, '/meta/version'],
      [{ meta: { version: 2 } }, '/meta/version'],
      [{ meta: { limit: 5 } }, '/meta/limit'],
      [{ meta: { version: 'current', extra: true } }, '/meta/extra'],
      [{ meta: 'current' }, '/meta'],
      [{ data: { type: 'workflow_run' } }, '/data'],
      [[], ''],
      ['null', ''],
    ];
    for (const [body, pointer] of cases) assertJsonApiError(await replay(body), 422, 'invalid_request', { pointer });
  });

  it("a bulk replay's runs are run by the worker, here on the current version", async () => {
    const fresh = await waitForRun(f, (await deliver(f, `/api/v1/webhooks/${v1.tokens.hook}`, '{"n":9}')).body.workflow_run_id);
    assert.ok(fresh.attributes.delivery_id);
    const r = await f.api.post(`${BULK}?filter[delivery_id]=${encodeURIComponent(fresh.attributes.delivery_id)}`, { meta: { version: 'current' } });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.body.meta, { replayed: 1, has_more: false });
    const done = await waitForRun(f, r.body.data[0].id);
    assert.equal(done.attributes.status, 'succeeded');
    assert.equal(done.attributes.replay_of, fresh.id);
    assert.equal(done.attributes.workflow_version, 2);
    assert.deepEqual(done.attributes.payload, { n: 9 });
    assert.deepEqual(
      done.attributes.steps.map((s: any) => [s.key, s.output]),
      [['new_step', 'v2']],
    );
  });

  it("another workspace's run is 404", async () => {
    const other = await seedTenant(f.t.deps);
    const api = jsonApi(f.t, await tokenFor(f.t, other));
    assertJsonApiError(await api.post(`${API}/workflow_runs/${run1.id}/replay`, { meta: { version: 'current' } }), 404, 'not_found');
  });
});

/** Finished (and unfinished) runs inserted in SQL: the worker is off, so replays stay queued and are counted as made. */
async function seedRuns(
  f: Flow,
  workflowId: string,
  rows: number,
  opts: { trigger: string; status?: string; outcome?: string | null; at?: string; stepSeconds?: number; source?: string | null },
): Promise<string[]> {
  const r = await sql<{ id: string }>`
    insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, status, outcome, source_identity,
      inserted_at, updated_at, run_at, finished_at)
    select gen_random_uuid(), ${f.tenant.organizationId}, ${f.tenant.workspaceId}, ${workflowId}, 1, ${opts.trigger}, jsonb_build_object('i', g),
      ${opts.status ?? 'failed'}, ${opts.outcome === undefined ? 'failed' : opts.outcome}, ${opts.source ?? null},
      t, t, t, case when ${opts.status ?? 'failed'} in ('succeeded', 'failed') then t + interval '1 second' end
    from generate_series(1, ${rows}::int) as g,
      lateral (select ${opts.at ?? '2026-01-01T00:00:00Z'}::timestamptz + g * ${opts.stepSeconds ?? 1} * interval '1 second' as t) as x
    returning id`.execute(f.t.deps.db);
  return r.rows.map((x) => x.id);
}

describe('bulk replay', async () => {
  const f = await startFlow({}, { worker: false });
  const { workflow } = await saveOk(f, { step_params: [{ key: 'noop', type: 'transform', config: { expression: '1' } }] });
  const other = await saveOk(f, {
    wf_params: { name: 'Other', is_active: true },
    step_params: [{ key: 'noop', type: 'transform', config: { expression: '2' } }],
    trigger_params: [{ key: 'hook2', type: 'webhook', service_account_id: f.tenant.credentialId }],
  });
  const db = f.t.deps.db;
  const bulk = (query: string, body?: unknown, headers?: Record<string, string>) => f.api.post(`${BULK}?${query}`, body, headers);
  const replaysOf = async (ids: string[]) =>
    (
      await sql<{
        replay_of: string;
        n: number;
      }>`select replay_of, count(*)::int as n from workflow_runs where replay_of = any(${ids}::uuid[]) group by replay_of`.execute(db)
    ).rows;

  it('replays 500 failed runs: a limit and has_more, then the rest, each once, oldest first', async () => {
    const ids = await seedRuns(f, workflow.id, 500, { trigger: 'bulk', source: 'tick:1' });
    const first = await bulk(`filter[status]=failed&filter[trigger_key]=bulk`, { meta: { limit: 200 } });
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.body.meta, { replayed: 200, has_more: true });
    assert.equal(first.body.data.length, 200);
    assert.ok(first.body.data.every((d: any) => d.type === 'workflow_run'));
    const made = await sql<any>`select id, replay_of, status, workflow_version, trigger_key, payload, source_identity, max_attempts from workflow_runs
      where id = any(${first.body.data.map((d: any) => d.id)}::uuid[])`.execute(db);
    const byId = new Map(made.rows.map((r) => [r.id, r]));
    // The answer lists the new runs in the order of their originals: the oldest 200.
    assert.deepEqual(
      first.body.data.map((d: any) => byId.get(d.id).replay_of),
      ids.slice(0, 200),
    );
    const sample = byId.get(first.body.data[7].id);
    assert.equal(sample.status, 'queued');
    assert.equal(sample.workflow_version, 1);
    assert.equal(sample.trigger_key, 'bulk');
    assert.deepEqual(sample.payload, { i: 8 });
    assert.equal(sample.source_identity, 'tick:1');

    const rest = await bulk(`filter[status]=failed&filter[trigger_key]=bulk`);
    assert.equal(rest.status, 201, rest.text);
    assert.deepEqual(rest.body.meta, { replayed: 300, has_more: false });
    const counts = await replaysOf(ids);
    assert.equal(counts.length, 500);
    assert.ok(counts.every((c) => c.n === 1));

    const again = await bulk(`filter[status]=failed&filter[trigger_key]=bulk`);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body.meta, { replayed: 0, has_more: false });
    assert.deepEqual(again.body.data, []);
  });

  it("10 concurrent bulk replays (and the admin's) replay each original once; a replay of one run later still makes another", async () => {
    const ids = await seedRuns(f, workflow.id, 300, { trigger: 'twice', at: '2026-01-15T00:00:00Z' });
    // A double click, many times over: the same call ten times at once, and the admin's replay of every workspace beside them.
    const calls = await Promise.all([
      ...Array.from({ length: 10 }, () => bulk('filter[status]=failed&filter[trigger_key]=twice')),
      adminCall(f.t, 'POST', '/runs/replay', { trigger_key: 'twice' }),
    ]);
    for (const c of calls) assert.ok(c.status === 200 || c.status === 201, c.text);
    // The JSON:API answers in meta, the admin API in data.
    const made = calls.map((c) => (c.body.meta ?? c.body.data).replayed as number);
    assert.equal(
      made.reduce((a, b) => a + b, 0),
      300,
      `replayed per call: ${made.join(', ')}`,
    );
    const counts = await replaysOf(ids);
    assert.equal(counts.length, 300);
    assert.deepEqual(
      counts.filter((c) => c.n !== 1),
      [],
    );
    // Bulk replay leaves a replayed run out; replaying it on its own is deliberate and still works.
    const one = await f.api.post(`${API}/workflow_runs/${ids[0]}/replay`, undefined);
    assert.equal(one.status, 201, one.text);
    assert.deepEqual(
      (await replaysOf([ids[0]!])).map((c) => c.n),
      [2],
    );
  });

  it('makes at most 1,000 per call', async () => {
    const ids = await seedRuns(f, workflow.id, 1003, { trigger: 'cap', at: '2026-02-01T00:00:00Z' });
    const first = await bulk('filter[trigger_key]=cap');
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.body.meta, { replayed: 1000, has_more: true });
    const second = await bulk('filter[trigger_key]=cap', { meta: { limit: 1000 } });
    assert.deepEqual(second.body.meta, { replayed: 3, has_more: false });
    assert.equal((await replaysOf(ids)).length, 1003);
    assertJsonApiError(await bulk('filter[trigger_key]=cap', { meta: { limit: 1001 } }), 422, 'invalid_request', { pointer: '/meta/limit' });
    assertJsonApiError(await bulk('filter[trigger_key]=cap', { meta: { limit: 0 } }), 422, 'invalid_request', { pointer: '/meta/limit' });
  });

  it('the filters narrow it: status, outcome, trigger_key, time ranges, workflow; unfinished runs never', async () => {
    const at = '2026-03-01T00:00:00Z';
    const dead = await seedRuns(f, workflow.id, 3, { trigger: 'narrow', outcome: 'dead_letter', at });
    const failed = await seedRuns(f, workflow.id, 3, { trigger: 'narrow', outcome: 'failed', at: '2026-03-02T00:00:00Z' });
    const succeeded = await seedRuns(f, workflow.id, 2, { trigger: 'narrow', status: 'succeeded', outcome: 'completed', at: '2026-03-03T00:00:00Z' });
    const queued = await seedRuns(f, workflow.id, 2, { trigger: 'narrow', status: 'queued', outcome: null, at });
    const running = await seedRuns(f, workflow.id, 2, { trigger: 'narrow', status: 'running', outcome: null, at });
    const elsewhere = await seedRuns(f, other.workflow.id, 2, { trigger: 'narrow', at: '2026-03-04T00:00:00Z' });
    const replayed = async (query: string) => {
      const r = await bulk(query);
      assert.ok(r.status === 200 || r.status === 201, r.text);
      return (
        await sql<{ replay_of: string }>`select replay_of from workflow_runs where id = any(${r.body.data.map((d: any) => d.id)}::uuid[])`.execute(db)
      ).rows
        .map((x) => x.replay_of)
        .sort();
    };
    assert.deepEqual(await replayed('filter[trigger_key]=narrow&filter[status]=queued'), []);
    assert.deepEqual(await replayed(`filter[trigger_key]=narrow&filter[outcome]=dead_letter`), [...dead].sort());
    assert.deepEqual(await replayed(`filter[workflow_id]=${other.workflow.id}`), [...elsewhere].sort());
    // Inserted 2026-03-02T00:00:01..03: the second one only.
    assert.deepEqual(await replayed(`filter[trigger_key]=narrow&filter[inserted_at][gte]=2026-03-02T00:00:02Z&filter[inserted_at][lt]=2026-03-02T00:00:03Z`), [
      failed[1]!,
    ]);
    // Finished a second after insertion: 2026-03-02T00:00:04 is the third.
    assert.deepEqual(await replayed(`filter[trigger_key]=narrow&filter[finished_at][gte]=2026-03-02T00:00:04Z&filter[status]=failed`), [failed[2]!]);
    assert.deepEqual(await replayed(`filter[trigger_key]=narrow&filter[status]=succeeded`), [...succeeded].sort());
    assert.deepEqual(await replayed(`filter[trigger_key]=narrow`), [failed[0]!]);
    assert.deepEqual(await replaysOf([...queued, ...running]), []);
  });

  it('needs at least one filter, and only filter[...] parameters', async () => {
    assertJsonApiError(await bulk(''), 422, 'invalid_request', { parameter: 'filter' });
    assertJsonApiError(await bulk('', { meta: { version: 'current' } }), 422, 'invalid_request', { parameter: 'filter' });
    assertJsonApiError(await bulk('filter[status]=failed&sort=-inserted_at'), 400, 'invalid_query', { parameter: 'sort' });
    assertJsonApiError(await bulk('filter[status]=failed&page[limit]=5'), 400, 'invalid_query', { parameter: 'page[limit]' });
    assertJsonApiError(await bulk('filter[payload]=x'), 400, 'invalid_query', { parameter: 'filter[payload]' });
    assertJsonApiError(await bulk('filter[status]=done'), 400, 'invalid_query', { parameter: 'filter[status]' });
    assertJsonApiError(await bulk('filter[status]=failed', { meta: { version: 'v2' } }), 422, 'invalid_request', { pointer: '/meta/version' });
    assertJsonApiError(await bulk('filter[status]=failed', { meta: { versions: 'current' } }), 422, 'invalid_request', { pointer: '/meta/versions' });
    assertJsonApiError(await bulk('filter[status]=failed', { filter: {} }), 422, 'invalid_request', { pointer: '/filter' });
  });

  it('runs on the current version with meta.version "current"', async () => {
    const v2 = await saveOk(f, {
      workflow_id: workflow.id,
      is_new_version: true,
      step_params: [{ key: 'noop', type: 'transform', config: { expression: '3' } }],
      trigger_params: workflow.attributes.triggers,
    });
    assert.equal(v2.workflow.attributes.version, 2);
    await seedRuns(f, workflow.id, 4, { trigger: 'versions', at: '2026-04-01T00:00:00Z' });
    const r = await bulk('filter[trigger_key]=versions', { meta: { version: 'current', limit: 2 } });
    assert.deepEqual(r.body.meta, { replayed: 2, has_more: true });
    const rest = await bulk('filter[trigger_key]=versions', { meta: { version: 'original' } });
    const versions = async (ids: string[]) =>
      (await sql<{ workflow_version: number }>`select workflow_version from workflow_runs where id = any(${ids}::uuid[])`.execute(db)).rows.map(
        (x) => x.workflow_version,
      );
    assert.deepEqual(await versions(r.body.data.map((d: any) => d.id)), [2, 2]);
    assert.deepEqual(await versions(rest.body.data.map((d: any) => d.id)), [1, 1]);
  });

  it("stays in the caller's workspace, needs api_write, and honours Idempotency-Key", async () => {
    const ids = await seedRuns(f, workflow.id, 3, { trigger: 'scoped', at: '2026-05-01T00:00:00Z' });
    const stranger = await seedTenant(f.t.deps);
    const strangerApi = jsonApi(f.t, await tokenFor(f.t, stranger));
    const foreign = await strangerApi.post(`${BULK}?filter[workflow_id]=${workflow.id}`, undefined);
    assert.equal(foreign.status, 200, foreign.text);
    assert.deepEqual(foreign.body.meta, { replayed: 0, has_more: false });
    const reader = jsonApi(f.t, await tokenFor(f.t, f.tenant, 'api_read'));
    assertJsonApiError(await reader.post(`${BULK}?filter[trigger_key]=scoped`, undefined), 403, 'forbidden');
    assert.deepEqual(await replaysOf(ids), []);

    const key = { 'idempotency-key': 'bulk-replay-1' };
    const once = await bulk('filter[trigger_key]=scoped', { meta: { limit: 2 } }, key);
    assert.equal(once.status, 201, once.text);
    const twice = await bulk('filter[trigger_key]=scoped', { meta: { limit: 2 } }, key);
    assert.equal(twice.status, 201, twice.text);
    assert.equal(twice.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(twice.body, once.body);
    assert.equal((await replaysOf(ids)).length, 2);
    assertJsonApiError(await bulk('filter[trigger_key]=scoped', { meta: { limit: 3 } }, key), 409, 'idempotency_key_reused');
  });
});
