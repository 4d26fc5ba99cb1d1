/**
 * `npm run bench`: throughput of token exchange and of an authenticated JSON:API read,
 * each beside a bare Fastify route doing one indexed SELECT through the same Kysely db,
 * on embedded PGlite and (when reachable) on PostgreSQL. Writes docs/benchmarks.md.
 *
 * The servers run in this process; autocannon runs in a worker thread (`workers: 1`) so
 * the load generator has its own event loop and does not queue behind the server's.
 * Everything is bounded: fixed durations, one connection attempt per database, and a
 * watchdog that ends the process if a step hangs.
 *
 * Settings (environment): BENCH_DATABASE_URL or DATABASE_URL (PostgreSQL server to create
 * the scratch database on; default postgres://postgres@127.0.0.1:5432/postgres, skipped
 * when unreachable), BENCH_DURATION (seconds per measured run, default 8),
 * BENCH_CONNECTIONS (default 16), BENCH_ENGINES (comma list, default "pglite,postgres"),
 * BENCH_NO_WRITE=1 (print only, leave docs/benchmarks.md alone).
 */
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Deps } from '../src/deps.ts';
import { compileOnce, runCompiled, slot } from '../src/db/compiled.ts';
import { uuidv7 } from '../src/ids.ts';
import {
  DEFAULT_PG,
  ENGINES,
  exchangeToken,
  fmt,
  freeBlock,
  intEnv,
  machineLine,
  measure,
  postgresCpuProbe,
  ROOT,
  runBench,
  inProcessDetail,
  runApp,
  runHeading,
  seedTenant,
  watchdog,
  withEngine,
  writeDoc,
  type Engine,
  type Measured,
  type MeasureSettings,
} from './common.ts';

const DOC = path.join(ROOT, 'docs', 'benchmarks.md');
const JSONAPI = 'application/vnd.api+json';

const DURATION = intEnv('BENCH_DURATION', 8, 1, 60);
const WARMUP = 2;
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 16, 1, 256);
const TARGET_READ_RATIO = 0.75;
const TARGET_LIST_RATIO = 0.6;
const LIST_SIZE = 50;
const TARGET_TOKENS_PER_S = 2000;

// Hard bound on the whole run: per engine 3 x 2 s of first warm-up, then 4 scenarios x
// (2 s warm-up + 8 s run), plus setup: about 100 s in all.
const WATCHDOG_MS = 400_000;
watchdog('bench', WATCHDOG_MS);

type Row = Measured & { ratio: number | undefined };

interface EngineReport {
  engine: string;
  detail: string;
  rows: Row[];
  notes: string[];
}

async function seed(deps: Deps, appUrl: string) {
  const { org, ws, cred } = await seedTenant(deps.db, ['api_read', 'api_write']);
  const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: cred.client_id, client_secret: cred.client_secret }).toString();
  const token = await exchangeToken(appUrl, cred.client_id, cred.client_secret);
  const created = await fetch(`${appUrl}/api/json/v1/data_models`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': JSONAPI, accept: JSONAPI },
    body: JSON.stringify({
      data: { type: 'data_model', attributes: { name: 'Invoices', slug: 'invoices', description: 'Benchmark model', retention_days: 365 } },
    }),
    signal: AbortSignal.timeout(10_000),
  });
  if (created.status !== 201) throw new Error(`creating the data model failed: ${created.status} ${await created.text()}`);
  const modelId = ((await created.json()) as { data: { id: string } }).data.id;
  // More models than a list page holds, so the list scenarios return a full page.
  for (let i = 0; i < LIST_SIZE + 10; i++) {
    await deps.db
      .insertInto('data_models')
      .values({ id: uuidv7(), organization_id: org.id, workspace_id: ws.id, name: `Model ${i}`, slug: `model-${i}`, description: null, retention_days: null })
      .execute();
  }
  return { form, token, modelId, workspaceId: ws.id };
}

/**
 * A plain Fastify instance (no hooks, no logger): one indexed SELECT by primary key, one
 * page of 50 rows of a workspace, and a route that answers without the database. Its
 * statements are compiled once and prepared on PostgreSQL, as the service's own are.
 */
async function bareServer(deps: Deps): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ logger: false });
  const byId = compileOnce(deps.db.selectFrom('data_models').selectAll().where('id', '=', slot('id')));
  const page = compileOnce(
    deps.db
      .selectFrom('data_models')
      .selectAll()
      .where('workspace_id', '=', slot('ws'))
      .orderBy('inserted_at', 'desc')
      .orderBy('id', 'desc')
      .limit(LIST_SIZE + 1),
  );
  app.get('/bare/data_models/:id', async (request, reply) => {
    const [row] = await runCompiled(deps.db, byId, { id: (request.params as { id: string }).id });
    if (!row) return reply.code(404).send({ error: 'not found' });
    return row;
  });
  app.get('/bare/workspaces/:ws/data_models', async (request) => {
    const rows = await runCompiled(deps.db, page, { ws: (request.params as { ws: string }).ws });
    return { data: rows.slice(0, LIST_SIZE) };
  });
  app.get('/bare/empty', async () => ({}));
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url };
}

function benchEngine(engine: Engine): Promise<EngineReport> {
  const skipped = (note: string): EngineReport => ({ engine, detail: 'PostgreSQL', rows: [], notes: [note] });
  return withEngine(engine, { prefix: 'tributary_bench', skipped }, async (run) => {
    const notes: string[] = [];
    const detail = inProcessDetail(engine, run.version);
    const { deps, url: appUrl } = await runApp(run);
    const { form, token, modelId, workspaceId } = await seed(deps, appUrl);
    const b = await bareServer(deps);
    run.defer('the bare server', () => b.app.close());

    console.log(`\n${detail}`);
    // The bare route is measured first and again last; ratios are to the mean of the two,
    // and the gap between them shows how much the machine's load drifted meanwhile.
    const bareUrl = `${b.url}/bare/data_models/${modelId}`;
    const readOpts: autocannon.Options = {
      url: `${appUrl}/api/json/v1/data_models/${modelId}`,
      headers: { authorization: `Bearer ${token}`, accept: JSONAPI },
    };
    const tokenOpts: autocannon.Options = {
      url: `${appUrl}/api/v1/oauth/token`,
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
    };
    const bareListUrl = `${b.url}/bare/workspaces/${workspaceId}/data_models`;
    const listOpts: autocannon.Options = {
      url: `${appUrl}/api/json/v1/data_models?page[limit]=${LIST_SIZE}`,
      headers: { authorization: `Bearer ${token}`, accept: JSONAPI },
    };
    // One discarded pass over every route first, so code they share (Kysely, the driver,
    // PGlite) is warm before the first measured scenario and not only before the last.
    for (const opts of [{ url: bareUrl }, readOpts, tokenOpts, { url: bareListUrl }, listOpts])
      await autocannon({ ...opts, connections: CONNECTIONS, duration: WARMUP, workers: 1 });
    const settings: MeasureSettings = {
      connections: CONNECTIONS,
      warmup: WARMUP,
      duration: DURATION,
      probe: engine === 'postgres' ? postgresCpuProbe(deps.db) : undefined,
    };
    const bareBefore = await measure('bare SELECT by id, plain Fastify (first)', { url: bareUrl }, settings);
    const read = await measure('GET /api/json/v1/data_models/{id} (bearer)', readOpts, settings);
    const tokenRow = await measure('POST /api/v1/oauth/token (client_credentials)', tokenOpts, settings);
    const bareAfter = await measure('bare SELECT by id, plain Fastify (last)', { url: bareUrl }, settings);
    const bareList = await measure(`bare page of ${LIST_SIZE}, plain Fastify`, { url: bareListUrl }, settings);
    const list = await measure(`GET /api/json/v1/data_models?page[limit]=${LIST_SIZE} (bearer)`, listOpts, settings);
    const empty = await measure('empty route, plain Fastify (no database)', { url: `${b.url}/bare/empty` }, settings);
    const bareRps = (bareBefore.rps + bareAfter.rps) / 2;
    const ratio = (r: Measured) => (bareRps > 0 ? r.rps / bareRps : undefined);
    const rows: Row[] = [bareBefore, read, tokenRow, bareAfter].map((r) => ({ ...r, ratio: ratio(r) }));
    const listRatio = bareList.rps > 0 ? list.rps / bareList.rps : 0;
    rows.push({ ...bareList, ratio: 1 }, { ...list, ratio: listRatio }, { ...empty, ratio: undefined });
    for (const r of rows)
      if (r.non2xx || r.errors) notes.push(`${r.scenario}: ${r.non2xx} non-2xx responses, ${r.errors} errors/timeouts; its figure is not valid.`);
    const readRatio = rows[1]!.ratio ?? 0;
    notes.push(
      `Authenticated read: ${fmt(readRatio * 100, 0)}% of bare (target >= ${TARGET_READ_RATIO * 100}%${engine === 'postgres' ? '' : ', set for PostgreSQL'}): ${readRatio >= TARGET_READ_RATIO ? 'met' : 'missed'}.`,
    );
    notes.push(
      `List of ${LIST_SIZE}: ${fmt(listRatio * 100, 0)}% of the bare page (target >= ${TARGET_LIST_RATIO * 100}%): ${listRatio >= TARGET_LIST_RATIO ? 'met' : 'missed'}.`,
    );
    notes.push(`Empty route: p50 ${fmt(empty.p50, 1)} ms (one round trip of the HTTP stack, the floor for the factQuery overhead target).`);
    notes.push(
      `Token exchange: ${fmt(tokenRow.rps, 0)}/s (target >= ${fmt(TARGET_TOKENS_PER_S, 0)}/s): ${tokenRow.rps >= TARGET_TOKENS_PER_S ? 'met' : 'missed'}.`,
    );
    return { engine, detail, rows, notes };
  });
}

function markdownTable(rows: Row[]): string {
  const withDb = rows.some((r) => r.dbCpuUs !== undefined);
  const withOther = rows.some((r) => r.otherLoad !== undefined);
  const lines = [
    `| Scenario | req/s (mean) | p50 latency (ms) | p99 latency (ms) | Ratio to bare | Server thread CPU per request (µs) |${withDb ? ' PostgreSQL backend CPU per request (µs) |' : ''}${withOther ? ' Other processes (% of all cores) |' : ''}`,
    `|---|---:|---:|---:|---:|---:|${withDb ? '---:|' : ''}${withOther ? '---:|' : ''}`,
  ];
  for (const r of rows) {
    const bad = r.non2xx || r.errors ? ` (non-2xx ${r.non2xx}, errors ${r.errors})` : '';
    const db = withDb ? ` ${r.dbCpuUs === undefined ? 'n/a' : fmt(r.dbCpuUs, 0)} |` : '';
    const other = withOther ? ` ${r.otherLoad === undefined ? 'n/a' : `${fmt(r.otherLoad * 100, 0)}%`} |` : '';
    lines.push(
      `| ${r.scenario}${bad} | ${fmt(r.rps, 0)} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${r.ratio === undefined ? 'n/a' : `${fmt(r.ratio * 100, 0)}%`} | ${fmt(r.cpuUs, 0)} |${db}${other}`,
    );
  }
  return lines.join('\n');
}

const HEADER = `# Benchmarks

## How to run

\`npm run bench\` (\`node bench/run.ts\`, about a minute and a half). For each engine it
creates a fresh database (in-memory PGlite always; on PostgreSQL a scratch database
\`tributary_bench_<random>\`, created then dropped, on the server of \`BENCH_DATABASE_URL\`,
else \`DATABASE_URL\`, else \`${DEFAULT_PG}\`; skipped with a note if
unreachable), starts the app in-process on 127.0.0.1, seeds one tenant, one service
account and one data model through the admin service and the JSON:API, and drives
autocannon over loopback against:

- **bare SELECT by id**: a separate plain Fastify instance (no logger, none of our hooks)
  on another port whose one route runs \`select * from data_models where id = $1\`
  through the same Kysely \`db\` handle (compiled once, prepared on PostgreSQL) and
  returns the row as JSON. The baseline.
- **GET /api/json/v1/data_models/{id}** with a bearer token: token verification, the
  service-account lookup, the per-account rate window, JSON:API negotiation, the
  visible-row SELECT and JSON:API serialization.
- **POST /api/v1/oauth/token**: client_credentials with a form body.
- **bare page of 50** and **GET /api/json/v1/data_models?page[limit]=50**: the same
  comparison for a list (60 data models in the workspace); the bare route's statement is
  compiled once and prepared, as the service's are.
- **empty route**: plain Fastify answering \`{}\` without the database: one HTTP round trip.

After one discarded 2 s pass over every route, each scenario gets a 2 s warm-up
(discarded) and a measured run (default 8 s), 16 connections, no pipelining. The bare
route is measured first and again last; "ratio to bare" is relative to the mean of the
two, and the gap between them shows how much the machine's load drifted meanwhile.

Besides autocannon's figures, CPU columns:

- **Server thread CPU per request**: \`process.threadCpuUsage()\` of the thread running the
  servers over the measured run, divided by the requests completed. It covers Fastify,
  our hooks, Kysely and the driver (with PGlite, the database too), not PostgreSQL nor the
  load generator, and it moves far less than req/s when other work competes for the cores.
- **PostgreSQL backend CPU per request** (PostgreSQL on this machine only): user+system
  time of the backends serving the app's pool, read from \`/proc\` (10 ms ticks, so
  approximate).

And one to judge the run by: **other processes**, the busy CPU of everything else on the
machine during the measured run (\`/proc/stat\` minus this process minus those backends)
as a share of all cores. Anything well above a few percent means the figures of that row
were taken on a contended machine.

The app runs with \`LOG_LEVEL=silent\` and rate windows it cannot exhaust
(\`RATE_LIMIT_MAX=1000000\` and \`TOKEN_RATE_LIMIT_MAX=1000000000\`, each per 1 s), so the
limiters run but never reject. With the default per-address token window a single client
could not sustain the token rate below; that figure is the endpoint's capacity.

Options: \`BENCH_DURATION\` (seconds, default 8), \`BENCH_CONNECTIONS\` (default 16),
\`BENCH_ENGINES\` (default \`pglite,postgres\`), \`BENCH_NO_WRITE=1\` (print only). Each run
adds a section above the earlier ones.

Targets: authenticated read >= ${TARGET_READ_RATIO * 100}% of the bare route; list of ${LIST_SIZE} >= ${TARGET_LIST_RATIO * 100}% of the bare page; token exchange >= ${fmt(TARGET_TOKENS_PER_S, 0)}/s.

**Caveat:** the load generator (autocannon, in a worker thread of the same process) shares
the machine's cores with the server and, on PostgreSQL, with the database server. On a
2-core machine absolute req/s are low and noisy, more so while other work (a test run, a
type check) is going on: see the "other processes" column. The host is a VM, so it can
slow down with nothing else busy in it: in one run below the bare route lost 30% of its
rate, and its CPU per request rose by a third, between its first and last measurement.
Compare ratios and CPU per request within one run rather than req/s across runs.
`;

const SECTION_MARK = '\n## Run ';

function writeRun(reports: EngineReport[], started: Date, loadBefore: string): void {
  const section = [
    runHeading(2, started),
    '',
    `Command: \`npm run bench\` (duration ${DURATION} s per scenario after a ${WARMUP} s warm-up, ${CONNECTIONS} connections, pipelining 1)`,
    '',
    `${machineLine()} The load generator shares these cores with the server${reports.some((r) => r.engine === 'postgres' && r.rows.length > 0) ? ' and PostgreSQL' : ''}.`,
    '',
    ...freeBlock(),
    '',
    `Load average (1 / 5 / 15 min) before the run: ${loadBefore}.`,
    '',
    ...reports.flatMap((r) => [
      `### ${r.engine === 'pglite' ? 'PGlite' : 'PostgreSQL'}`,
      '',
      r.detail + '.',
      '',
      ...(r.rows.length > 0 ? [markdownTable(r.rows), ''] : []),
      ...r.notes.map((n) => `- ${n}`),
      '',
    ]),
  ].join('\n');

  // The header is rewritten; the sections other benchmarks keep between it and the runs,
  // and the earlier runs, are kept as they are.
  let others = '';
  let older = '';
  if (fs.existsSync(DOC)) {
    const existing = fs.readFileSync(DOC, 'utf8');
    const at = existing.indexOf(SECTION_MARK);
    const before = at >= 0 ? existing.slice(0, at + 1) : existing;
    if (at >= 0) older = existing.slice(at + 1);
    const howTo = before.indexOf('## How to run');
    const next = howTo >= 0 ? before.indexOf('\n## ', howTo) : -1;
    if (next >= 0) others = before.slice(next + 1).trimEnd() + '\n';
    else if (howTo < 0 && before.trim() !== '') others = `## Earlier notes\n\n${before.replace(/^# .*\n/, '').trim()}\n`;
  }
  writeDoc(DOC, `${HEADER}\n${others ? `${others}\n` : ''}${section}${older ? `\n${older.trimEnd()}\n` : ''}`);
}

console.log(`bench: ${DURATION} s per scenario (+${WARMUP} s warm-up), ${CONNECTIONS} connections, engines ${ENGINES.join(', ')}`);
runBench(benchEngine, writeRun);
