/**
 * `npm run bench:webhooks`: webhook ingestion and the workflow worker, each figure beside
 * its reference in the same run. Writes the "Webhooks and worker" section of
 * docs/benchmarks.md (the other sections are kept as they are).
 *
 * (a) Ingestion, worker off: POST /api/v1/webhooks/{token} with a bearer token, 50
 *     connections, every request a distinct Idempotency-Key (autocannon's `[<id>]`
 *     replacement), so every one is accepted and makes a run; then the same request with
 *     one fixed key (duplicates). The reference is a plain Fastify route on another port
 *     (no logger, none of our hooks) that parses the same JSON and runs BEGIN; INSERT the
 *     guard; INSERT the run; COMMIT on the same database (PostgreSQL: its own pg.Pool of the
 *     app's size, both INSERTs named prepared statements; PGlite: a Kysely transaction on the
 *     app's one connection). The reference is measured first and last; ratios are to the
 *     mean of the two. On PGlite and on PostgreSQL.
 * (b) The worker, PostgreSQL: N runs of a transform + condition + write_fact workflow queued
 *     by SQL, then startWorker() in this process; runs/s from its start to the last
 *     finished_at. Then deliveries through the endpoint at half that rate with the worker
 *     on: the delay from acceptance to the run's start (workflow_runs.started_at -
 *     inserted_at; inserted_at is read before the accepting INSERT, so this includes that
 *     statement and is an upper bound of "202 to start"), p50/p99.
 * (c) Memory, PostgreSQL: `tributary serve` (worker on) as a child process under deliveries
 *     at that same rate for BENCH_SUSTAIN_SECONDS; its RSS sampled every 10 s.
 *
 * Round trips are counted in this process by wrapping pg.Client#query (every call is one
 * round trip); the server thread's CPU by process.threadCpuUsage(); PostgreSQL's backends'
 * CPU from /proc when the server is local. autocannon runs in a worker thread.
 *
 * Settings (environment): BENCH_DATABASE_URL or DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres), BENCH_ENGINES (default "pglite,postgres"),
 * BENCH_DURATION (seconds per measured ingestion run, default 10), BENCH_CONNECTIONS
 * (default 50), BENCH_WORKER_RUNS (default 20000), WORKER_CONCURRENCY and
 * DATABASE_POOL_SIZE (passed to the app; defaults as configured), BENCH_LATENCY_SECONDS
 * (default 20), BENCH_SUSTAIN_SECONDS (default 300), BENCH_SUSTAIN_RATE (deliveries/s in (c);
 * default half the measured worker rate), BENCH_PARTS (default "a,b,c": which of the parts
 * to run), BENCH_NO_WRITE=1 (print only), BENCH_CPU_PROFILE=<file> (a CPU profile of the
 * server thread during one more pass of (a)'s accepted deliveries, outside the figures).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import { CompiledQuery, sql } from 'kysely';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config.ts';
import type { Deps } from '../src/deps.ts';
import { uuidv7 } from '../src/ids.ts';
import { startWorker } from '../src/worker/worker.ts';
import {
  benchEnv,
  cpuWindow,
  exchangeToken,
  fmt,
  freePort,
  intEnv,
  loadAverage as load,
  machineLine,
  measure,
  pct,
  postgresCpuProbe,
  postJsonApi,
  procKiB,
  ROOT,
  runBench,
  runApp,
  runHeading,
  saveWebhookWorkflow,
  seedTenant,
  stopChild,
  waitHealthy,
  watchdog,
  withEngine,
  writeSection,
  type DbCpuProbe,
  type Engine,
  type Measured,
} from './common.ts';

const DOC = path.join(ROOT, 'docs', 'benchmarks.md');
const MAIN = path.join(ROOT, 'src', 'main.ts');

const DURATION = intEnv('BENCH_DURATION', 10, 1, 120);
const WARMUP = 2;
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50, 1, 512);
const WORKER_RUNS = intEnv('BENCH_WORKER_RUNS', 20_000, 100, 2_000_000);
const LATENCY_SECONDS = intEnv('BENCH_LATENCY_SECONDS', 20, 2, 600);
const SUSTAIN_SECONDS = intEnv('BENCH_SUSTAIN_SECONDS', 300, 10, 7200);
const SUSTAIN_RATE = intEnv('BENCH_SUSTAIN_RATE', 0, 0, 100_000);
const SAMPLE_EVERY_S = 10;
const PARTS = new Set((process.env.BENCH_PARTS ?? 'a,b,c').split(',').map((x) => x.trim()));
/** Connections of the fixed-rate phases: plenty for the rate, far fewer than (a)'s. */
const RATE_CONNECTIONS = 16;
/** BENCH_CPU_PROFILE=<file>: a CPU profile of the server thread during an extra pass of (a)'s accepted deliveries, its top self time printed. */
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE;

const TARGET_RATIO = 1.0;
const TARGET_RUNS_PER_S = 1000;
const TARGET_START_P50_MS = 10;

const WATCHDOG_MS = (40 * 60 + SUSTAIN_SECONDS * 1.5 + LATENCY_SECONDS * 2) * 1000;

// ---------------------------------------------------------------------------------------
// Round trips: every pg.Client#query call of this process is one.

let roundTrips = 0;
const trips = () => roundTrips;
const originalQuery = pg.Client.prototype.query;
(pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (this: pg.Client, ...args: unknown[]) {
  roundTrips++;
  return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------
// Seeding: a tenant, a data model, a workflow with a webhook trigger.

const STEPS = [
  {
    key: 'shape',
    type: 'transform',
    config: { expression: '{"id": payload.order.id, "total": payload.order.total, "state": $lowercase(payload.order.state)}' },
  },
  { key: 'big_enough', type: 'condition', config: { expression: 'steps.shape.total != 0' } },
  {
    key: 'store',
    type: 'write_fact',
    config: {
      data_model_slug: 'orders',
      mapping: { order_id: 'steps.shape.id', amount: 'steps.shape.total', status: 'steps.shape.state' },
      observed_at: 'payload.at',
    },
  },
];

/** A delivery's body; `[<id>]` becomes a distinct id per request where autocannon replaces ids. */
export const deliveryBody = (id: string) => JSON.stringify({ payload: { at: '2026-11-01T10:00:00Z', order: { id: `o-${id}`, total: 12.5, state: 'OPEN' } } });

export interface Seeded {
  organizationId: string;
  workspaceId: string;
  workflowId: string;
  bearer: string;
  hookPath: string;
}

export async function seed(deps: Deps, appUrl: string): Promise<Seeded> {
  const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
  const bearer = await exchangeToken(appUrl, cred.client_id, cred.client_secret);
  const post = (p: string, body: unknown) => postJsonApi(appUrl, bearer, p, body);
  const model = await post('/data_models', { data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } } });
  const fields: Array<[string, string, boolean]> = [
    ['order_id', 'string', false],
    ['amount', 'float', true],
    ['status', 'string', false],
  ];
  for (const [i, [name, type, required]] of fields.entries()) {
    await post('/data_model_fields', {
      data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, name, type, is_primary_key: i === 0, is_required: required } },
    });
  }
  const { workflowId, token } = await saveWebhookWorkflow(appUrl, bearer, { name: 'Orders', organizationId: org.id, serviceAccountId: cred.id, steps: STEPS });
  return { organizationId: org.id, workspaceId: ws.id, workflowId, bearer, hookPath: `/api/v1/webhooks/${token}` };
}

// ---------------------------------------------------------------------------------------
// The reference: a plain Fastify route, BEGIN; INSERT; INSERT; COMMIT.

const GUARD_SQL = 'insert into delivery_guards (organization_id, delivery_key, run_id, inserted_at) values ($1, $2, $3, $4)';
const RUN_SQL =
  'insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at) ' +
  'values ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $10, $10)';

export async function bareServer(
  deps: Deps,
  seeded: Seeded,
  databaseUrl: string | undefined,
): Promise<{ app: FastifyInstance; url: string; close: () => Promise<void> }> {
  const app = Fastify({ logger: false });
  const pool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl, max: deps.config.databasePoolSize }) : undefined;
  pool?.on('error', () => undefined);
  const twoInserts = async (key: string, payloadJson: string): Promise<string> => {
    const runId = uuidv7();
    const now = new Date();
    const guard = [seeded.organizationId, `bare:${key}`, runId, now];
    const run = [runId, seeded.organizationId, seeded.workspaceId, seeded.workflowId, 1, 'hook', key, payloadJson, 5, now];
    if (pool) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query({ name: 'bench_bare_guard', text: GUARD_SQL, values: guard });
        await client.query({ name: 'bench_bare_run', text: RUN_SQL, values: run });
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    } else {
      await deps.db.transaction().execute(async (trx) => {
        await trx.executeQuery(CompiledQuery.raw(GUARD_SQL, guard));
        await trx.executeQuery(CompiledQuery.raw(RUN_SQL, run));
      });
    }
    return runId;
  };
  app.post('/bare/deliveries', async (request, reply) => {
    const key = String(request.headers['idempotency-key'] ?? uuidv7());
    const body = request.body as { payload?: unknown };
    const id = await twoInserts(key, JSON.stringify(body?.payload ?? body));
    return reply.code(202).send({ status: 'accepted', workflow_run_id: id });
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    app,
    url,
    close: async () => {
      await app.close();
      await pool?.end();
    },
  };
}

// ---------------------------------------------------------------------------------------
// (a) ingestion

type Row = Measured & { ratio?: number | undefined };

async function countRuns(deps: Deps): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from workflow_runs`.execute(deps.db);
  return rows[0]!.n;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/**
 * The inspector's sampling profiler on this thread (the server's; autocannon is in a worker
 * thread). The stop function writes the .cpuprofile and prints the top self time by function.
 */
async function startProfile(): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = (await session.post('Profiler.stop')) as unknown as {
      profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
    };
    session.disconnect();
    fs.writeFileSync(CPU_PROFILE!, JSON.stringify(profile));
    const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
    const self = new Map<string, number>();
    let total = 0;
    profile.samples.forEach((id, i) => {
      const n = byNode.get(id)!;
      const f = n.callFrame;
      const where = f.url === '' ? '' : ` ${f.url.replace(/^.*\/(node_modules\/|src\/|bench\/)/, '$1')}:${f.lineNumber + 1}`;
      const key = `${f.functionName || '(anonymous)'}${where}`;
      const dt = profile.timeDeltas[i] ?? 0;
      self.set(key, (self.get(key) ?? 0) + dt);
      total += dt;
    });
    const idle = self.get('(idle)') ?? 0;
    const busy = total - idle;
    console.log(`  cpu profile: ${CPU_PROFILE}; busy ${fmt(busy / 1000)} ms of ${fmt(total / 1000)} ms; top self time (share of busy):`);
    for (const [k, v] of [...self]
      .filter(([k]) => k !== '(idle)')
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)) {
      console.log(`    ${((v / busy) * 100).toFixed(1).padStart(5)}%  ${k}`);
    }
  };
}

async function ingestion(deps: Deps, appUrl: string, seeded: Seeded, bareUrl: string, probe: DbCpuProbe | undefined): Promise<Row[]> {
  const headers = { authorization: `Bearer ${seeded.bearer}`, 'content-type': 'application/json' };
  const distinct: Omit<autocannon.Options, 'url'> = {
    method: 'POST',
    headers: { ...headers, 'idempotency-key': 'bench-[<id>]' },
    body: deliveryBody('[<id>]'),
    idReplacement: true,
  };
  const accepted: autocannon.Options = { ...distinct, url: `${appUrl}${seeded.hookPath}` };
  const bare: autocannon.Options = { ...distinct, url: `${bareUrl}/bare/deliveries` };
  const dup: autocannon.Options = {
    method: 'POST',
    url: `${appUrl}${seeded.hookPath}`,
    headers: { ...headers, 'idempotency-key': `bench-dup-${randomBytes(4).toString('hex')}` },
    body: deliveryBody('dup'),
  };
  // One discarded pass over each route, so what they share is warm before the first measurement.
  for (const o of [bare, accepted, dup]) await autocannon({ ...o, connections: CONNECTIONS, duration: WARMUP, workers: 1 });
  // `made`: the runs each measured run made.
  const settings = { connections: CONNECTIONS, warmup: WARMUP, duration: DURATION, probe, trips, made: () => countRuns(deps) };
  const bareFirst = await measure('bare BEGIN; 2 INSERTs; COMMIT, plain Fastify (first)', bare, settings);
  const acc = await measure('POST /api/v1/webhooks/{token}, distinct keys (accepted)', accepted, settings);
  if (CPU_PROFILE !== undefined) {
    // A pass of its own: the profiler's cost stays out of the measured figures.
    const stop = await startProfile();
    await autocannon({ ...accepted, connections: CONNECTIONS, duration: DURATION, workers: 1 });
    await stop();
  }
  const dupRow = await measure('POST /api/v1/webhooks/{token}, one key (duplicate)', dup, settings);
  const bareLast = await measure('bare BEGIN; 2 INSERTs; COMMIT, plain Fastify (last)', bare, settings);
  const ref = (bareFirst.rps + bareLast.rps) / 2;
  return [bareFirst, acc, dupRow, bareLast].map((r) => ({ ...r, ratio: ref > 0 ? r.rps / ref : undefined }));
}

// ---------------------------------------------------------------------------------------
// (b) the worker

interface WorkerReport {
  concurrency: number;
  runs: number;
  seconds: number;
  runsPerS: number;
  succeeded: number;
  facts: number;
  cpuUsPerRun: number;
  dbCpuUsPerRun: number | undefined;
  tripsPerRun: number;
  otherLoad: number | undefined;
}

/** N runs queued by SQL, in batches, as the webhook surface would leave them. */
export async function queueRuns(deps: Deps, seeded: Seeded, n: number): Promise<void> {
  const now = new Date();
  for (let from = 0; from < n; from += 2000) {
    const count = Math.min(2000, n - from);
    const ids: string[] = [];
    const payloads: string[] = [];
    const keys: string[] = [];
    for (let i = 0; i < count; i++) {
      const k = `q-${from + i}`;
      ids.push(uuidv7());
      keys.push(k);
      payloads.push(JSON.stringify(JSON.parse(deliveryBody(k)).payload));
    }
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at)
      select u.id, ${seeded.organizationId}, ${seeded.workspaceId}, ${seeded.workflowId}, 1, 'hook', u.k, u.p::jsonb, 5, ${now}, ${now}, ${now}
      from unnest(${ids}::uuid[], ${keys}::text[], ${payloads}::text[]) as u(id, k, p)`.execute(deps.db);
  }
}

async function unfinished(deps: Deps): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from workflow_runs where status in ('queued', 'retrying', 'running')`.execute(deps.db);
  return rows[0]!.n;
}

async function waitDrained(deps: Deps, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await unfinished(deps)) === 0) return;
    if (Date.now() > deadline) throw new Error(`runs still unfinished after ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

async function resetRuns(deps: Deps): Promise<void> {
  await sql`truncate workflow_runs, delivery_guards`.execute(deps.db);
  await sql`vacuum analyze workflow_runs`.execute(deps.db);
  await sql`vacuum analyze delivery_guards`.execute(deps.db);
}

async function workerThroughput(deps: Deps, seeded: Seeded, probe: DbCpuProbe | undefined): Promise<WorkerReport> {
  await resetRuns(deps);
  const factsBefore = Number((await sql<{ n: number }>`select count(*)::int as n from facts`.execute(deps.db)).rows[0]!.n);
  await queueRuns(deps, seeded, WORKER_RUNS);
  await sql`analyze workflow_runs`.execute(deps.db);
  console.log(`\n  worker: ${fmt(WORKER_RUNS)} runs queued; WORKER_CONCURRENCY=${deps.config.workerConcurrency}`);
  const stop = await cpuWindow(probe, trips);
  const t0 = Date.now();
  const worker = startWorker(deps);
  // The bench's own polling is a few statements a second; they are subtracted from the round trips.
  let polls = 0;
  const deadline = Date.now() + 600_000;
  for (;;) {
    await sleep(100);
    polls++;
    if ((await unfinished(deps)) === 0) break;
    if (Date.now() > deadline) throw new Error('the worker did not finish within 10 minutes');
  }
  const w = await stop();
  await worker.stop(5000);
  const { rows } = await sql<{ last: Date; succeeded: number }>`
    select max(finished_at) as last, count(*) filter (where status = 'succeeded')::int as succeeded from workflow_runs`.execute(deps.db);
  const facts = Number((await sql<{ n: number }>`select count(*)::int as n from facts`.execute(deps.db)).rows[0]!.n) - factsBefore;
  const seconds = (new Date(rows[0]!.last).getTime() - t0) / 1000;
  const report: WorkerReport = {
    concurrency: deps.config.workerConcurrency,
    runs: WORKER_RUNS,
    seconds,
    runsPerS: WORKER_RUNS / seconds,
    succeeded: rows[0]!.succeeded,
    facts,
    cpuUsPerRun: w.threadMicros / WORKER_RUNS,
    dbCpuUsPerRun: w.dbMicros === undefined ? undefined : w.dbMicros / WORKER_RUNS,
    tripsPerRun: (w.trips - polls - 2) / WORKER_RUNS,
    otherLoad: w.otherLoad,
  };
  console.log(
    `  worker: ${fmt(report.runs)} runs in ${fmt(seconds, 1)} s = ${fmt(report.runsPerS)} runs/s (${fmt(report.succeeded)} succeeded, ${fmt(facts)} facts); ` +
      `${fmt(report.cpuUsPerRun)} us server CPU/run, PG ${fmt(report.dbCpuUsPerRun)} us/run, ${fmt(report.tripsPerRun, 2)} round trips/run, other load ${pct(report.otherLoad)}`,
  );
  return report;
}

interface LatencyReport {
  rate: number;
  seconds: number;
  sent: number;
  non2xx: number;
  errors: number;
  runs: number;
  clientP50: number;
  clientP99: number;
  startP50: number;
  startP99: number;
  startMax: number;
  finishP50: number;
  finishP99: number;
  otherLoad: number | undefined;
}

/** Deliveries to `baseUrl` at `rate`/s, each with its own Idempotency-Key under `prefix`. */
function atRate(baseUrl: string, seeded: Seeded, rate: number, prefix: string): autocannon.Options {
  return {
    url: `${baseUrl}${seeded.hookPath}`,
    method: 'POST',
    headers: { authorization: `Bearer ${seeded.bearer}`, 'content-type': 'application/json', 'idempotency-key': `${prefix}-[<id>]` },
    body: deliveryBody('[<id>]'),
    idReplacement: true,
    connections: RATE_CONNECTIONS,
    overallRate: rate,
    workers: 1,
    timeout: 10,
  };
}

/** Deliveries at `rate`/s with the worker on: the delay from acceptance to each run's start. */
async function startDelay(deps: Deps, appUrl: string, seeded: Seeded, rate: number, probe: DbCpuProbe | undefined): Promise<LatencyReport> {
  const worker = startWorker(deps);
  try {
    const opts = atRate(appUrl, seeded, rate, 'lat');
    await autocannon({ ...opts, duration: WARMUP });
    await waitDrained(deps, 120_000);
    await resetRuns(deps);
    const stop = await cpuWindow(probe, trips);
    const r = await autocannon({ ...opts, duration: LATENCY_SECONDS });
    const w = await stop();
    await waitDrained(deps, 120_000);
    const { rows } = await sql<{ n: number; s: number[]; smax: number; f: number[] }>`
      select count(*)::int as n,
             percentile_cont(array[0.5, 0.99]) within group (order by extract(epoch from started_at - inserted_at) * 1000) as s,
             max(extract(epoch from started_at - inserted_at) * 1000)::float8 as smax,
             percentile_cont(array[0.5, 0.99]) within group (order by extract(epoch from finished_at - inserted_at) * 1000) as f
      from workflow_runs`.execute(deps.db);
    const x = rows[0]!;
    const report: LatencyReport = {
      rate,
      seconds: LATENCY_SECONDS,
      sent: r.requests.total,
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
      runs: x.n,
      clientP50: r.latency.p50,
      clientP99: r.latency.p99,
      startP50: Number(x.s[0]),
      startP99: Number(x.s[1]),
      startMax: Number(x.smax),
      finishP50: Number(x.f[0]),
      finishP99: Number(x.f[1]),
      otherLoad: w.otherLoad,
    };
    console.log(
      `  at ${fmt(rate)} deliveries/s for ${LATENCY_SECONDS} s (worker on): ${fmt(report.runs)} runs; accepted -> started p50 ${fmt(report.startP50, 1)} ms, p99 ${fmt(report.startP99, 1)} ms, max ${fmt(report.startMax)} ms; ` +
        `accepted -> finished p50 ${fmt(report.finishP50, 1)} ms, p99 ${fmt(report.finishP99, 1)} ms; 202 latency p50 ${fmt(report.clientP50, 1)} ms, p99 ${fmt(report.clientP99, 1)} ms; other load ${pct(report.otherLoad)}` +
        (report.non2xx || report.errors ? ` (non-2xx ${report.non2xx}, errors ${report.errors})` : ''),
    );
    return report;
  } finally {
    await worker.stop(5000);
  }
}

// ---------------------------------------------------------------------------------------
// (c) memory of `tributary serve` under sustained deliveries

interface MemoryReport {
  rate: number;
  seconds: number;
  samples: Array<{ t: number; rssMiB: number }>;
  sent: number;
  non2xx: number;
  errors: number;
  finished: number;
  backlog: number;
  slopeMiBPerMin: number;
  flat: boolean;
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function sustained(vars: Record<string, string>, deps: Deps, seeded: Seeded, rate: number): Promise<MemoryReport> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars, PORT: String(port), HOST: '127.0.0.1', WORKER: 'true' };
  delete env.REDIS_URL;
  const serve = spawn(process.execPath, [MAIN, 'serve'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitHealthy(url, serve);
    const opts = atRate(url, seeded, rate, 'sus');
    // A short warm-up, so the first sample is of a server that has seen the load.
    await autocannon({ ...opts, duration: 5 });
    const samples: Array<{ t: number; rssMiB: number }> = [];
    const t0 = performance.now();
    const sample = () => {
      const kib = procKiB(serve.pid!, 'VmRSS');
      if (kib !== undefined) samples.push({ t: (performance.now() - t0) / 1000, rssMiB: kib / 1024 });
      const last = samples.at(-1);
      if (last) console.log(`  t=${fmt(last.t).padStart(4)} s  RSS ${fmt(last.rssMiB, 1)} MiB`);
    };
    sample();
    const timer = setInterval(sample, SAMPLE_EVERY_S * 1000);
    const r = await autocannon({ ...opts, duration: SUSTAIN_SECONDS });
    clearInterval(timer);
    sample();
    const { rows } = await sql<{ finished: number; backlog: number }>`
      select count(*) filter (where status in ('succeeded', 'failed'))::int as finished,
             count(*) filter (where status in ('queued', 'retrying', 'running'))::int as backlog
      from workflow_runs`.execute(deps.db);
    // The trend past the first minute (or the first half of a shorter run): the start's own growth is not a leak.
    const skip = Math.min(60, SUSTAIN_SECONDS / 2);
    const tail = samples.filter((s) => s.t >= skip);
    const perS = slope(
      tail.map((s) => s.t),
      tail.map((s) => s.rssMiB),
    );
    const first = tail[0]?.rssMiB ?? 0;
    // Flat: the fitted line rises by less than 5% of the RSS (or 5 MiB) over the measured span.
    const rise = perS * ((tail.at(-1)?.t ?? 0) - (tail[0]?.t ?? 0));
    return {
      rate,
      seconds: SUSTAIN_SECONDS,
      samples,
      sent: r.requests.total,
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
      finished: rows[0]!.finished,
      backlog: rows[0]!.backlog,
      slopeMiBPerMin: perS * 60,
      flat: rise < Math.max(5, first * 0.05),
    };
  } finally {
    await stopChild(serve);
  }
}

// ---------------------------------------------------------------------------------------
// One engine

interface EngineReport {
  engine: 'pglite' | 'postgres';
  detail: string;
  rows: Row[];
  worker?: WorkerReport;
  latency?: LatencyReport;
  memory?: MemoryReport;
  loads: string[];
  notes: string[];
}

function benchEngine(engine: Engine): Promise<EngineReport> {
  const vars = (dir: string) => {
    const v: Record<string, string> = {
      ...benchEnv(dir),
      WEBHOOK_RATE_LIMIT_MAX: '1000000000',
      WEBHOOK_RATE_LIMIT_WINDOW_SECONDS: '1',
      TOKEN_TTL_SECONDS: '86400',
      // (a) queues every accepted delivery with the worker off: far past the default waiting-runs
      // quota, which is still checked (its cached count) on every delivery.
      QUOTA_WAITING_RUNS: '100000000',
    };
    for (const name of ['WORKER_CONCURRENCY', 'DATABASE_POOL_SIZE', 'WORKER_POLL_MS']) if (process.env[name]) v[name] = process.env[name]!;
    return v;
  };
  const skipped = (note: string): EngineReport => ({ engine, detail: 'PostgreSQL', rows: [], loads: [], notes: [note] });
  return withEngine(engine, { prefix: 'tributary_bench_wh', vars, skipped }, async (run) => {
    const config: Config = loadConfig(run.vars);
    const detail =
      engine === 'postgres'
        ? `PostgreSQL ${run.version} on loopback (app: pg.Pool of ${config.databasePoolSize}; reference: its own pg.Pool of ${config.databasePoolSize})`
        : 'PGlite (embedded, in memory, one connection; the reference uses the same connection)';
    const loads: string[] = [];
    const notes: string[] = [];
    const { deps, url: appUrl, close: closeApp } = await runApp(run);
    const seeded = await seed(deps, appUrl);
    const bare = await bareServer(deps, seeded, config.databaseUrl);
    const closeBare = run.defer('the bare server', () => bare.close());
    const probe = engine === 'postgres' ? postgresCpuProbe(deps.db) : undefined;

    console.log(`\n${detail}\n  load average ${load()}`);
    loads.push(`before (a): ${load()}`);
    const rows = PARTS.has('a') ? await ingestion(deps, appUrl, seeded, bare.url, probe) : [];
    const acc = rows[1];
    if (acc)
      notes.push(
        `(a) Accepted deliveries: ${fmt(acc.rps)}/s, ${pct(acc.ratio)} of the reference (target >= ${TARGET_RATIO * 100}%${engine === 'postgres' ? '' : ', set for PostgreSQL'}): ${(acc.ratio ?? 0) >= TARGET_RATIO ? 'met' : 'missed'}.`,
      );
    for (const r of rows) if (r.non2xx || r.errors) notes.push(`${r.scenario}: ${r.non2xx} non-2xx, ${r.errors} errors/timeouts; its figure is not valid.`);
    await closeBare();
    let worker: WorkerReport | undefined;
    let latency: LatencyReport | undefined;
    let memory: MemoryReport | undefined;
    if (engine === 'postgres' && PARTS.has('b')) {
      loads.push(`before (b): ${load()}`);
      worker = await workerThroughput(deps, seeded, probe);
      notes.push(
        `(b) Worker: ${fmt(worker.runsPerS)} runs/s at WORKER_CONCURRENCY=${worker.concurrency} (target >= ${fmt(TARGET_RUNS_PER_S)}): ${worker.runsPerS >= TARGET_RUNS_PER_S ? 'met' : 'missed'}.`,
      );
      if (worker.succeeded !== worker.runs || worker.facts !== worker.runs)
        notes.push(`(b) Only ${worker.succeeded} of ${worker.runs} runs succeeded and ${worker.facts} facts were written: the figure is not valid.`);
      const rate = Math.max(10, Math.floor(worker.runsPerS / 2));
      loads.push(`before (b) start delay: ${load()}`);
      latency = await startDelay(deps, appUrl, seeded, rate, probe);
      notes.push(
        `(b) Start delay at ${fmt(rate)} deliveries/s: p50 ${fmt(latency.startP50, 1)} ms (target <= ${TARGET_START_P50_MS} ms): ${latency.startP50 <= TARGET_START_P50_MS ? 'met' : 'missed'}; p99 ${fmt(latency.startP99, 1)} ms.`,
      );
    }
    if (engine === 'postgres' && PARTS.has('c')) {
      // (c) runs against `tributary serve` alone: this process's app and pool are closed first.
      await closeApp();
      const rate = worker ? Math.max(10, Math.floor(worker.runsPerS / 2)) : 500;
      const susRate = SUSTAIN_RATE || rate;
      loads.push(`before (c): ${load()}`);
      console.log(`\n  tributary serve (worker on), ${fmt(susRate)} deliveries/s for ${SUSTAIN_SECONDS} s, RSS every ${SAMPLE_EVERY_S} s`);
      memory = await sustained(run.vars, deps, seeded, susRate);
      const rss = memory.samples.map((s) => s.rssMiB);
      notes.push(
        `(c) RSS of tributary serve over ${SUSTAIN_SECONDS} s at ${fmt(susRate)}/s: first ${fmt(rss[0], 1)} MiB, last ${fmt(rss.at(-1), 1)} MiB, max ${fmt(Math.max(...rss), 1)} MiB; ` +
          `trend ${fmt(memory.slopeMiBPerMin, 2)} MiB/min: ${memory.flat ? 'flat' : 'rising'}.`,
      );
      loads.push(`after (c): ${load()}`);
    }
    return { engine, detail, rows, worker, latency, memory, loads, notes };
  });
}

// ---------------------------------------------------------------------------------------
// docs/benchmarks.md: the "Webhooks and worker" section, kept among the sections that
// bench/run.ts leaves in place (between its "How to run" and its "## Run" sections).

const TITLE = '## Webhooks and worker (`node bench/webhooks.ts`)';

const INTRO = `${TITLE}

\`npm run bench:webhooks\` (see the header of bench/webhooks.ts for the settings). A fresh
database per engine (PGlite in memory; on PostgreSQL a scratch \`tributary_bench_wh_<random>\`,
dropped at the end), one tenant, a data model \`orders\` and a workflow of three steps
(transform, condition, write_fact) with a webhook trigger, saved through the JSON:API.

- **(a) Ingestion**, app in this process with the worker off (as bench/run.ts runs it),
  autocannon in a worker thread, ${CONNECTIONS} connections: every delivery a distinct
  \`Idempotency-Key\` (accepted, one run each), then one key repeated (duplicates). The
  reference is a plain Fastify route on another port that parses the same JSON body and
  runs \`BEGIN; INSERT guard; INSERT run; COMMIT\` on the same database (PostgreSQL: through
  its own \`pg.Pool\` of the app's size, the INSERTs named prepared statements; PGlite: a
  Kysely transaction on the one connection), measured first and last; ratios are to the
  mean of the two. Round trips are counted by wrapping \`pg.Client#query\`.
- **(b) Worker** (PostgreSQL): N runs queued by SQL, then \`startWorker\` in this process;
  runs/s from its start to the last \`finished_at\` (every run must succeed and write its
  fact). Then deliveries through the endpoint at half that rate with the worker on: the
  delay from acceptance to the run's start, \`started_at - inserted_at\` (\`inserted_at\` is
  read before the accepting statement, so the delay includes that statement's round trip
  and commit: an upper bound of "202 to start"; both columns have millisecond precision).
- **(c) Memory** (PostgreSQL): \`tributary serve\` with the worker on, as a child process,
  under deliveries at that same rate; its RSS every ${SAMPLE_EVERY_S} s (first sample after a 5 s
  warm-up). "Flat": the least-squares line through the samples after the first minute
  rises by less than 5% (or 5 MiB) over the run.

Targets: accepted deliveries/s >= ${TARGET_RATIO * 100}% of the reference (PostgreSQL); worker >= ${fmt(TARGET_RUNS_PER_S)} runs/s
(PostgreSQL); start delay p50 <= ${TARGET_START_P50_MS} ms at half the worker's rate; RSS flat.
The machine has few cores and the load generator, the server and PostgreSQL share them;
other agents' work may run meanwhile (see the load averages and "other load").
`;

function ingestionTable(rows: Row[]): string {
  const lines = [
    '| Scenario | req/s (mean) | p50 (ms) | p99 (ms) | Ratio to reference | Round trips per request | Server thread CPU per request (µs) | PostgreSQL CPU per request (µs) | Other load |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const bad = r.non2xx || r.errors ? ` (non-2xx ${r.non2xx}, errors ${r.errors})` : '';
    lines.push(
      `| ${r.scenario}${bad} | ${fmt(r.rps)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${pct(r.ratio)} | ${fmt(r.tripsPerReq, 2)} | ${fmt(r.cpuUs)} | ${fmt(r.dbCpuUs)} | ${pct(r.otherLoad)} |`,
    );
  }
  return lines.join('\n');
}

function runSection(reports: EngineReport[], started: Date, loadBefore: string): string {
  const out: string[] = [
    runHeading(3, started),
    '',
    `Command: \`npm run bench:webhooks\` (${DURATION} s per ingestion scenario after a ${WARMUP} s warm-up, ${CONNECTIONS} connections; ${fmt(WORKER_RUNS)} worker runs; start delay over ${LATENCY_SECONDS} s; sustained ${SUSTAIN_SECONDS} s).`,
    '',
    `${machineLine()} Load average (1 / 5 / 15 min) before the run: ${loadBefore}.`,
    '',
  ];
  for (const r of reports) {
    out.push(`#### ${r.engine === 'pglite' ? 'PGlite' : 'PostgreSQL'}`, '', `${r.detail}. Load averages: ${r.loads.join('; ') || 'n/a'}.`, '');
    if (r.rows.length > 0) out.push(ingestionTable(r.rows), '');
    if (r.worker) {
      const w = r.worker;
      out.push(
        '| Worker | Runs | Time | Runs/s | Target | Server thread CPU per run (µs) | PostgreSQL CPU per run (µs) | Round trips per run | Other load |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
        `| transform + condition + write_fact, WORKER_CONCURRENCY=${w.concurrency} | ${fmt(w.runs)} (${fmt(w.succeeded)} succeeded) | ${fmt(w.seconds, 1)} s | ${fmt(w.runsPerS)} | >= ${fmt(TARGET_RUNS_PER_S)}: ${w.runsPerS >= TARGET_RUNS_PER_S ? 'met' : '**missed**'} | ${fmt(w.cpuUsPerRun)} | ${fmt(w.dbCpuUsPerRun)} | ${fmt(w.tripsPerRun, 2)} | ${pct(w.otherLoad)} |`,
        '',
      );
    }
    if (r.latency) {
      const l = r.latency;
      out.push(
        `| Start delay at ${fmt(l.rate)} deliveries/s (half the worker's rate), ${l.seconds} s, worker on | p50 | p99 | max | Target |`,
        '|---|---:|---:|---:|---|',
        `| accepted -> run started (\`started_at - inserted_at\`), ${fmt(l.runs)} runs | ${fmt(l.startP50, 1)} ms | ${fmt(l.startP99, 1)} ms | ${fmt(l.startMax)} ms | p50 <= ${TARGET_START_P50_MS} ms: ${l.startP50 <= TARGET_START_P50_MS ? 'met' : '**missed**'} |`,
        `| accepted -> run finished (\`finished_at - inserted_at\`) | ${fmt(l.finishP50, 1)} ms | ${fmt(l.finishP99, 1)} ms | | |`,
        `| the 202 itself (client side, autocannon)${l.non2xx || l.errors ? ` (non-2xx ${l.non2xx}, errors ${l.errors})` : ''} | ${fmt(l.clientP50, 1)} ms | ${fmt(l.clientP99, 1)} ms | | |`,
        '',
        `Other load during the start-delay run: ${pct(l.otherLoad)}.`,
        '',
      );
    }
    if (r.memory) {
      const mem = r.memory;
      const rss = mem.samples.map((s) => s.rssMiB);
      out.push(
        `RSS of \`tributary serve\` (worker on) under ${fmt(mem.rate)} deliveries/s for ${mem.seconds} s (${fmt(mem.sent)} sent${mem.non2xx || mem.errors ? `, non-2xx ${mem.non2xx}, errors ${mem.errors}` : ''}; ${fmt(mem.finished)} runs finished, ${fmt(mem.backlog)} unfinished at the end):`,
        '',
        '| First | Last | Max | Trend after the first minute | Verdict |',
        '|---:|---:|---:|---:|---|',
        `| ${fmt(rss[0], 1)} MiB | ${fmt(rss.at(-1), 1)} MiB | ${fmt(Math.max(...rss), 1)} MiB | ${fmt(mem.slopeMiBPerMin, 2)} MiB/min | ${mem.flat ? 'flat' : '**rising**'} |`,
        '',
        `Samples (s: MiB): ${mem.samples.map((s) => `${fmt(s.t)}: ${fmt(s.rssMiB, 0)}`).join(', ')}.`,
        '',
      );
    }
    out.push(...r.notes.map((n) => `- ${n}`), '');
  }
  return out.join('\n');
}

function writeDoc(reports: EngineReport[], started: Date, loadBefore: string): void {
  // A new section goes before bench/run.ts's runs, which it keeps last.
  writeSection(DOC, TITLE, INTRO, runSection(reports, started, loadBefore), ['## Run ']);
}

if (import.meta.main) {
  watchdog('bench/webhooks', WATCHDOG_MS);
  console.log(
    `bench/webhooks: ${DURATION} s per ingestion scenario (+${WARMUP} s warm-up), ${CONNECTIONS} connections; ${WORKER_RUNS} worker runs; sustained ${SUSTAIN_SECONDS} s; load average ${load()}`,
  );
  runBench(benchEngine, writeDoc);
}
