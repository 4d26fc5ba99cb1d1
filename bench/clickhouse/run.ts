/**
 * The facts of bench/fact-scale.ts in ClickHouse, and the same answers side by side
 * (issue 37 item 5).
 *
 *   npm run bench:fact-scale -- --keep     first: leaves tributary_scale on PostgreSQL
 *   npm run bench:clickhouse               then this (--runs N, --no-write, --drop-pg)
 *
 * What it does, each step undone at the end:
 * - installs Debian's clickhouse-server when /usr/sbin/clickhouse-server is missing
 *   (apt-get, through sudo unless root);
 * - starts it on 127.0.0.1 with its own config, data and logs in a temporary directory, on
 *   free ports (never 8123/9000), at nice 19, and stops it at the end;
 * - installs the official `@clickhouse/client` into a temporary folder
 *   (npm install --prefix) and imports it from there: it is never a dependency of ours;
 * - copies the orders facts out of PostgreSQL (COPY ... TO STDOUT, streamed into the
 *   client's insert as TabSeparated) into the table layout we would use, checks the
 *   answers against PostgreSQL's, and times the same queries (2 warm-up runs, then --runs).
 *
 * Debian's ClickHouse is 18.16 (2018): its figures are a lower bound of a current release.
 * What 18.16 lacks, and what stands in for it here, is listed in the report.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import {
  DEFAULT_PG,
  ROOT,
  fmt,
  latencyStats as stats,
  timedRuns,
  type LatencyStats as Stats,
  freePort,
  loadAverage,
  machineLine,
  writeSection,
} from '../common.ts';

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '7' },
    'no-write': { type: 'boolean', default: false },
    database: { type: 'string', default: 'tributary_scale' },
    'drop-pg': { type: 'boolean', default: false },
    history: { type: 'boolean', default: false },
  },
});
const RUNS = Math.max(5, Number(opts.runs));
const DB_NAME = opts.database!;
if (!/^[a-z_][a-z0-9_]*$/.test(DB_NAME)) throw new Error('--database must be a plain lower-case name');
const DAY_MS = 86_400_000;
const CLIENT_VERSION = '1.23.1';
const SERVER = '/usr/sbin/clickhouse-server';

/** The part of @clickhouse/client this script uses (it is not a dependency, so not typed by its package here). */
interface ChClientOptions {
  url: string;
  request_timeout: number;
  clickhouse_settings: Record<string, unknown>;
}

interface ChClient {
  query(p: { query: string; format: 'JSONEachRow' }): Promise<{ json<T>(): Promise<T[]> }>;
  command(p: { query: string }): Promise<unknown>;
  insert(p: { table: string; values: unknown; format: string }): Promise<unknown>;
  close(): Promise<void>;
}

function pgUrl(): string {
  const u = new URL(process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_PG);
  u.pathname = `/${DB_NAME}`;
  return u.toString();
}

function installServer(): void {
  if (fs.existsSync(SERVER)) return;
  console.log('  installing clickhouse-server (Debian)');
  const root = process.getuid?.() === 0;
  const run = (args: string[]) =>
    execFileSync(root ? args[0]! : 'sudo', root ? args.slice(1) : args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  run(['apt-get', 'install', '-y', '--no-install-recommends', 'clickhouse-server']);
}

async function importClient(dir: string): Promise<(o: ChClientOptions) => ChClient> {
  const prefix = path.join(dir, 'client');
  execFileSync('npm', ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--no-save', `@clickhouse/client@${CLIENT_VERSION}`], { stdio: 'ignore' });
  const resolved = createRequire(path.join(prefix, 'package.json')).resolve('@clickhouse/client');
  const mod = (await import(resolved)) as { createClient: (o: ChClientOptions) => ChClient };
  return mod.createClient;
}

/** A server of our own: config, users, data and logs under `dir`, loopback only. */
async function startServer(dir: string): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const http = await freePort();
  const tcp = await freePort();
  for (const d of ['data', 'tmp', 'user_files']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'users.xml'),
    `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>6000000000</max_memory_usage><max_threads>2</max_threads></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`,
  );
  fs.writeFileSync(
    path.join(dir, 'config.xml'),
    `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${dir}/server.log</log><errorlog>${dir}/error.log</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${http}</http_port>
  <tcp_port>${tcp}</tcp_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>1073741824</mark_cache_size>
</yandex>
`,
  );
  const child = spawn('nice', ['-n', '19', SERVER, `--config-file=${dir}/config.xml`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const url = `http://127.0.0.1:${http}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`clickhouse-server exited with ${child.exitCode}: ${stderr.slice(-500)}`);
    try {
      if ((await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1000) })).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 300) throw new Error('clickhouse-server did not answer /ping within 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  };
  return { url, pid: child.pid!, stop };
}

/**
 * The layout we would use for one model's facts: the history, partitioned by month of
 * observed_at (a timeline window reads only its months), ordered by (workspace, model,
 * entity, time) so one entity's facts are adjacent for the latest-state reductions, the
 * indexed fields as typed columns and the rest of the fact as its JSON text. Instants are
 * UInt64 milliseconds since 18.16 has no DateTime64 (a current release would use
 * DateTime64(3, 'UTC')); observed_at is the second it falls in, for bucketing.
 */
const CREATE = `
create table facts (
  workspace_id String,
  data_model_id String,
  entity_id String,
  observed_ms UInt64,
  inserted_ms UInt64,
  id String,
  status String,
  region String,
  customer_id String,
  amount Nullable(Float64),
  placed_at String,
  data String,
  observed_at DateTime materialized toDateTime(intDiv(observed_ms, 1000))
) engine = MergeTree
partition by toYYYYMM(toDateTime(intDiv(observed_ms, 1000)))
order by (workspace_id, data_model_id, entity_id, observed_ms, inserted_ms, id)`;

/**
 * The latest state as ClickHouse keeps it: per (workspace, model, entity) the argMax states
 * of the fields by the writer's order, folded by merges (AggregatingMergeTree), fed from
 * every insert into facts by a materialized view. A read merges what is not folded yet
 * (`-Merge` over the entity's rows), so it is exact whatever the merges have done.
 */
const VERSION = 'tuple(observed_ms, inserted_ms, id)';
const CURRENT_COLUMNS = ['status', 'region', 'data'];
const CREATE_CURRENT = `
create table fact_current (
  workspace_id String,
  data_model_id String,
  entity_id String,
  v AggregateFunction(max, Tuple(UInt64, UInt64, String)),
  ${CURRENT_COLUMNS.map((c) => `${c} AggregateFunction(argMax, String, Tuple(UInt64, UInt64, String))`).join(',\n  ')}
) engine = AggregatingMergeTree
order by (workspace_id, data_model_id, entity_id)`;
const CREATE_CURRENT_FEED = `
create materialized view fact_current_feed to fact_current as
select workspace_id, data_model_id, entity_id, maxState(${VERSION}) as v,
       ${CURRENT_COLUMNS.map((c) => `argMaxState(${c}, ${VERSION}) as ${c}`).join(', ')}
from facts group by workspace_id, data_model_id, entity_id`;

const COPY = (model: string) => `copy (
  select workspace_id, data_model_id, entity_id, (extract(epoch from observed_at) * 1000)::bigint, (extract(epoch from inserted_at) * 1000)::bigint, id,
         coalesce(data->>'status', ''), coalesce(data->>'region', ''), coalesce(data->>'customer_id', ''), data->>'amount', coalesce(data->>'placed_at', ''), data::text
  from facts where data_model_id = '${model}') to stdout`;

const timeRuns = (f: () => Promise<unknown>) => timedRuns(f, RUNS);

async function main() {
  const started = new Date();
  const loadBefore = loadAverage();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-clickhouse-'));
  const pgc = new pg.Client({ connectionString: pgUrl() });
  await pgc.connect().catch((err: Error) => {
    throw new Error(`no ${DB_NAME} on PostgreSQL (run npm run bench:fact-scale -- --keep first): ${err.message}`);
  });
  let server: { url: string; pid: number; stop: () => Promise<void> } | undefined;
  let ch: ChClient | undefined;
  try {
    const { rows: models } = await pgc.query<{ id: string; workspace_id: string }>(`select id, workspace_id from data_models where slug = 'orders'`);
    const { id: model, workspace_id: ws } = models[0]!;
    const { rows: facts } = await pgc.query<{ n: number; now: string }>(
      `select count(*)::int as n, (extract(epoch from max(observed_at)) * 1000)::bigint::text as now from facts where data_model_id = $1`,
      [model],
    );
    const nFacts = facts[0]!.n;
    // The measured windows end just after the newest fact, as on PostgreSQL.
    const now = Number(facts[0]!.now) + 60_000;

    installServer();
    const createClient = await importClient(dir);
    server = await startServer(dir);
    // Progress headers keep the connection of a long load or merge alive.
    ch = createClient({
      url: server.url,
      request_timeout: 3_600_000,
      clickhouse_settings: { send_progress_in_http_headers: 1, http_headers_progress_interval_ms: '10000' },
    });
    const client = ch;
    const q = async <T>(query: string) => (await client.query({ query, format: 'JSONEachRow' })).json<T>();
    const version = (await q<{ v: string }>('select version() as v'))[0]!.v;
    console.log(`bench/clickhouse: ClickHouse ${version} at ${server.url}; ${fmt(nFacts)} orders facts from ${DB_NAME}; load ${loadBefore}`);

    await client.command({ query: CREATE });
    await client.command({ query: CREATE_CURRENT });
    await client.command({ query: CREATE_CURRENT_FEED });
    const t0 = performance.now();
    const copy = spawn('psql', [pgUrl(), '-X', '-q', '-c', COPY(model)], { stdio: ['ignore', 'pipe', 'inherit'] });
    await client.insert({ table: 'facts', values: copy.stdout, format: 'TabSeparated' });
    const loadSeconds = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    await client.command({ query: 'optimize table facts final' });
    await client.command({ query: 'optimize table fact_current final' });
    const optimizeSeconds = (performance.now() - t1) / 1000;
    const [size] = await q<{ n: string; bytes: string; raw: string }>(
      `select sum(rows) as n, sum(bytes_on_disk) as bytes, sum(data_uncompressed_bytes) as raw from system.parts where table = 'facts' and active`,
    );
    if (Number(size!.n) !== nFacts) throw new Error(`ClickHouse holds ${size!.n} facts, PostgreSQL ${nFacts}`);
    // Loaded at nice 19 (the machine is shared); measured at the priority PostgreSQL's queries have.
    try {
      execFileSync('renice', ['-n', '0', '-p', String(server.pid)], { stdio: 'ignore' });
    } catch {
      console.log('  (could not renice the server back to 0: its queries run at nice 19)');
    }
    const disk = `${(Number(size!.bytes) / 2 ** 30).toFixed(2)} GiB on disk (${(Number(size!.raw) / 2 ** 30).toFixed(2)} GiB uncompressed)`;
    console.log(`  loaded in ${loadSeconds.toFixed(1)} s, merged in ${optimizeSeconds.toFixed(1)} s; ${disk}`);

    const scope = `workspace_id = '${ws}' and data_model_id = '${model}'`;
    // The writer's order: the greatest (observed_at, inserted_at, id) is the entity's latest fact.
    const version_ = VERSION;
    const latest = (cols: string) => `select entity_id, max(${version_}) as v, ${cols} from facts where ${scope} group by entity_id`;
    const current = (cols: string) => `select entity_id, maxMerge(v) as v, ${cols} from fact_current where ${scope} group by entity_id`;
    // A page's facts by their keys: (entity, ..., id) leads the table's order.
    const pageData = async (page: Array<{ entity_id: string; v: [string, string, string] }>) =>
      page.length === 0
        ? []
        : q<{ data: string }>(
            `select data from facts where ${scope} and entity_id in (${page.map((r) => `'${r.entity_id}'`).join(',')}) and id in (${page.map((r) => `'${r.v[2]}'`).join(',')})`,
          );
    const since90 = now - 90 * DAY_MS;
    const end = Math.floor(now / DAY_MS) * DAY_MS + DAY_MS;
    const since366 = end - 366 * DAY_MS;
    const sec = (ms: number) => Math.floor(ms / 1000);

    const queries: Array<{ name: string; run: () => Promise<string> }> = [
      // Latest state recomputed from the history (argMax per entity) is a minute per run at 10M on
      // this machine: measured only when asked (--history); checked against PostgreSQL always.
      ...(opts.history ? (['history', 'current'] as const) : (['current'] as const)).flatMap((source) => {
        const from = source === 'history' ? latest : current;
        const arg = (c: string) => (source === 'history' ? `argMax(${c}, ${version_})` : `argMaxMerge(${c})`);
        const where = source === 'history' ? 'argMax over facts' : 'fact_current (AggregatingMergeTree)';
        return [
          {
            name: `(1) latest, status = open and region = eu: page of 50 + count; ${where}`,
            run: async () => {
              const filtered = `${from(`${arg('status')} as s, ${arg('region')} as r`)} having s = 'open' and r = 'eu'`;
              const [page, count] = await Promise.all([
                q<{ entity_id: string; v: [string, string, string] }>(`select entity_id, v from (${filtered}) order by v desc limit 51`),
                q<{ n: string }>(`select count() as n from (${filtered})`),
              ]);
              const data = await pageData(page);
              if (data.length !== page.length) throw new Error(`(1): ${data.length} facts for a page of ${page.length}`);
              return `${page.length} / ${fmt(Number(count[0]!.n))}`;
            },
          },
          {
            name: `(2) latest, count by status; ${where}`,
            run: async () => {
              const rows = await q<{ s: string; n: string }>(
                `select s, count() as n from (${from(`${arg('status')} as s`)}) group by s order by n desc, s limit 1001`,
              );
              return `${rows.length} groups`;
            },
          },
        ];
      }),
      {
        name: '(3) timeline, 90 daily counts',
        run: async () => {
          const rows = await q<{ b: string; n: string }>(
            `select toStartOfDay(observed_at, 'UTC') as b, count() as n from facts where ${scope} and observed_ms >= ${since90} and observed_ms < ${now} group by b order by b`,
          );
          return `${rows.length} buckets / ${fmt(rows.reduce((a, r) => a + Number(r.n), 0))}`;
        },
      },
      {
        name: '(4) series, open at each of 366 day ends',
        // 18.16 has no window functions (lead, a running sum): per entity its facts as a sorted
        // array, each open fact's span [its time, the next fact's) turned into +1 / -1 at the
        // days holding its ends, summed per day, then a running sum over the days' array.
        // Its lambdas cannot capture columns either: the next fact's time is a shifted array.
        run: async () => {
          const day = (ms: string) => `greatest(toUInt32(toStartOfDay(toDateTime(intDiv(${ms}, 1000)), 'UTC')), ${sec(since366)})`;
          const rows = await q<{ days: string[]; n: string[] }>(`
            select groupArray(b) as days, arrayCumSum(groupArray(d)) as n from (
              select b, sum(d) as d from (
                select b, d from (select arrayJoin(arrayConcat(
                  arrayMap(ti -> (${day('ti')}, toInt64(1)), arrayFilter((ti, oi) -> oi, t, o)),
                  arrayMap(ni -> (${day('ni')}, toInt64(-1)), arrayFilter((ni, oi) -> oi and ni != 0 and ni < ${end}, tn, o))
                )) as e, e.1 as b, e.2 as d
                from (
                  select t, o, arrayPushBack(arrayPopFront(t), toUInt64(0)) as tn from (
                    select arrayMap(x -> x.1, s) as t, arrayMap(x -> x.4 = 'open', s) as o
                    from (select arraySort(groupArray(tuple(observed_ms, inserted_ms, id, status))) as s from facts where ${scope} and observed_ms < ${end} group by entity_id)
                  )
                ))
                union all
                select toUInt32(${sec(since366)} + number * 86400) as b, toInt64(0) as d from system.numbers limit 366
              ) group by b order by b
            )`);
          seriesAnswer = rows[0]!.n.map(Number);
          return `${rows[0]!.days.length} buckets`;
        },
      },
    ];
    let seriesAnswer: number[] = [];

    // The same answers as PostgreSQL's before timing: the counts of (1) and (2), the days of (3), two days of (4).
    const pgAnswer = async (text: string, params: unknown[]) => (await pgc.query(text, params)).rows;
    const pgGroups = await pgAnswer(
      `select data->>'status' as s, count(*)::int as n from fact_current where data_model_id = $1 and axis = 'observed_at' group by 1 order by 2 desc, 1`,
      [model],
    );
    for (const from of [latest, current]) {
      const arg = from === latest ? `argMax(status, ${version_})` : 'argMaxMerge(status)';
      const chGroups = await q<{ s: string; n: string }>(`select s, count() as n from (${from(`${arg} as s`)}) group by s order by n desc, s`);
      if (JSON.stringify(chGroups.map((r) => [r.s, Number(r.n)])) !== JSON.stringify(pgGroups.map((r) => [r.s, r.n])))
        throw new Error(`(2) differs: ClickHouse ${JSON.stringify(chGroups)}, PostgreSQL ${JSON.stringify(pgGroups)}`);
    }
    const answers: string[] = [];
    for (const x of queries) answers.push(await x.run());
    const pgOpen = await pgAnswer(
      `select count(*)::int as n from fact_current where data_model_id = $1 and axis = 'observed_at' and data @> '{"status":"open","region":"eu"}'`,
      [model],
    );
    const answerOf = (prefix: string) => answers.filter((_, i) => queries[i]!.name.startsWith(prefix));
    for (const a of answerOf('(1)'))
      if (!a.endsWith(`/ ${fmt(pgOpen[0]!.n)}`)) throw new Error(`(1) differs: ClickHouse ${a}, PostgreSQL count ${pgOpen[0]!.n}`);
    const pgDays = await pgAnswer(
      `select count(*)::int as n from facts where data_model_id = $1 and observed_at >= to_timestamp($2 / 1000.0) and observed_at < to_timestamp($3 / 1000.0)`,
      [model, since90, now],
    );
    for (const a of answerOf('(3)')) if (!a.endsWith(`/ ${fmt(pgDays[0]!.n)}`)) throw new Error(`(3) differs: ClickHouse ${a}, PostgreSQL ${pgDays[0]!.n}`);
    const lastOpen = await pgAnswer(
      `select count(*)::int as n from fact_current where data_model_id = $1 and axis = 'observed_at' and data->>'status' = 'open' and observed_at < to_timestamp($2 / 1000.0)`,
      [model, end],
    );
    if (seriesAnswer.length !== 366 || seriesAnswer[365] !== lastOpen[0]!.n)
      throw new Error(`(4) differs: ClickHouse's last day ${seriesAnswer[365]}, PostgreSQL ${lastOpen[0]!.n}`);
    console.log('  checks: (1) count, (2) groups, (3) total and (4) last day equal PostgreSQL');

    const rows: Array<{ name: string; answer: string; s: Stats; unit: string }> = [];
    for (const [i, x] of queries.entries()) {
      const s = await timeRuns(x.run);
      rows.push({ name: x.name, answer: answers[i]!, s, unit: 'ms' });
      console.log(`  ${x.name}: ${answers[i]}; p50 ${s.p50.toFixed(2)} ms, p95 ${s.p95.toFixed(2)} ms (n ${s.n}); load ${loadAverage()}`);
    }
    // Inserts, as a feed would send them: one fact, and 500 (each insert is a part of its own, merged later).
    const { rows: sample } = await pgc.query<unknown[]>({
      text: `${COPY(model)
        .replace(/^copy \(/, '')
        .replace(/\) to stdout$/, '')} limit 500`,
      rowMode: 'array',
    });
    const asRow = (v: unknown[]) => {
      return {
        workspace_id: v[0],
        data_model_id: v[1],
        entity_id: v[2],
        observed_ms: Number(v[3]),
        inserted_ms: Number(v[4]),
        id: v[5],
        status: v[6],
        region: v[7],
        customer_id: v[8],
        amount: v[9] === null ? null : Number(v[9]),
        placed_at: v[10],
        data: v[11],
      };
    };
    await client.command({ query: 'create table facts_feed as facts' });
    const single: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t = performance.now();
      await client.insert({ table: 'facts_feed', values: [asRow(sample[i % sample.length]!)], format: 'JSONEachRow' });
      single.push(performance.now() - t);
    }
    const batch: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      await client.insert({ table: 'facts_feed', values: sample.map(asRow), format: 'JSONEachRow' });
      batch.push((performance.now() - t) / sample.length);
    }
    rows.push({ name: '(5) insert, one fact per call', answer: '50 calls', s: stats(single.slice(5)), unit: 'ms/fact' });
    rows.push({ name: `(5) insert, ${sample.length} facts per call`, answer: `${RUNS} calls`, s: stats(batch), unit: 'ms/fact' });

    const table = [
      '| Query | Answer | p50 | p95 | Runs |',
      '|---|---|---:|---:|---:|',
      ...rows.map(
        (r) =>
          `| ${r.name} | ${r.answer} | ${r.s.p50.toFixed(r.unit === 'ms' ? 2 : 3)} ${r.unit} | ${r.s.p95.toFixed(r.unit === 'ms' ? 2 : 3)} ${r.unit} | ${r.s.n} |`,
      ),
    ];
    console.log(`\n${table.join('\n')}\n`);
    const runText = [
      `### Run ${started.toISOString().replace(/\.\d+Z$/, 'Z')}, ${fmt(nFacts)} facts`,
      '',
      `Command: \`npm run bench:clickhouse\` after \`npm run bench:fact-scale -- --keep\`. ${machineLine()} Load average (1/5/15 min) before: ${loadBefore}, after: ${loadAverage()}.`,
      '',
      `ClickHouse ${version} (Debian), one server on loopback (loaded at nice 19, measured at 0), max_threads 2, @clickhouse/client ${CLIENT_VERSION}. ${fmt(nFacts)} orders facts copied from PostgreSQL in ${loadSeconds.toFixed(0)} s (COPY streamed into one insert), merged to one part per month in ${optimizeSeconds.toFixed(0)} s; ${disk}.`,
      '',
      ...table,
      '',
    ].join('\n');
    if (!opts['no-write']) writeSection(`${ROOT}/docs/benchmarks-facts.md`, '## ClickHouse side by side (bench/clickhouse/run.ts)', INTRO, runText, []);
  } finally {
    await ch?.close().catch(() => undefined);
    await server?.stop();
    await pgc.end();
    if (opts['drop-pg']) {
      const admin = new pg.Client({ connectionString: process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_PG });
      await admin.connect();
      await admin.query(`drop database if exists ${DB_NAME} with (force)`);
      await admin.end();
      console.log(`  dropped ${DB_NAME}`);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const INTRO = `## ClickHouse side by side (bench/clickhouse/run.ts)

\`npm run bench:clickhouse\` (see the header of bench/clickhouse/run.ts) copies the orders
facts that \`npm run bench:fact-scale -- --keep\` left in PostgreSQL into Debian's ClickHouse
(18.16, from 2018: **its figures are a lower bound of a current release**), started on loopback
by the script and stopped at its end, through the official \`@clickhouse/client\` installed into
a temporary folder. The table: MergeTree partitioned by month of observed_at, ordered by
(workspace, model, entity, observed, inserted, id), the indexed fields as typed columns, the
fact's JSON beside them. Latest state is an AggregatingMergeTree of \`argMaxState\`s by the
writer's order (a tuple), filled by a materialized view from the same inserts and merged on
read; with \`--history\` also \`argMax\` over each entity's history per query (over 50 s a run at
10M here). Answers are checked against PostgreSQL's before timing.

What 18.16 lacks, and what stands in for it: DateTime64 (millisecond instants are UInt64
columns); window functions (series: per-entity sorted arrays and \`arrayCumSum\`; a current
release would write it as on PostgreSQL, with \`lead\` and a running \`sum\`);
LowCardinality is experimental in 18.16 (strings are plain String columns); lambdas cannot
capture columns (the next fact's time is a shifted array); projections, parallel \`FINAL\`
on ReplacingMergeTree and lightweight deletes are newer too.
`;

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
