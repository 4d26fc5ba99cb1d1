/**
 * `node bench/fair.ts`: noisy neighbours (issue 34 item 1), on the engine the environment
 * names (DATABASE_URL: PostgreSQL, else PGlite), in this process:
 * - claims: workspace B's run start delay (started_at - inserted_at) for 20 deliveries,
 *   quiet and behind workspace A's backlog of 10,000 ready runs (WORKER_CONCURRENCY 16);
 * - schedules: B's every-second schedule's lateness (inserted_at - scheduled_at) and its
 *   first run after its save, quiet and beside A's 2,000 every-second schedules;
 * - on PostgreSQL, EXPLAIN (ANALYZE, BUFFERS) of the claim's selection before (order by
 *   run_at) and after (per-workspace share), with the 10,000-run backlog, rolled back.
 * Prints markdown; writes nothing.
 */
import { sql } from 'kysely';
import { jsonApi, seedTenant, startApp, tokenFor, type TestApp } from '../test/helpers/app.ts';
import { startSchedules } from '../src/worker/schedules.ts';
import { FIRST_WORKSPACE } from '../src/runs/queue.sql.ts';

const API = '/api/json/v1';
const STEPS = [{ key: 'echo', type: 'transform', config: { expression: 'payload' } }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function tenant(t: TestApp) {
  const tn = await seedTenant(t.deps);
  const api = jsonApi(t, await tokenFor(t, tn));
  const save = async (trigger_params: unknown[]) => {
    const r = await api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: tn.organizationId,
          wf_params: { name: 'W', is_active: true },
          step_params: STEPS,
          trigger_params,
        },
      },
    });
    if (r.status !== 201) throw new Error(r.text);
    return { id: r.body.data.id as string, tokens: (r.body.meta?.trigger_tokens ?? {}) as Record<string, string> };
  };
  return { tn, save, bearer: await tokenFor(t, tn) };
}

function stats(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] ?? NaN;
  return `n ${s.length}, p50 ${q(0.5).toFixed(0)} ms, p99 ${q(0.99).toFixed(0)} ms, max ${(s.at(-1) ?? NaN).toFixed(0)} ms`;
}

async function deliveries(t: TestApp, b: Awaited<ReturnType<typeof tenant>>, token: string, n: number): Promise<number[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${t.url}/api/v1/webhooks/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${b.bearer}` },
      body: JSON.stringify({ i, at: Date.now() }),
    });
    const body = (await res.json()) as { data?: { id?: string }; meta?: { run_id?: string } };
    ids.push((body.meta?.run_id ?? body.data?.id)!);
    await sleep(200);
  }
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await sql<{ d: number | null }>`select extract(epoch from (started_at - inserted_at)) * 1000 as d
      from workflow_runs where workspace_id = ${b.tn.workspaceId} and started_at is not null`.execute(t.deps.db);
    if (rows.length >= n || Date.now() > deadline) return rows.map((r) => Number(r.d));
    await sleep(200);
  }
}

async function claims(engine: string): Promise<string[]> {
  const out: string[] = [];
  const t = await startApp({ WORKER_CONCURRENCY: '16', RUN_RETRY_SCHEDULE: '20ms' }, { worker: true });
  try {
    const quietB = await tenant(t);
    const qb = await quietB.save([{ key: 'hook', type: 'webhook', service_account_id: quietB.tn.credentialId }]);
    out.push(`- ${engine}, claims, quiet: B's run start delay ${stats(await deliveries(t, quietB, qb.tokens.hook!, 20))}`);
    await t.worker!.stop(5000);
    const a = await tenant(t);
    const aw = await a.save([{ key: 'hook', type: 'webhook', service_account_id: a.tn.credentialId }]);
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at)
      select gen_random_uuid(), ${a.tn.organizationId}, ${a.tn.workspaceId}, ${aw.id}, 1, 'hook', jsonb_build_object('i', i), 3, now() - interval '1 hour', now(), now()
      from generate_series(1, 10000) as i`.execute(t.deps.db);
    // And 10,000 finished ones: the claim's index must skip them.
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at, status, outcome, finished_at)
      select gen_random_uuid(), ${a.tn.organizationId}, ${a.tn.workspaceId}, ${aw.id}, 1, 'hook', '{}'::jsonb, 3, now() - interval '2 hours', now() - interval '2 hours', now(), 'succeeded', 'completed', now()
      from generate_series(1, 10000) as i`.execute(t.deps.db);
    if (engine === 'postgres') out.push(...(await explainClaims(t, a.tn.workspaceId)));
    const { startWorker } = await import('../src/worker/worker.ts');
    const w = startWorker(t.deps);
    const floodB = await tenant(t);
    const fb = await floodB.save([{ key: 'hook', type: 'webhook', service_account_id: floodB.tn.credentialId }]);
    out.push(`- ${engine}, claims, behind A's 10,000: B's run start delay ${stats(await deliveries(t, floodB, fb.tokens.hook!, 20))}`);
    const left = await sql<{
      n: string;
    }>`select count(*) as n from workflow_runs where workspace_id = ${a.tn.workspaceId} and status in ('queued', 'retrying')`.execute(t.deps.db);
    out.push(`  (A's runs still waiting at the end: ${left.rows[0]!.n})`);
    await w.stop(5000);
  } finally {
    await t.close();
  }
  return out;
}

async function explainClaims(t: TestApp, aWorkspace: string): Promise<string[]> {
  const b = await tenant(t);
  const bw = await b.save([{ key: 'hook', type: 'webhook', service_account_id: b.tn.credentialId }]);
  await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, payload, max_attempts, run_at, inserted_at, updated_at)
    values (gen_random_uuid(), ${b.tn.organizationId}, ${b.tn.workspaceId}, ${bw.id}, 1, 'hook', '{}'::jsonb, 3, now(), now(), now())`.execute(t.deps.db);
  await sql`analyze workflow_runs`.execute(t.deps.db);
  const now = new Date(Date.now() + 1000);
  const limit = 256;
  const before = sql<{ 'QUERY PLAN': string }>`explain (analyze, buffers) select id from workflow_runs
    where status in ('queued', 'retrying') and run_at <= ${now} order by run_at, id limit ${limit} for update skip locked`;
  const after = sql<{ 'QUERY PLAN': string }>`explain (analyze, buffers)
    with recursive ready(workspace_id) as (
      (select workspace_id from workflow_runs where status in ('queued', 'retrying') and run_at <= ${now} order by workspace_id, run_at limit 1)
      union all
      select (select q.workspace_id from workflow_runs as q
              where q.status in ('queued', 'retrying') and q.run_at <= ${now} and q.workspace_id > ready.workspace_id order by q.workspace_id, q.run_at limit 1)
      from ready where ready.workspace_id is not null
    ), picked as (
      select workspace_id from ready where workspace_id is not null order by workspace_id <= ${FIRST_WORKSPACE}::uuid, workspace_id limit ${limit}
    ), share as (select greatest(1, ${limit}::int / greatest(count(*), 1)::int) as n from picked),
    claim as (
      select c.id from picked as p cross join lateral (
        select q.id from workflow_runs as q
        where q.workspace_id = p.workspace_id and q.status in ('queued', 'retrying') and q.run_at <= ${now}
        order by q.run_at, q.id limit (select n from share) for update skip locked) as c
    )
    select id from claim`;
  const out: string[] = [];
  for (const [name, q] of [
    ['before', before],
    ['after', after],
  ] as const) {
    const plan: string[] = [];
    await t.deps.db
      .transaction()
      .execute(async (trx) => {
        plan.push(...(await q.execute(trx)).rows.map((r) => r['QUERY PLAN']));
        throw new Error('rollback');
      })
      .catch((err: Error) => {
        if (err.message !== 'rollback') throw err;
      });
    out.push('', `EXPLAIN ${name} (A ${aWorkspace.slice(0, 8)}: 10,000 ready and 10,000 finished; B: 1 ready; limit ${limit}):`, '```', ...plan, '```');
  }
  await sql`delete from workflow_runs where workspace_id = ${b.tn.workspaceId}`.execute(t.deps.db);
  return out;
}

async function schedules(engine: string): Promise<string[]> {
  const out: string[] = [];
  const t = await startApp({ WORKER_CONCURRENCY: '64' }, { worker: true });
  const loop = startSchedules(t.deps);
  try {
    const measureB = async (label: string) => {
      const b = await tenant(t);
      const saved = Date.now();
      const w = await b.save([{ key: 'b', type: 'schedule', cron: '* * * * * *' }]);
      await sleep(20_000);
      const { rows } = await sql<{
        s: string;
        i: Date;
      }>`select payload->>'scheduled_at' as s, inserted_at as i from workflow_runs where workflow_id = ${w.id}`.execute(t.deps.db);
      const late = rows.map((r) => new Date(r.i).getTime() - Date.parse(r.s));
      const first = Math.min(...rows.map((r) => new Date(r.i).getTime())) - saved;
      out.push(`- ${engine}, schedules, ${label}: B's first run ${first} ms after its save; lateness ${stats(late)} (20 s: ${rows.length} runs)`);
      await sql`update workflows set is_active = false where id = ${w.id}`.execute(t.deps.db);
    };
    await measureB('quiet');
    const a = await tenant(t);
    const aw = await a.save([{ key: 's1', type: 'schedule', cron: '* * * * * *' }]);
    await sql`insert into workflow_triggers (id, workflow_id, organization_id, workspace_id, key, type, cron, timezone, catch_up, schedule_since, inserted_at, updated_at)
      select gen_random_uuid(), t.workflow_id, t.organization_id, t.workspace_id, 's' || i, 'schedule', t.cron, t.timezone, 'latest', t.schedule_since, t.inserted_at, t.updated_at
      from workflow_triggers as t, generate_series(2, 2000) as i where t.workflow_id = ${aw.id}`.execute(t.deps.db);
    await sleep(3000);
    await measureB("beside A's 2,000 every-second schedules");
    const aRuns = await sql<{ n: string }>`select count(*) as n from workflow_runs where workflow_id = ${aw.id}`.execute(t.deps.db);
    out.push(`  (A's runs made meanwhile: ${aRuns.rows[0]!.n})`);
    await sql`update workflows set is_active = false where id = ${aw.id}`.execute(t.deps.db);
  } finally {
    await loop.stop();
    await t.close();
  }
  return out;
}

const engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';
const parts = (process.env.BENCH_PARTS ?? 'claims,schedules').split(',');
const lines: string[] = [];
if (parts.includes('claims')) lines.push(...(await claims(engine)));
if (parts.includes('schedules')) lines.push(...(await schedules(engine)));
console.log(lines.join('\n'));
process.exit(0);
