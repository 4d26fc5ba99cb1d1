/**
 * `npm run bench:connectors`: http_request steps against a loopback mock provider, beside
 * direct undici calls to the same mock in the same run; and a connector's rate limit held
 * by two worker processes. Writes the "Connectors" section of docs/benchmarks.md.
 *
 * (a) N runs of a one-step workflow (http_request POST with a JSON body through an api_key
 *     connector) queued by SQL, then the worker (WORKER_CONCURRENCY, in this process);
 *     steps/s from its start to the last finished_at. The reference: the same number of
 *     POSTs with the same body and headers through undici.request at the same
 *     concurrency, straight to the mock. The mock runs in a child process. PostgreSQL and
 *     PGlite.
 * (b) PostgreSQL: a connector with rate_limit {requests: R, per_seconds: 1}, M runs queued,
 *     two `tributary worker` processes; the mock counts calls per second. Once with the
 *     windows in PostgreSQL (no REDIS_URL), once in Redis (when it answers).
 *
 * Settings: BENCH_ENGINES (default "pglite,postgres"), BENCH_CONNECTOR_RUNS (default
 * 5000), BENCH_STEPS_PER_RUN (the several-call workflow, default 10), BENCH_RATE (R, default
 * 50), BENCH_RATE_SECONDS (default 20), BENCH_NO_RATE=1 (skip (b)), BENCH_ONLY_RATE=1 (skip (a)),
 * BENCH_NO_WRITE=1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { Agent, request } from 'undici';
import type { Deps } from '../src/deps.ts';
import * as admin from '../src/admin/service.ts';
import { uuidv7 } from '../src/ids.ts';
import { sealSecret } from '../src/secret-box.ts';
import { startWorker } from '../src/worker/worker.ts';
import { marginMs, rangeOf } from '../src/connectors/rate.ts';
import {
  benchEnv,
  fmt,
  intEnv,
  loadAverage as load,
  machineBusyMicros,
  machineLine,
  ROOT,
  runBench,
  runDeps,
  runHeading,
  stopChild,
  withEngine,
  writeSection,
  type Engine,
} from './common.ts';

const DOC = path.join(ROOT, 'docs', 'benchmarks.md');
const MAIN = path.join(ROOT, 'src', 'main.ts');
const RUNS = intEnv('BENCH_CONNECTOR_RUNS', 5000, 100, 1_000_000);
const RATE = intEnv('BENCH_RATE', 50, 1, 10_000);
/** http_request steps per run in (a): one, and a workflow of several calls. */
const STEPS_PER_RUN = [1, intEnv('BENCH_STEPS_PER_RUN', 10, 2, 50)];
const RATE_SECONDS = intEnv('BENCH_RATE_SECONDS', 20, 3, 600);
const KEY = `key_${randomBytes(16).toString('hex')}`;
const BODY = { customer_id: 'c-1', items: [{ sku: 'A-1', quantity: 2, unit_price: { amount: '9.50', currency: 'EUR' } }] };
/** Issue 25: a step's share of a direct call, at one call per run and at several. */
const target = (stepsPerRun: number) => (stepsPerRun === 1 ? 0.25 : 0.5);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The mock provider, in a child process: 201 with a small JSON body; GET /stats gives calls per second.
const MOCK = `
import http from 'node:http';
const perSecond = new Map();
let total = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/stats') { res.writeHead(200, {'content-type': 'application/json'}); res.end(JSON.stringify({ total, perSecond: [...perSecond] })); return; }
  if (req.url === '/reset') { perSecond.clear(); total = 0; res.end('{}'); return; }
  req.resume();
  req.on('end', () => {
    total++;
    const s = Math.floor(Date.now() / 1000);
    perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    res.writeHead(201, {'content-type': 'application/json'});
    res.end('{"id":"ord_12345678","status":"open"}');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

async function startMock(): Promise<{
  url: string;
  child: ChildProcess;
  stats(): Promise<{ total: number; perSecond: Array<[number, number]> }>;
  reset(): Promise<void>;
}> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', MOCK], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    child,
    stats: async () => (await fetch(`${url}/stats`)).json() as Promise<{ total: number; perSecond: Array<[number, number]> }>,
    reset: async () => void (await fetch(`${url}/reset`)).text(),
  };
}

/** Busy share of all cores over a phase: call at the start, call the result at the end. */
function busyWindow(): () => number {
  const b0 = machineBusyMicros() ?? NaN;
  const t0 = performance.now();
  return () => ((machineBusyMicros() ?? NaN) - b0) / ((performance.now() - t0) * 1000 * os.availableParallelism());
}

interface Seeded {
  organizationId: string;
  workspaceId: string;
  workflowId: string;
  connectorId: string;
}

async function seed(deps: Deps, mockUrl: string, rateLimit?: { requests: number; per_seconds: number }, stepsPerRun = 1): Promise<Seeded> {
  const tag = randomBytes(4).toString('hex');
  const org = await admin.createOrganization(deps.db, { name: `Bench ${tag}`, domain: `bench-${tag}.example` });
  const ws = await admin.createWorkspace(deps.db, { organization_id: org.id, name: 'Main' });
  // Steps that call out run only while the version's saver is an admin or owner.
  const user = await admin.createUser(deps.db, { email: `owner-${tag}@bench.example` });
  const owner = await admin.addMember(deps.db, { organization_id: org.id, user_id: user.id, role: 'owner' });
  const connectorId = uuidv7();
  await deps.db
    .insertInto('external_connectors')
    .values({
      id: connectorId,
      organization_id: org.id,
      workspace_id: ws.id,
      name: 'Orders',
      auth_type: 'api_key',
      type: 'http',
      direction: 'outbound',
      config: JSON.stringify({ base_url: `${mockUrl}/v1`, ...(rateLimit ? { rate_limit: rateLimit } : {}) }),
      description: null,
      provider_slug: null,
      secret_ciphertext: sealSecret(deps.connectorKey, KEY),
    })
    .execute();
  const workflowId = uuidv7();
  const steps = Array.from({ length: stepsPerRun }, (_, i) => ({
    key: `call_${i}`,
    type: 'http_request',
    config: { connector_id: connectorId, method: 'POST', path: '/orders', body: 'payload' },
  }));
  await deps.db
    .insertInto('workflows')
    .values({
      id: workflowId,
      organization_id: org.id,
      workspace_id: ws.id,
      name: 'Calls',
      steps: JSON.stringify(steps),
      triggers: '[]',
      graph_hash: 'bench',
      lock_version: '1.bench',
    } as never)
    .execute();
  await sql`insert into workflow_versions (workspace_id, workflow_id, version, steps, saved_by_membership_id)
    values (${ws.id}, ${workflowId}, 1, ${JSON.stringify(steps)}::jsonb, ${owner.id})`.execute(deps.db);
  return { organizationId: org.id, workspaceId: ws.id, workflowId, connectorId };
}

async function queueRuns(deps: Deps, s: Seeded, n: number): Promise<void> {
  const now = new Date();
  for (let from = 0; from < n; from += 2000) {
    const count = Math.min(2000, n - from);
    const ids = Array.from({ length: count }, () => uuidv7());
    await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at)
      select u.id, ${s.organizationId}, ${s.workspaceId}, ${s.workflowId}, 1, null, null, ${JSON.stringify(BODY)}::jsonb, 5, ${now}, ${now}, ${now}
      from unnest(${ids}::uuid[]) as u(id)`.execute(deps.db);
  }
}

async function waitDone(deps: Deps, workflowId: string, timeoutMs: number): Promise<{ succeeded: number; failed: number; last: Date }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await sql<{ open: number; succeeded: number; failed: number; last: Date }>`
      select count(*) filter (where status in ('queued', 'retrying', 'running'))::int as open,
             count(*) filter (where status = 'succeeded')::int as succeeded, count(*) filter (where status = 'failed')::int as failed,
             max(finished_at) as last
      from workflow_runs where workflow_id = ${workflowId}`.execute(deps.db);
    const r = rows[0]!;
    if (r.open === 0) return { succeeded: r.succeeded, failed: r.failed, last: new Date(r.last) };
    if (Date.now() > deadline) throw new Error(`runs still open after ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** The reference: the same POSTs straight to the mock through undici, `concurrency` at a time. */
async function directCalls(mockUrl: string, n: number, concurrency: number): Promise<number> {
  const agent = new Agent({ connections: 64 });
  const body = JSON.stringify(BODY);
  let next = 0;
  const t0 = performance.now();
  const lane = async () => {
    while (next < n) {
      next++;
      const res = await request(`${mockUrl}/v1/orders`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-api-key': KEY, 'idempotency-key': uuidv7() },
        body,
      });
      await res.body.json();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const s = (performance.now() - t0) / 1000;
  await agent.close();
  return n / s;
}

interface ThroughputRow {
  engine: string;
  stepsPerRun: number;
  steps: number;
  stepsPerS: number;
  directPerS: number;
  ratio: number;
  failed: number;
  /** Busy share of all the machine's cores while the worker ran, and during the reference. */
  machineBusyShare: number;
  directBusyShare: number;
  /** CPU time of this process (user + system) per step while the worker ran, and per direct call: robust to other load on the machine. */
  cpuUsPerStep: number;
  directCpuUsPerCall: number;
}

interface RateRow {
  counter: string;
  budget: number;
  seconds: number;
  calls: number;
  perSecondAvg: number;
  maxInSecond: number;
  ratio: number;
}

interface EngineReport {
  engine: 'pglite' | 'postgres';
  throughput: ThroughputRow[];
  rates: RateRow[];
  notes: string[];
}

async function throughput(engine: 'pglite' | 'postgres', deps: Deps, mock: Awaited<ReturnType<typeof startMock>>, stepsPerRun: number): Promise<ThroughputRow> {
  const s = await seed(deps, mock.url, undefined, stepsPerRun);
  const runs = Math.ceil(RUNS / stepsPerRun);
  await queueRuns(deps, s, runs);
  const concurrency = deps.config.workerConcurrency;
  // Warm the reference's and the worker's connections alike: a few calls each first.
  await directCalls(mock.url, 200, concurrency);
  const t0 = Date.now();
  const busy = busyWindow();
  const cpu0 = process.cpuUsage();
  const worker = startWorker(deps);
  const done = await waitDone(deps, s.workflowId, 600_000);
  const machineBusyShare = busy();
  const cpu = process.cpuUsage(cpu0);
  await worker.stop(5000);
  const steps = runs * stepsPerRun;
  const stepsPerS = steps / ((done.last.getTime() - t0) / 1000);
  const busyDirect = busyWindow();
  const cpuDirect0 = process.cpuUsage();
  const directPerS = await directCalls(mock.url, steps, concurrency);
  const cpuDirect = process.cpuUsage(cpuDirect0);
  const directBusyShare = busyDirect();
  const row = {
    engine,
    stepsPerRun,
    steps,
    stepsPerS,
    directPerS,
    ratio: stepsPerS / directPerS,
    failed: done.failed,
    machineBusyShare,
    directBusyShare,
    cpuUsPerStep: (cpu.user + cpu.system) / steps,
    directCpuUsPerCall: (cpuDirect.user + cpuDirect.system) / steps,
  };
  console.log(
    `  ${engine}, ${stepsPerRun} step(s) per run: ${fmt(steps)} http_request steps at ${fmt(stepsPerS)}/s (machine ${fmt(machineBusyShare * 100)}% busy); direct undici ${fmt(directPerS)}/s (${fmt(directBusyShare * 100)}% busy); ${fmt(row.ratio * 100)}% (${done.failed} failed); this process's CPU ${fmt(row.cpuUsPerStep)} us/step, ${fmt(row.directCpuUsPerCall)} us/direct call`,
  );
  return row;
}

/** Two `tributary worker` processes against one connector budget; the mock counts per second. */
async function rateLimit(
  vars: Record<string, string>,
  deps: Deps,
  mock: Awaited<ReturnType<typeof startMock>>,
  redisUrl: string | undefined,
): Promise<RateRow> {
  const s = await seed(deps, mock.url, { requests: RATE, per_seconds: 1 });
  await queueRuns(deps, s, RATE * (RATE_SECONDS + 30));
  await mock.reset();
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars, LOG_LEVEL: 'warn', ALLOW_PRIVATE_EGRESS: 'true' };
  delete env.REDIS_URL;
  if (redisUrl) env.REDIS_URL = redisUrl;
  const workers = [0, 1].map(() => spawn(process.execPath, [MAIN, 'worker'], { env, stdio: ['ignore', 'ignore', 'inherit'] }));
  try {
    await sleep(RATE_SECONDS * 1000 + 2000);
  } finally {
    await Promise.all(workers.map(stopChild));
  }
  const stats = await mock.stats();
  // Whole seconds only: the first and last are partial.
  const seconds = stats.perSecond.sort((a, b) => a[0] - b[0]).slice(1, -1);
  const calls = seconds.reduce((a, [, n]) => a + n, 0);
  const row: RateRow = {
    counter: redisUrl ? 'Redis' : 'PostgreSQL',
    budget: RATE,
    seconds: seconds.length,
    calls,
    perSecondAvg: calls / Math.max(1, seconds.length),
    maxInSecond: Math.max(0, ...seconds.map(([, n]) => n)),
    ratio: calls / Math.max(1, seconds.length) / RATE,
  };
  console.log(
    `  rate limit ${RATE}/s, 2 worker processes, windows in ${row.counter}: ${fmt(row.perSecondAvg, 1)}/s over ${row.seconds} whole seconds (max ${row.maxInSecond} in a second) = ${fmt(row.ratio * 100, 1)}% of the budget`,
  );
  await sql`delete from workflow_runs where workflow_id = ${s.workflowId}`.execute(deps.db);
  return row;
}

async function redisAnswers(url: string): Promise<boolean> {
  const { Redis } = await import('ioredis');
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000 });
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

function benchEngine(engine: Engine): Promise<EngineReport> {
  const vars = (dir: string) => {
    const v: Record<string, string> = { ...benchEnv(dir), ALLOW_PRIVATE_EGRESS: 'true' };
    for (const name of ['WORKER_CONCURRENCY', 'DATABASE_POOL_SIZE']) if (process.env[name]) v[name] = process.env[name]!;
    return v;
  };
  const skipped = (note: string): EngineReport => ({ engine, throughput: [], rates: [], notes: [note] });
  return withEngine(engine, { prefix: 'tributary_bench_conn', vars, skipped }, async (run) => {
    const mock = await startMock();
    run.defer('the mock provider', () => mock.child.kill());
    const deps = await runDeps(run);
    console.log(`\n${engine} (load average ${load()})`);
    const rows: ThroughputRow[] = [];
    if (process.env.BENCH_ONLY_RATE !== '1') for (const n of STEPS_PER_RUN) rows.push(await throughput(engine, deps, mock, n));
    const notes = rows.map(
      (row) =>
        `(a) ${row.stepsPerRun} step(s) per run: ${fmt(row.stepsPerS)} http_request steps/s, ${fmt(row.ratio * 100)}% of direct undici calls (target >= ${fmt(target(row.stepsPerRun) * 100)}%): ${row.ratio >= target(row.stepsPerRun) ? 'met' : 'missed'}.`,
    );
    const rates: RateRow[] = [];
    if (engine === 'postgres' && process.env.BENCH_NO_RATE !== '1') {
      rates.push(await rateLimit(run.vars, deps, mock, undefined));
      const redisUrl = process.env.BENCH_REDIS_URL ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
      if (await redisAnswers(redisUrl)) rates.push(await rateLimit(run.vars, deps, mock, redisUrl));
      else notes.push('(b) Redis did not answer: the Redis variant was skipped.');
      for (const r of rates) {
        // The sliding window leaves up to a bucket and the margin unused: R calls per 1.2 s at worst.
        const limit = { requests: r.budget, perSeconds: 1 };
        const floor = 1000 / (1000 + marginMs(limit) + rangeOf(limit, 0).bucketMs);
        notes.push(
          `(b) ${r.counter}: ${fmt(r.ratio * 100, 1)}% of the budget, at most ${r.maxInSecond} calls in any second (budget ${r.budget}): ${r.maxInSecond <= r.budget && r.ratio >= 0.95 * floor ? `within 5% of the sliding window's floor (${fmt(floor * 100, 1)}%)` : `not within 5% of the sliding window's floor (${fmt(floor * 100, 1)}%)`}.`,
        );
      }
    }
    return { engine, throughput: rows, rates, notes };
  });
}

const TITLE = '## Connectors (`node bench/connectors.ts`)';
const INTRO = `${TITLE}

\`npm run bench:connectors\` (settings in the header of bench/connectors.ts). A mock provider in a
child process on loopback answers 201 with a small JSON body.

- **(a)** N steps as runs of a one-step workflow, then as runs of a ten-step workflow
  (\`http_request\` POST with a JSON body through an \`api_key\` connector), queued by SQL, then the worker in the bench process; steps/s from its
  start to the last \`finished_at\` (claim, the connector row, the call, the outcome recorded).
  Reference: the same POSTs with the same headers and body through \`undici.request\` at the
  same concurrency, straight to the mock. Target: >= 25% of the reference at one call per run,
  >= 50% at ten. The process's CPU time per step (user + system, the worker in this process;
  not PostgreSQL's, not the expression pool's children) is beside it: wall-clock rates on a
  shared 2-CPU machine move with the other load, CPU per step much less.
- **(b)** PostgreSQL: a connector with \`rate_limit {requests: R, per_seconds: 1}\` and two
  \`tributary worker\` processes; the mock counts calls per second (whole seconds only).
  Target: never over the budget in a second, and within 5% of the sliding window's floor
  (R calls per 1 s + its 100 ms margin + one 100 ms bucket: 83.3% of the budget).
`;

function writeDoc(reports: EngineReport[], started: Date, loadBefore: string): void {
  const out = [
    runHeading(3, started),
    '',
    `Command: \`npm run bench:connectors\` (${fmt(RUNS)} runs; rate ${RATE}/s for ${RATE_SECONDS} s). ${machineLine()} Load average before: ${loadBefore}.`,
    '',
    '| Engine | Steps per run | Steps | http_request steps/s | Machine busy | Direct undici calls/s | Machine busy | Ratio | Target | Process CPU/step | Process CPU/direct call |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|',
  ];
  for (const r of reports)
    for (const t of r.throughput)
      out.push(
        `| ${r.engine} | ${t.stepsPerRun} | ${fmt(t.steps)} | ${fmt(t.stepsPerS)} | ${fmt(t.machineBusyShare * 100)}% | ${fmt(t.directPerS)} | ${fmt(t.directBusyShare * 100)}% | ${fmt(t.ratio * 100)}% | >= ${fmt(target(t.stepsPerRun) * 100)}%: ${t.ratio >= target(t.stepsPerRun) ? 'met' : '**missed**'} | ${fmt(t.cpuUsPerStep)} us | ${fmt(t.directCpuUsPerCall)} us |`,
      );
  const rates = reports.flatMap((r) => r.rates);
  if (rates.length > 0) {
    out.push(
      '',
      '| Rate limit, 2 worker processes | Budget | Whole seconds | Calls | Calls/s | Max in a second | Of the budget |',
      '|---|---:|---:|---:|---:|---:|---:|',
    );
    for (const r of rates)
      out.push(
        `| windows in ${r.counter} | ${r.budget}/s | ${r.seconds} | ${fmt(r.calls)} | ${fmt(r.perSecondAvg, 1)} | ${r.maxInSecond} | ${fmt(r.ratio * 100, 1)}% |`,
      );
  }
  out.push('', ...reports.flatMap((r) => r.notes.map((n) => `- ${r.engine}: ${n}`)), '');
  // A new section goes before the webhooks section, else before bench/run.ts's runs.
  writeSection(DOC, TITLE, INTRO, out.join('\n'), ['## Webhooks and worker', '## Run ']);
}

if (import.meta.main) {
  console.log(`bench/connectors: ${RUNS} runs; rate ${RATE}/s for ${RATE_SECONDS} s; load average ${load()}`);
  runBench(benchEngine, writeDoc);
}
