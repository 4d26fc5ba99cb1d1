/**
 * `node bench/for-each.ts`: a `for_each` of 1,000 items against a flat list (issue 36 item
 * 10). Three workflows over the same payload of BENCH_ITEMS (default 1,000) orders:
 *
 * - nested, concurrency 10: `for_each` over payload.items, each item a transform then a
 *   write_fact of one fact;
 * - flat: one write_fact with its own `for_each` over payload.items (one statement);
 * - nested, concurrency 1 (BENCH_SERIAL=0 leaves it out).
 *
 * Each measurement is one run queued by SQL and run by the worker alone: its time is
 * finished_at - started_at, its facts/s the items over that, and the CPU it took: this
 * process's (every thread; with PGlite the database too), the expression pool's children,
 * and on a local PostgreSQL its backends'. The variants take turns,
 * BENCH_PAIRS (default 5) rounds, the first variant of a round rotating, on one database
 * per engine (every run writes new orders: ids carry the run's number); the report is the
 * median of each. Settings: BENCH_ENGINES (default "pglite,postgres"), BENCH_DATABASE_URL
 * or DATABASE_URL.
 */
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
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
  procCpuMicros,
  postJsonApi,
  runApp,
  seedTenant,
  watchdog,
  withEngine,
  type Engine,
} from './common.ts';

const ITEMS = intEnv('BENCH_ITEMS', 1000, 1, 1000);
const PAIRS = intEnv('BENCH_PAIRS', 5, 1, 50);
const SERIAL = process.env.BENCH_SERIAL !== '0';

const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(', ');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** CPU so far of this process's children (the expression pool evaluates every expression in them), from /proc. */
function childrenCpuMicros(): number {
  let us = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid) us += procCpuMicros(Number(pid)) ?? 0;
    } catch {
      // gone meanwhile
    }
  }
  return us;
}

const nested = (concurrency: number) => [
  {
    key: 'each',
    type: 'for_each',
    config: {
      items: 'payload.items',
      concurrency,
      steps: [
        { key: 'shape', type: 'transform', config: { expression: '{"order_id": item.id, "amount": item.amount}' } },
        { key: 'store', type: 'write_fact', config: { data_model_slug: 'orders', data: 'steps.shape' } },
      ],
    },
  },
];
const flat = [
  {
    key: 'store',
    type: 'write_fact',
    config: { data_model_slug: 'orders', for_each: 'payload.items', mapping: { order_id: 'item.id', amount: 'item.amount' } },
  },
];

async function one(engine: Engine): Promise<void> {
  await withEngine(
    engine,
    {
      prefix: 'tributary_bench_for_each',
      vars: (dir) => ({ ...benchEnv(dir), WORKER_POLL_MS: '20' }),
      skipped: (note) => console.log(`${engine}: ${note}`),
    },
    async (run) => {
      const { deps, url, close } = await runApp(run);
      const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write', 'webhooks']);
      const bearer = await exchangeToken(url, cred.client_id, cred.client_secret);
      const post = (p: string, body: unknown) => postJsonApi(url, bearer, p, body);
      const model = await post('/data_models', { data: { type: 'data_model', attributes: { name: 'Orders', slug: 'orders' } } });
      for (const [name, type, pk] of [
        ['order_id', 'string', true],
        ['amount', 'integer', false],
      ] as const) {
        await post('/data_model_fields', {
          data: { type: 'data_model_field', attributes: { data_model_id: model.data.id, name, type, is_primary_key: pk } },
        });
      }
      const variants: Array<{ name: string; steps: unknown[] }> = [
        { name: 'for_each, concurrency 10', steps: nested(10) },
        { name: 'flat write_fact for_each', steps: flat },
        ...(SERIAL ? [{ name: 'for_each, concurrency 1', steps: nested(1) }] : []),
      ];
      const workflows: string[] = [];
      for (const v of variants) {
        const saved = await post('/workflows/save_builder_state', {
          data: {
            type: 'workflow_builder_state',
            attributes: {
              is_new_version: false,
              organization_id: org.id,
              wf_params: { name: v.name, is_active: true },
              trigger_params: [{ key: 'hook', type: 'webhook', service_account_id: cred.id }],
              step_params: v.steps,
            },
          },
        });
        workflows.push(saved.data.id);
      }
      await close();
      const worker = startWorker(deps);
      let seq = 0;
      const probe = engine === 'postgres' ? postgresCpuProbe(deps.db) : undefined;
      // CPU of this process (every thread; with PGlite the database too) and of the local PostgreSQL backends, per run.
      const cpu = variants.map(() => ({ proc: [] as number[], pool: [] as number[], db: [] as number[] }));
      const measure = async (w: number): Promise<number> => {
        const k = seq++;
        const db0 = await probe?.();
        const p0 = process.cpuUsage();
        const c0 = childrenCpuMicros();
        const id = uuidv7();
        const payload = JSON.stringify({ items: Array.from({ length: ITEMS }, (_, i) => ({ id: `r${k}-o${i}`, amount: i })) });
        const now = new Date();
        await sql`insert into workflow_runs (id, organization_id, workspace_id, workflow_id, workflow_version, trigger_key, delivery_id, payload, max_attempts, run_at, inserted_at, updated_at)
          values (${id}, ${org.id}, ${ws.id}, ${workflows[w]!}, 1, 'hook', ${`fe-${k}`}, ${payload}::jsonb, 5, ${now}, ${now}, ${now})`.execute(deps.db);
        for (const deadline = Date.now() + 300_000; ; await sleep(20)) {
          const { rows } = await sql<{
            status: string;
            error: string | null;
            ms: number;
            facts: number;
          }>`select status, error, facts_written as facts, extract(epoch from finished_at - started_at) * 1000 as ms from workflow_runs where id = ${id}`.execute(
            deps.db,
          );
          const r = rows[0]!;
          if (r.status === 'succeeded') {
            if (r.facts !== ITEMS) throw new Error(`${variants[w]!.name}: ${r.facts} facts written, not ${ITEMS}`);
            const p = process.cpuUsage(p0);
            const dbUs = backendMicros(db0, await probe?.());
            cpu[w]!.proc.push((p.user + p.system) / 1000);
            cpu[w]!.pool.push((childrenCpuMicros() - c0) / 1000);
            if (dbUs !== undefined) cpu[w]!.db.push(dbUs / 1000);
            return Number(r.ms);
          }
          if (r.status !== 'queued' && r.status !== 'running') throw new Error(`${variants[w]!.name}: run ${r.status}: ${r.error}`);
          if (Date.now() > deadline) throw new Error(`${variants[w]!.name}: unfinished after 300 s`);
        }
      };
      try {
        // One of each first, discarded: the expressions' compile caches and the plans warm up.
        for (let w = 0; w < variants.length; w++) await measure(w);
        for (const c of cpu) c.proc.length = c.pool.length = c.db.length = 0;
        const times = variants.map(() => [] as number[]);
        for (let i = 0; i < PAIRS; i++) {
          // Which variant goes first rotates, so a drift in the machine's load falls on each.
          for (let j = 0; j < variants.length; j++) {
            const w = (i + j) % variants.length;
            times[w]!.push(await measure(w));
          }
          console.log(`${engine} round ${i + 1}: ${variants.map((v, w) => `${v.name} ${times[w]!.at(-1)!.toFixed(0)} ms`).join(', ')}`);
        }
        for (const [w, v] of variants.entries()) {
          const m = median(times[w]!);
          console.log(
            `${engine}: ${v.name}: median ${m.toFixed(0)} ms per run (${Math.min(...times[w]!).toFixed(0)}-${Math.max(...times[w]!).toFixed(0)}), ${Math.round(ITEMS / (m / 1000))} facts/s; ` +
              `CPU per run: process ${median(cpu[w]!.proc).toFixed(0)} ms, expression pool ${median(cpu[w]!.pool).toFixed(0)} ms` +
              (cpu[w]!.db.length ? `, PostgreSQL ${median(cpu[w]!.db).toFixed(0)} ms` : ''),
          );
        }
        console.log(
          `RESULT ${JSON.stringify({
            engine,
            items: ITEMS,
            variants: variants.map((v, w) => ({
              name: v.name,
              medianMs: Math.round(median(times[w]!)),
              ms: times[w]!.map(Math.round),
              procCpuMs: Math.round(median(cpu[w]!.proc)),
              poolCpuMs: Math.round(median(cpu[w]!.pool)),
              dbCpuMs: cpu[w]!.db.length ? Math.round(median(cpu[w]!.db)) : undefined,
            })),
          })}`,
        );
      } finally {
        await worker.stop(1000);
      }
    },
  );
}

watchdog('bench/for-each', 1_200_000);
console.log(`${new Date().toISOString()}  uptime: ${loadAverage()}  cores: ${os.availableParallelism()}  items: ${ITEMS}  rounds: ${PAIRS}`);
for (const engine of ['pglite', 'postgres'] as const) {
  if (!ENGINES.includes(engine)) continue;
  await one(engine);
  console.log(`  (load now ${loadAverage()})`);
}
process.exit(0);
