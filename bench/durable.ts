/**
 * `node bench/durable.ts`: runs/s of the worker on a 3-step run (http_request, transform,
 * write_fact), before and after durable steps (issue 36 item 10). The http_request has a
 * step after it, so each run of the "after" code makes one checkpoint write.
 *
 * Driver (default): BENCH_BEFORE=<dir> names a checkout of the code before (its
 * node_modules linked); this file is copied into its bench/ and run there. The two sides
 * run in turn, BENCH_PAIRS (default 5) times, each a fresh child process; the report is the
 * median runs/s of each side and their ratio, and the median CPU per run of the process
 * (every thread; with PGlite the database too) and of a local PostgreSQL's backends. One side (BENCH_ONE=1): one measurement,
 * printed as `RESULT {"engine":...,"runsPerS":...}`.
 *
 * Each measurement: the app in this process over a fresh database (PGlite in memory, or a
 * scratch PostgreSQL database), a provider on loopback answering 201 at once, BENCH_RUNS
 * (default 400) runs queued by SQL, then startWorker(); runs/s from its start to the last
 * finished_at. Short on purpose: the machine may be shared. Settings: BENCH_ENGINES
 * (default "pglite,postgres"), BENCH_DATABASE_URL or DATABASE_URL.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { uuidv7 } from '../src/ids.ts';
import { startWorker } from '../src/worker/worker.ts';
import {
  backendMicros,
  benchEnv,
  ENGINES,
  exchangeToken,
  intEnv,
  postgresCpuProbe,
  postJsonApi,
  ROOT,
  runApp,
  saveWebhookWorkflow,
  seedTenant,
  watchdog,
  withEngine,
  type Engine,
} from './common.ts';

const RUNS = intEnv('BENCH_RUNS', 400, 10, 100_000);
const PAIRS = intEnv('BENCH_PAIRS', 5, 1, 50);

interface One {
  engine: Engine;
  runsPerS: number;
  /** CPU of this process (every thread; with PGlite the database too) per run, in µs. */
  procUs?: number;
  /** CPU of the local PostgreSQL backends per run, in µs. */
  dbUs?: number | undefined;
}

async function one(engine: Engine): Promise<One | undefined> {
  const provider = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"ord_abcdefgh","status":"open"}'));
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  try {
    return await withEngine(
      engine,
      { prefix: 'tributary_bench_durable', vars: (dir) => ({ ...benchEnv(dir), ALLOW_PRIVATE_EGRESS: 'true' }), skipped: () => undefined },
      async (run) => {
        const { deps, url } = await runApp(run);
        const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
        const bearer = await exchangeToken(url, cred.client_id, cred.client_secret);
        const post = (p: string, body: unknown) => postJsonApi(url, bearer, p, body);
        const model = await post('/data_models', { data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } } });
        await post('/data_model_fields', {
          data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, name: 'order_id', type: 'string', is_primary_key: true } },
        });
        const connector = await post('/external_connectors', {
          data: {
            type: 'external_connector',
            attributes: {
              name: 'Orders',
              direction: 'outbound',
              provider_slug: 'tributary-orders',
              secret: `key_${'b'.repeat(40)}`,
              config: { base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1` },
            },
          },
        });
        const steps = [
          {
            key: 'create',
            type: 'http_request',
            config: { connector_id: connector.data.id, operation_ref: 'createOrder', body: '{"customer_id": payload.id, "items": []}' },
          },
          { key: 'shape', type: 'transform', config: { expression: '{"order_id": payload.id & "-" & steps.create.body.id}' } },
          { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
        ];
        const { workflowId } = await saveWebhookWorkflow(url, bearer, { name: 'Orders', organizationId: org.id, serviceAccountId: cred.id, steps });
        const now = new Date();
        const ids = Array.from({ length: RUNS }, () => uuidv7());
        const keys = ids.map((_, i) => `d-${i}`);
        const payloads = keys.map((k) => JSON.stringify({ id: k }));
        await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at)
          select u.id, ${org.id}, ${ws.id}, ${workflowId}, 1, 'hook', u.k, u.p::jsonb, 5, ${now}, ${now}, ${now}
          from unnest(${ids}::uuid[], ${keys}::text[], ${payloads}::text[]) as u(id, k, p)`.execute(deps.db);
        const probe = engine === 'postgres' ? postgresCpuProbe(deps.db) : undefined;
        const db0 = await probe?.();
        const p0 = process.cpuUsage();
        const t0 = Date.now();
        const worker = startWorker(deps);
        try {
          for (const deadline = t0 + 120_000; ;) {
            const { rows } = await sql<{ n: number }>`select count(*)::int as n from workflow_runs where status not in ('succeeded', 'failed')`.execute(
              deps.db,
            );
            if (rows[0]!.n === 0) break;
            if (Date.now() > deadline) throw new Error(`${rows[0]!.n} runs unfinished after 120 s`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        } finally {
          await worker.stop(1000);
        }
        const p = process.cpuUsage(p0);
        const dbUs = backendMicros(db0, await probe?.());
        const { rows } = await sql<{
          failed: number;
          last: Date;
        }>`select count(*) filter (where status <> 'succeeded')::int as failed, max(finished_at) as last from workflow_runs`.execute(deps.db);
        if (rows[0]!.failed > 0) throw new Error(`${rows[0]!.failed} runs did not succeed`);
        return {
          engine,
          runsPerS: RUNS / ((new Date(rows[0]!.last).getTime() - t0) / 1000),
          procUs: (p.user + p.system) / RUNS,
          dbUs: dbUs === undefined ? undefined : dbUs / RUNS,
        };
      },
    );
  } finally {
    provider.closeAllConnections();
    await new Promise((resolve) => provider.close(resolve));
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

function side(dir: string, engine: Engine): One {
  const out = execFileSync(process.execPath, [path.join(dir, 'bench', 'durable.ts')], {
    cwd: dir,
    env: { ...process.env, BENCH_ONE: '1', BENCH_ENGINES: engine },
    encoding: 'utf8',
    timeout: 300_000,
  });
  const line = out.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`no result from ${dir}: ${out}`);
  return JSON.parse(line.slice(7)) as One;
}

if (process.env.BENCH_ONE === '1') {
  watchdog('bench/durable', 280_000);
  for (const engine of ['pglite', 'postgres'] as const) {
    if (!ENGINES.includes(engine)) continue;
    const r = await one(engine);
    if (r) console.log(`RESULT ${JSON.stringify(r)}`);
  }
  process.exit(0);
} else {
  const before = process.env.BENCH_BEFORE;
  if (!before) throw new Error('BENCH_BEFORE must name a checkout of the code before (see the comment at the top)');
  fs.copyFileSync(path.join(ROOT, 'bench', 'durable.ts'), path.join(before, 'bench', 'durable.ts'));
  console.log(
    `${new Date().toISOString()}  uptime: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')}  runs per measurement: ${RUNS}`,
  );
  for (const engine of ['pglite', 'postgres'] as const) {
    if (!ENGINES.includes(engine)) continue;
    const b: One[] = [];
    const a: One[] = [];
    for (let i = 0; i < PAIRS; i++) {
      // Interleaved, and which side goes first alternates, so a drift in the machine's load falls on both.
      const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
      for (const s of order) (s === 'before' ? b : a).push(side(s === 'before' ? before : ROOT, engine));
      const show = (x: One) =>
        `${x.runsPerS.toFixed(0)} runs/s` +
        (x.procUs === undefined ? '' : ` (${x.procUs.toFixed(0)} µs process CPU/run${x.dbUs === undefined ? '' : `, PostgreSQL ${x.dbUs.toFixed(0)} µs`})`);
      console.log(`${engine} pair ${i + 1}: before ${show(b.at(-1)!)}, after ${show(a.at(-1)!)}`);
    }
    const rate = (xs: One[]) => median(xs.map((x) => x.runsPerS));
    const cpu = (xs: One[], k: 'procUs' | 'dbUs') => {
      const v = xs.map((x) => x[k]).filter((x) => x !== undefined);
      return v.length ? `${median(v).toFixed(0)} µs` : 'n/a';
    };
    console.log(
      `${engine}: median before ${rate(b).toFixed(0)} runs/s, after ${rate(a).toFixed(0)} runs/s, ratio ${((rate(a) / rate(b)) * 100).toFixed(0)}%; ` +
        `process CPU/run before ${cpu(b, 'procUs')}, after ${cpu(a, 'procUs')}; PostgreSQL CPU/run before ${cpu(b, 'dbUs')}, after ${cpu(a, 'dbUs')}  (load now ${os.loadavg()[0]!.toFixed(2)})`,
    );
  }
}
