/**
 * In-process fact import timing (no HTTP, no CLI): importFacts of N generated lines into a fresh
 * database, reporting lines/s, process CPU, and how long the event loop was held (the gaps of a
 * 5 ms timer, and how many times it fired). For separating the import's own costs from the
 * server's and the probes'.
 *
 *   node bench/import-inprocess.ts            # PGlite in memory (from the migrated template)
 *   BENCH_DISK=1 node bench/import-inprocess.ts   # PGlite with a data directory on disk
 *   DATABASE_URL=postgres://... node bench/import-inprocess.ts
 *
 * BENCH_LINES (default 50,000), BENCH_BATCH (lines per batch; default the engine's).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDb } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrate.ts';
import * as admin from '../src/admin/service.ts';
import { uuidv7 } from '../src/ids.ts';
import { IMPORT_BATCH, importFacts, resolveImportTarget } from '../src/facts/import.ts';
import { freshPostgres, pgliteTemplate } from '../test/helpers/databases.ts';

const LINES = Number(process.env.BENCH_LINES ?? 50_000);
const DAY_MS = 86_400_000;

function* lines(n: number): Generator<string> {
  const end = Date.now();
  const statuses = ['open', 'paid', 'void', 'overdue'];
  for (let i = 0; i < n; i++) {
    const h = (i * 2654435761) % 4294967296;
    yield JSON.stringify({
      observed_at: new Date(end - (h % (365 * DAY_MS))).toISOString(),
      data: {
        invoice_id: `inv-${String(i % Math.max(1, Math.floor(n / 10))).padStart(7, '0')}`,
        status: statuses[h % 4],
        customer: `c-${h % 5000}`,
        amount: h % 10000,
      },
    });
  }
}

const pgUrl = process.env.DATABASE_URL;
const scratch = pgUrl ? await freshPostgres(pgUrl, 'tributary_bench_inproc') : undefined;
const dir = process.env.BENCH_DISK ? fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-inproc-')) : undefined;
const handle = scratch
  ? createDb({ databaseUrl: scratch.url, poolSize: 2 })
  : dir
    ? createDb({ dataDir: dir })
    : createDb({ dataDir: 'memory', initialDump: await pgliteTemplate() });
const { db, engine } = handle;
try {
  if (dir) await migrate(db);
  const org = await admin.createOrganization(db, { name: 'Bench', domain: `b-${Date.now()}.example` });
  const ws = await admin.createWorkspace(db, { organization_id: org.id, name: 'Main' });
  const modelId = uuidv7();
  await db
    .insertInto('data_models')
    .values({ id: modelId, organization_id: org.id, workspace_id: ws.id, name: 'inv', slug: 'inv', description: null, retention_days: null })
    .execute();
  const fields: [string, 'string' | 'integer', boolean][] = [
    ['invoice_id', 'string', true],
    ['status', 'string', false],
    ['customer', 'string', false],
    ['amount', 'integer', false],
  ];
  await db
    .insertInto('data_model_fields')
    .values(
      fields.map(([name, type, pk]) => ({
        id: uuidv7(),
        organization_id: org.id,
        workspace_id: ws.id,
        data_model_id: modelId,
        name,
        label: name,
        type,
        is_primary_key: pk,
        is_required: pk,
        description: null,
        constraints: null,
      })),
    )
    .execute();
  const target = await resolveImportTarget(db, { workspaceId: ws.id, dataModelSlug: 'inv' });
  const batchSize = process.env.BENCH_BATCH ? Number(process.env.BENCH_BATCH) : undefined;

  let ticks = 0;
  let maxGap = 0;
  const gaps: number[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    ticks++;
    gaps.push(now - last);
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 5);
  let batches = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await importFacts(db, target, lines(LINES), { batching: batchSize ? { lines: batchSize } : IMPORT_BATCH[engine], onBatch: () => batches++ });
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(timer);
  gaps.sort((a, b) => a - b);
  const q = (p: number) => gaps[Math.min(gaps.length - 1, Math.ceil(p * gaps.length) - 1)]!.toFixed(1);
  console.log(
    `${engine}${dir ? ' (disk)' : ''} batch=${batchSize ?? 'default'} lines=${LINES} written=${r.written} rejected=${r.rejected} ${secs.toFixed(1)} s ${(LINES / secs).toFixed(0)} lines/s cpu user+sys ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s; batches=${batches + 1}; timer ticks ${ticks}, gap p50 ${q(0.5)} p99 ${q(0.99)} max ${maxGap.toFixed(0)} ms; load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
} finally {
  await db.destroy();
  await scratch?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
