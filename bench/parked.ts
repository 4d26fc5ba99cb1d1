/**
 * `node bench/parked.ts`: what parked runs cost (issue 36 item 10). A workflow `delay` 1h
 * then a transform; BENCH_PARKED runs parked on its delay (default 100,000 on PostgreSQL,
 * 10,000 on PGlite); then:
 *
 * - rows and bytes: pg_total_relation_size (table, TOAST and indexes) of workflow_runs and
 *   run_waits, before and after, and per parked run;
 * - the worker's CPU while they wait: process.cpuUsage() (every thread of this process: the
 *   worker, and with PGlite the database) and, on a local PostgreSQL, its backends' CPU over
 *   BENCH_IDLE_SECONDS (default 10), once with no parked run and once with all of them;
 * - resuming them: the worker's clock is moved past the delay (deps.clock, as the tests do),
 *   and the worker resumes every run to its end: resumes/s (from the move to the last
 *   finished_at) and CPU per resumed run.
 *
 * One run is taken to its park by the worker first; the others are copies of its row made
 * by SQL in batches (a new id, delivery id and payload each), so they are parked exactly as
 * the worker parks a run (status 'waiting', resume_at = run_at, checkpoint.parked, no
 * lease), without spending the minutes the worker would take to park 100,000.
 * Settings: BENCH_ENGINES (default "pglite,postgres"), BENCH_DATABASE_URL or DATABASE_URL,
 * BENCH_PARKED, BENCH_PARKED_PGLITE, BENCH_IDLE_SECONDS.
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Db } from '../src/db/connect.ts';
import { uuidv7 } from '../src/ids.ts';
import { startWorker } from '../src/worker/worker.ts';
import {
  backendMicros,
  benchEnv,
  ENGINES,
  exchangeToken,
  intEnv,
  postgresCpuProbe,
  runApp,
  saveWebhookWorkflow,
  seedTenant,
  watchdog,
  withEngine,
  type Engine,
} from './common.ts';

const PARKED_PG = intEnv('BENCH_PARKED', 100_000, 10, 1_000_000);
const PARKED_PGLITE = intEnv('BENCH_PARKED_PGLITE', Math.min(PARKED_PG, 10_000), 10, 1_000_000);
const IDLE_S = intEnv('BENCH_IDLE_SECONDS', 10, 1, 600);
const BATCH = 10_000;
const HOUR = 3_600_000;

const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(', ');

async function sizes(db: Db): Promise<{ runs: number; waits: number; rows: number }> {
  const { rows } = await sql<{ runs: string; waits: string; rows: number }>`
    select pg_total_relation_size('workflow_runs') as runs, pg_total_relation_size('run_waits') as waits,
      (select count(*)::int from workflow_runs) as rows`.execute(db);
  return { runs: Number(rows[0]!.runs), waits: Number(rows[0]!.waits), rows: rows[0]!.rows };
}

/** CPU of this process (every thread) and of the local PostgreSQL backends over a window. */
async function cpuOver(db: Db, engine: Engine, body: () => Promise<void>): Promise<{ procUs: number; dbUs: number | undefined; wallMs: number }> {
  const probe = engine === 'postgres' ? postgresCpuProbe(db) : undefined;
  const db0 = await probe?.();
  const p0 = process.cpuUsage();
  const t0 = performance.now();
  await body();
  const p = process.cpuUsage(p0);
  const wallMs = performance.now() - t0;
  return { procUs: p.user + p.system, dbUs: backendMicros(db0, await probe?.()), wallMs };
}

const unfinished = async (db: Db) =>
  (await sql<{ n: number }>`select count(*)::int as n from workflow_runs where status in ('queued', 'retrying', 'waiting', 'running')`.execute(db)).rows[0]!.n;

async function one(engine: Engine): Promise<void> {
  const n = engine === 'postgres' ? PARKED_PG : PARKED_PGLITE;
  await withEngine(
    engine,
    { prefix: 'tributary_bench_parked', vars: (dir) => benchEnv(dir), skipped: (note) => console.log(`${engine}: ${note}`) },
    async (run) => {
      const { deps, url, close } = await runApp(run);
      const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
      const bearer = await exchangeToken(url, cred.client_id, cred.client_secret);
      const steps = [
        { key: 'pause', type: 'delay', config: { duration: '"1h"' } },
        { key: 'after', type: 'transform', config: { expression: 'payload.n' } },
      ];
      const { workflowId } = await saveWebhookWorkflow(url, bearer, { name: 'Parked', organizationId: org.id, serviceAccountId: cred.id, steps });
      // Only the worker runs from here: the idle figures are the worker's, not an idle HTTP server's.
      await close();

      let offset = 0;
      const clock = () => Date.now() + offset;
      const worker = startWorker({ ...deps, clock });
      try {
        const templateId = uuidv7();
        const now = new Date();
        await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at)
        values (${templateId}, ${org.id}, ${ws.id}, ${workflowId}, 1, 'hook', 'p-template', '{"n": -1}'::jsonb, 5, ${now}, ${now}, ${now})`.execute(deps.db);
        for (const deadline = Date.now() + 30_000; ; await sleep(20)) {
          const { rows } = await sql<{ status: string }>`select status from workflow_runs where id = ${templateId}`.execute(deps.db);
          if (rows[0]!.status === 'waiting') break;
          if (Date.now() > deadline) throw new Error(`the first run did not park: ${rows[0]!.status}`);
        }
        await sleep(1500);
        const idleEmpty = await cpuOver(deps.db, engine, () => sleep(IDLE_S * 1000));
        const before = await sizes(deps.db);

        // Every column of the parked row, but for the ones that make a run its own.
        const { rows: cols } = await sql<{ name: string }>`select column_name as name from information_schema.columns
        where table_schema = current_schema() and table_name = 'workflow_runs' order by ordinal_position`.execute(deps.db);
        const own = new Set(['id', 'delivery_id', 'payload', 'source_identity']);
        const copied = cols.map((c) => c.name).filter((c) => !own.has(c));
        const list = sql.raw(['id', 'delivery_id', 'payload', 'source_identity', ...copied].map((c) => `"${c}"`).join(', '));
        const fromTemplate = sql.raw(copied.map((c) => `t."${c}"`).join(', '));
        const t0 = performance.now();
        for (let i = 0; i < n; i += BATCH) {
          const k = Math.min(BATCH, n - i);
          const ids = Array.from({ length: k }, () => uuidv7());
          const nums = Array.from({ length: k }, (_, j) => i + j);
          await sql`insert into workflow_runs (${list})
          select u.id, 'p-' || u.n, jsonb_build_object('n', u.n), 'p-' || u.n, ${fromTemplate}
          from workflow_runs as t, unnest(${ids}::uuid[], ${nums}::int[]) as u(id, n) where t.id = ${templateId}`.execute(deps.db);
        }
        const insertS = (performance.now() - t0) / 1000;
        console.log(`  ${engine}: ${n} parked by SQL in ${insertS.toFixed(1)} s; measuring the idle worker`);
        // As autovacuum would after such an insert: the claim's plans see the table as it is.
        await sql`analyze workflow_runs`.execute(deps.db);
        const after = await sizes(deps.db);
        const { rows: rowBytes } = await sql<{ b: number }>`select avg(pg_column_size(r.*))::int as b from workflow_runs as r where status = 'waiting'`.execute(
          deps.db,
        );
        const { rows: held } = await sql<{
          n: number;
        }>`select count(*)::int as n from workflow_runs where status = 'waiting' and locked_by is not null`.execute(deps.db);

        await sleep(1500);
        const idleParked = await cpuOver(deps.db, engine, () => sleep(IDLE_S * 1000));
        const inFlightParked = worker.inFlight();

        // Resume: the worker's clock goes past the hour; it claims them at its next poll.
        const total = n + 1;
        let movedAt = 0;
        const resume = await cpuOver(deps.db, engine, async () => {
          offset = HOUR + 60_000;
          movedAt = clock();
          for (let tick = 0, deadline = Date.now() + 600_000; ; tick++, await sleep(1000)) {
            const left = await unfinished(deps.db);
            if (left === 0) break;
            if (tick % 10 === 9) console.log(`  ${engine}: ${total - left} of ${total} resumed after ${tick + 1} s`);
            if (Date.now() > deadline) throw new Error(`${left} runs unfinished after 600 s`);
          }
        });
        const { rows: fin } = await sql<{ ok: number; last: Date; attempts: number }>`
        select count(*) filter (where status = 'succeeded')::int as ok, max(finished_at) as last,
          count(*) filter (where attempt <> 1)::int as attempts from workflow_runs`.execute(deps.db);
        if (fin[0]!.ok !== total) throw new Error(`${total - fin[0]!.ok} runs did not succeed`);
        const resumeS = (new Date(fin[0]!.last).getTime() - movedAt) / 1000;

        const ms = (us: number | undefined, s: number) => (us === undefined ? 'n/a' : `${(us / 1000 / s).toFixed(2)} ms/s`);
        const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MiB`;
        const r = {
          engine,
          parked: n,
          insertSeconds: Number(insertS.toFixed(1)),
          rows: after.rows,
          runsBytes: [before.runs, after.runs],
          waitsBytes: [before.waits, after.waits],
          bytesPerRun: Math.round((after.runs + after.waits - before.runs - before.waits) / n),
          avgRowBytes: rowBytes[0]!.b,
          leasesHeld: held[0]!.n,
          inFlightWhileParked: inFlightParked,
          idleEmpty: {
            procMsPerS: idleEmpty.procUs / 1000 / (idleEmpty.wallMs / 1000),
            dbMsPerS: idleEmpty.dbUs && idleEmpty.dbUs / 1000 / (idleEmpty.wallMs / 1000),
          },
          idleParked: {
            procMsPerS: idleParked.procUs / 1000 / (idleParked.wallMs / 1000),
            dbMsPerS: idleParked.dbUs && idleParked.dbUs / 1000 / (idleParked.wallMs / 1000),
          },
          resumeSeconds: Number(resumeS.toFixed(1)),
          resumesPerS: Math.round(total / resumeS),
          procUsPerResume: Math.round(resume.procUs / total),
          dbUsPerResume: resume.dbUs === undefined ? undefined : Math.round(resume.dbUs / total),
          attemptsSpent: fin[0]!.attempts,
        };
        console.log(`${engine}: ${n} parked (inserted in ${r.insertSeconds} s), ${r.rows} rows`);
        console.log(
          `  workflow_runs ${mb(after.runs)} (was ${mb(before.runs)}), run_waits ${mb(after.waits)} (was ${mb(before.waits)}); ${r.bytesPerRun} B per parked run (row ${r.avgRowBytes} B)`,
        );
        console.log(`  leases held while parked: ${r.leasesHeld}, worker slots in use: ${r.inFlightWhileParked}`);
        console.log(
          `  idle ${IDLE_S} s, none parked: process ${ms(idleEmpty.procUs, idleEmpty.wallMs / 1000)}, PostgreSQL ${ms(idleEmpty.dbUs, idleEmpty.wallMs / 1000)}`,
        );
        console.log(
          `  idle ${IDLE_S} s, ${n} parked: process ${ms(idleParked.procUs, idleParked.wallMs / 1000)}, PostgreSQL ${ms(idleParked.dbUs, idleParked.wallMs / 1000)}`,
        );
        console.log(
          `  resume: ${total} in ${r.resumeSeconds} s = ${r.resumesPerS} resumes/s; process ${r.procUsPerResume} µs CPU per resume` +
            (r.dbUsPerResume === undefined ? '' : `, PostgreSQL ${r.dbUsPerResume} µs`) +
            `; runs with a second attempt: ${r.attemptsSpent}`,
        );
        console.log(`RESULT ${JSON.stringify(r)}`);
      } finally {
        await worker.stop(1000);
      }
    },
  );
}

watchdog('bench/parked', 1_500_000);
console.log(`${new Date().toISOString()}  uptime: ${loadAverage()}  cores: ${os.availableParallelism()}`);
for (const engine of ['pglite', 'postgres'] as const) {
  if (!ENGINES.includes(engine)) continue;
  await one(engine);
  console.log(`  (load now ${loadAverage()})`);
}
process.exit(0);
