/**
 * The fact store beyond today's scale (issue 37 item 5): N facts over N/10 entities in one
 * PostgreSQL database, and the raw SQL of the issue's answers on them.
 *
 *   npm run bench:fact-scale                      10,000,000 facts over 1,000,000 entities
 *   npm run bench:fact-scale -- --facts 1000000   the 1M size
 *
 * Options: --facts N (1,000..50,000,000), --entities N (default facts / 10), --runs N
 * (measured runs per query, at least 5, default 7), --database NAME (default tributary_scale), --keep (leave the database for the
 * next look, its size is printed), --reuse (measure on the database a --keep run left, no
 * load; give the same --facts), --no-write (do not touch docs/benchmarks-facts.md).
 * The server is BENCH_DATABASE_URL / DATABASE_URL / postgres://postgres@127.0.0.1:5432/postgres;
 * the database is `tributary_scale` on it, dropped and created afresh, migrated with our
 * migrations.
 *
 * Load: a workspace, `orders` (order_id the primary key; status, region, customer_id,
 * amount float, placed_at datetime; status, region and amount indexed: typed slots
 * backfilled and indexed by createFieldIndex after the load, as when a field is indexed) and
 * `customers` (entities / 10, one fact each). One `insert ... select from generate_series`
 * per model producing exactly the rows writeFacts would store (uuidv7 ids of the write
 * instant, entity ids, derived source keys, data), fact_current from the history with the
 * writer's order on both axes, the indexes built after the rows. The load's backend runs at
 * nice 19 (the machine is shared); the measured queries do not.
 *
 * Checks before anything is timed: a sample of loaded facts against validateFact (entity,
 * source key, data), the loaded items written again through writeFacts (each a duplicate:
 * the writer derives the same source key), newer facts for loaded entities through
 * writeFacts (each becomes its entity's fact_current on both axes, as the load's rule
 * says), and the series' last and middle days against factQuery's latest count as of them.
 *
 * Measured (after 2 warm-up runs, then --runs runs, p50 and p95): a filtered latest page
 * with its count (the resolver's planFactQuery, selectPage and selectCount, concurrently);
 * then factAggregate's SQL (checkAggregateArguments, planAggregate, runAggregate, which runs
 * runSeries for a series): a count grouped by status over latest; a 90-day daily count over
 * the timeline; a 366-day series of open orders at each day's end; and writeFacts of one
 * fact and of 500, to existing entities, per fact.
 */
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrate.ts';
import { checkArguments } from '../src/graphql/fact-query.ts';
import { SLOTTED_TYPES, createFieldIndex } from '../src/facts/field-index.sql.ts';
import { planFactQuery } from '../src/facts/query/plan.ts';
import { selectCount, selectPage } from '../src/facts/query/page.sql.ts';
import type { FactQueryPlan } from '../src/facts/query/plan-types.ts';
import { runAggregate } from '../src/facts/aggregate/aggregate.sql.ts';
import { planAggregate } from '../src/facts/aggregate/plan.ts';
import type { AggregatePlan, AggregateResult } from '../src/facts/aggregate/plan-types.ts';
import { checkAggregateArguments } from '../src/graphql/fact-aggregate.ts';
import { validateFact } from '../src/facts/validate.ts';
import { writeFacts, type FactModel } from '../src/facts/write.ts';
import { canonicalJson } from '../src/json.ts';
import type { FieldType } from '../src/db/tables.ts';
import {
  DEFAULT_PG,
  ROOT,
  fmt,
  latencyStats as stats,
  timedRuns,
  type LatencyStats as Stats,
  insertBenchModel,
  loadAverage,
  machineLine,
  redact,
  seedTenant,
  watchdog,
  writeSection,
} from './common.ts';

const { values: opts } = parseArgs({
  options: {
    facts: { type: 'string', default: '10000000' },
    entities: { type: 'string' },
    runs: { type: 'string', default: '7' },
    keep: { type: 'boolean', default: false },
    reuse: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    database: { type: 'string', default: 'tributary_scale' },
  },
});

function whole(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be a whole number between ${min} and ${max}`);
  return n;
}

const FACTS = whole('facts', opts.facts!, 1_000, 50_000_000);
const ENTITIES = whole('entities', opts.entities ?? String(Math.max(100, Math.floor(FACTS / 10))), 10, FACTS);
const CUSTOMERS = Math.max(10, Math.floor(ENTITIES / 10));
const RUNS = whole('runs', opts.runs!, 5, 1000);
const DB_NAME = opts.database!;
if (!/^[a-z_][a-z0-9_]*$/.test(DB_NAME)) throw new Error('--database must be a plain lower-case name');
const DAY_MS = 86_400_000;
const BATCH = 500;
const SINGLE_WRITES = 200;

watchdog('bench/fact-scale', 3 * 3600 * 1000);

export interface GenField {
  name: string;
  type: FieldType;
  primaryKey?: boolean;
  indexed?: boolean;
  /** SQL over n (the fact's number), h (a hash of n) and o (its observed_at). */
  expr: string;
}

export interface GenModel {
  slug: string;
  fields: GenField[];
}

/** `orders`: ENTITIES orders, each with FACTS / ENTITIES facts at random instants of the year. */
export const ORDERS: GenModel = {
  slug: 'orders',
  fields: [
    { name: 'order_id', type: 'string', primaryKey: true, expr: `'ord-' || lpad((n % ${ENTITIES})::text, 8, '0')` },
    { name: 'status', type: 'string', indexed: true, expr: `(array['open','paid','shipped','cancelled'])[1 + (h % 4)]` },
    { name: 'region', type: 'string', indexed: true, expr: `(array['eu','us','apac','latam','mea'])[1 + ((h / 4) % 5)]` },
    { name: 'customer_id', type: 'string', expr: `'cus-' || lpad(((h / 20) % ${CUSTOMERS})::text, 7, '0')` },
    // float8 prints its shortest round-trip form, as JSON.stringify does, so the canonical text agrees.
    { name: 'amount', type: 'float', indexed: true, expr: `((h / 7) % 100000)::float8 / 100` },
    { name: 'placed_at', type: 'datetime', expr: `to_char((o - (h % 86400) * interval '1 second') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')` },
  ],
};

export const CUSTOMERS_MODEL: GenModel = {
  slug: 'customers',
  fields: [
    { name: 'customer_id', type: 'string', primaryKey: true, expr: `'cus-' || lpad((n % ${CUSTOMERS})::text, 7, '0')` },
    { name: 'segment', type: 'string', expr: `(array['smb','mid','enterprise'])[1 + (h % 3)]` },
    { name: 'country', type: 'string', expr: `(array['de','fr','us','br','in','jp','za'])[1 + ((h / 3) % 7)]` },
  ],
};

/**
 * The facts of one model, as writeFacts stores the item {observed_at, data} (no source
 * key given): data the fields as jsonb; entity_id the primary key's string; source_key
 * 'sha256:' || hex sha256 of canonicalJson([observedAt ISO, data]) (members sorted, no
 * spaces; every string here is [a-zA-Z0-9:.-], its JSON text itself in quotes); id a
 * uuidv7 of the write instant; inserted_at that instant, 1 s to 5 min after observed_at.
 */
export function insertSql(m: GenModel, ids: { org: string; ws: string; model: string }, count: number, endMs: number, salt: number): string {
  const span = 365 * DAY_MS;
  const start = endMs - span - 3_600_000;
  const sorted = [...m.fields].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const quoted = (f: GenField) => f.type === 'string' || f.type === 'datetime';
  const canon = sorted.map((f, i) => `'${i === 0 ? '' : ','}"${f.name}":' || ${quoted(f) ? `'"' || g.${f.name} || '"'` : `g.${f.name}::text`}`).join(' || ');
  const obj = m.fields.map((f) => `'${f.name}', g.${f.name}`).join(', ');
  const pk = m.fields.find((f) => f.primaryKey)!;
  const cols = m.fields.map((f) => `${f.expr} as ${f.name}`).join(', ');
  return `
    insert into facts (id, organization_id, workspace_id, data_model_id, entity_id, observed_at, inserted_at, data, source_key)
    select
      (substr(g.ihex, 1, 8) || '-' || substr(g.ihex, 9, 4) || '-7' || substr(g.u, 16))::uuid,
      '${ids.org}', '${ids.ws}', '${ids.model}',
      g.${pk.name}, g.o, g.i,
      jsonb_build_object(${obj}),
      'sha256:' || encode(sha256(convert_to('["' || to_char(g.o at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '",{' || ${canon} || '}]', 'UTF8')), 'hex')
    from (
      select n, o, i, lpad(to_hex((extract(epoch from i) * 1000)::bigint), 12, '0') as ihex, gen_random_uuid()::text as u, ${cols}
      from (
        select n, h, timestamptz 'epoch' + ms * interval '1 millisecond' as o,
               timestamptz 'epoch' + (ms + 1000 + (n * 7919) % 299000) * interval '1 millisecond' as i
        from (
          select n, (hashint8(n + ${salt}) & 2147483647)::bigint as h, ${start} + (n * 2654435761 + ${salt}) % ${span} as ms
          from generate_series(0::bigint, ${count - 1}::bigint) as s(n)
        ) as x
      ) as y
    ) as g`;
}

/** fact_current of one model and axis from the whole history: the writer's greatest fact per entity. */
export function currentSql(modelId: string, axis: 'observed_at' | 'inserted_at'): string {
  const order = axis === 'observed_at' ? 'f.observed_at desc, f.inserted_at desc, f.id desc' : 'f.inserted_at desc, f.id desc';
  return `
    insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
    select distinct on (entity_key) f.data_model_id, '${axis}', coalesce(f.entity_id, '#' || f.id::text) as entity_key,
           f.id, f.workspace_id, f.entity_id, f.observed_at, f.inserted_at, f.data
    from facts f where f.data_model_id = '${modelId}'
    order by entity_key, ${order}`;
}

// ---------------------------------------------------------------------------------------
// The database

function serverUrl(): string {
  return process.env.BENCH_DATABASE_URL || process.env.DATABASE_URL || DEFAULT_PG;
}

function dbUrl(): string {
  const u = new URL(serverUrl());
  u.pathname = `/${DB_NAME}`;
  return u.toString();
}

async function recreateDatabase(): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl() });
  await c.connect();
  try {
    await c.query(`drop database if exists ${DB_NAME} with (force)`);
    await c.query(`create database ${DB_NAME}`);
  } finally {
    await c.end();
  }
}

async function databaseExists(): Promise<boolean> {
  const c = new pg.Client({ connectionString: serverUrl() });
  await c.connect();
  try {
    return (await c.query('select 1 from pg_database where datname = $1', [DB_NAME])).rowCount === 1;
  } finally {
    await c.end();
  }
}

async function dropDatabase(): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl() });
  await c.connect();
  try {
    await c.query(`drop database if exists ${DB_NAME} with (force)`);
  } finally {
    await c.end();
  }
}

interface Step {
  label: string;
  seconds: number;
}

/**
 * The load, on a connection of its own whose backend is reniced to 19 (CPU left to the
 * other engineers' work first). FK triggers are off for it (session_replication_role):
 * every row names the one model, workspace and organization made just before. Secondary
 * indexes and facts' keys are built after the rows: a sorted build beats ten million
 * insertions in random order.
 */
async function load(ids: { org: string; ws: string }, models: { orders: string; customers: string }, endMs: number): Promise<Step[]> {
  const c = new pg.Client({ connectionString: dbUrl() });
  await c.connect();
  const steps: Step[] = [];
  const step = async (label: string, text: string) => {
    const t0 = performance.now();
    await c.query(text);
    steps.push({ label, seconds: (performance.now() - t0) / 1000 });
    console.log(`  ${label}: ${steps.at(-1)!.seconds.toFixed(1)} s`);
  };
  try {
    const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
    try {
      execFileSync('renice', ['-n', '19', '-p', String(rows[0]!.pid)], { stdio: 'ignore' });
    } catch {
      console.log('  (could not renice the load backend: PostgreSQL is not local or not ours)');
    }
    await c.query(`set maintenance_work_mem = '1GB'`);
    // Parallel workers would be processes of their own, outside the renice.
    await c.query('set max_parallel_maintenance_workers = 0');
    await c.query('set max_parallel_workers_per_gather = 0');
    await c.query(`set session_replication_role = replica`);
    const { rows: indexes } = await c.query<{ indexname: string; indexdef: string }>(`
      select indexname, indexdef from pg_indexes
      where schemaname = current_schema() and tablename in ('facts', 'fact_current')
        and indexname not in (select conname from pg_constraint)
      order by indexname`);
    for (const i of indexes) await c.query(`drop index ${i.indexname}`);
    await c.query('alter table facts drop constraint facts_pkey, drop constraint facts_model_source_key');
    await step(`insert ${fmt(FACTS)} orders facts`, insertSql(ORDERS, { org: ids.org, ws: ids.ws, model: models.orders }, FACTS, endMs, 1));
    await step(
      `insert ${fmt(CUSTOMERS)} customers facts`,
      insertSql(CUSTOMERS_MODEL, { org: ids.org, ws: ids.ws, model: models.customers }, CUSTOMERS, endMs, 7),
    );
    await step(
      'facts keys (primary, source key)',
      'alter table facts add constraint facts_pkey primary key (id), add constraint facts_model_source_key unique (data_model_id, source_key)',
    );
    await step(
      'fact_current, both models and axes',
      [models.orders, models.customers].flatMap((m) => [currentSql(m, 'observed_at'), currentSql(m, 'inserted_at')]).join(';\n'),
    );
    // An index of a partitioned table is listed as `ON ONLY` the parent; built that way it would cover no partition.
    await step(`${indexes.length} secondary indexes`, indexes.map((i) => i.indexdef.replace(' ON ONLY ', ' ON ')).join(';\n'));
    await c.query('set session_replication_role = origin');
    await step('vacuum analyze', 'vacuum (analyze) facts, fact_current');
  } finally {
    await c.end();
  }
  return steps;
}

const fields = (m: GenModel) =>
  m.fields.map((f) => ({
    name: f.name,
    type: f.type,
    is_primary_key: f.primaryKey ?? false,
    is_required: f.primaryKey ?? false,
    is_indexed: f.indexed ?? false,
  }));

/** The indexed fields' typed slots, backfilled, and their indexes (field-index.sql.ts), after the load. */
async function indexFields(
  db: Db,
  ids: { org: string; ws: string },
  model: string,
  fieldIds: Map<string, string>,
): Promise<{ fields: string[]; seconds: number }> {
  const t0 = performance.now();
  const fields: string[] = [];
  for (const f of ORDERS.fields.filter((x) => x.indexed && SLOTTED_TYPES.has(x.type))) {
    await createFieldIndex(db, 'plain', { id: fieldIds.get(f.name)!, workspace_id: ids.ws, data_model_id: model, name: f.name, type: f.type });
    fields.push(f.name);
  }
  // The backfill rewrote every row: vacuumed, as autovacuum would before long, so the reads see no dead rows.
  await sql`vacuum (analyze) facts, fact_current`.execute(db);
  return { fields, seconds: (performance.now() - t0) / 1000 };
}

// ---------------------------------------------------------------------------------------
// Checks

/** The loaded rows are what writeFacts would have stored: a sample validated, then written again through it. */
async function checkLoad(db: Db, scope: { organizationId: string; workspaceId: string }, model: FactModel, endMs: number): Promise<void> {
  const { rows } = await sql<{ id: string; entity_id: string; observed_at: Date; inserted_at: Date; data: Record<string, unknown>; source_key: string }>`
    select id, entity_id, observed_at, inserted_at, data, source_key from facts
    where data_model_id = ${model.id} and source_key >= 'sha256:8' order by source_key limit 200`.execute(db);
  if (rows.length < 20) throw new Error(`sampled only ${rows.length} facts`);
  for (const r of rows) {
    const v = validateFact(model, { observed_at: r.observed_at.toISOString(), data: r.data });
    if (!v.ok) throw new Error(`loaded fact ${r.id} does not validate: ${JSON.stringify(v.errors)}`);
    if (v.fact.entityId !== r.entity_id) throw new Error(`fact ${r.id}: entity_id ${r.entity_id}, writer would store ${v.fact.entityId}`);
    if (v.fact.sourceKey !== r.source_key) throw new Error(`fact ${r.id}: source_key ${r.source_key}, writer would store ${v.fact.sourceKey}`);
    if (canonicalJson(v.fact.data) !== canonicalJson(r.data)) throw new Error(`fact ${r.id}: data differs from the writer's`);
    if (parseInt(r.id.replace('-', '').slice(0, 12), 16) !== r.inserted_at.getTime()) throw new Error(`fact ${r.id}: id time differs from inserted_at`);
  }
  // (Source keys are hashes: a range of them, read through their unique index, is a random sample.)
  // The same items through the writer: all duplicates, since it derives the same source keys.
  const again = await writeFacts(
    db,
    scope,
    model,
    rows.slice(0, 20).map((r) => ({ observed_at: r.observed_at.toISOString(), data: r.data })),
  );
  if (again.written !== 0 || again.duplicates !== 20) throw new Error(`writing loaded items again: ${again.written} written, ${again.duplicates} duplicates`);
  // A newer fact of a loaded entity becomes its current fact on both axes, as the load's fact_current says of the loaded ones.
  const newer = rows.slice(0, 5).map((r, i) => ({ observed_at: new Date(endMs + 1000 + i).toISOString(), data: { ...r.data, status: 'open' } }));
  const w = await writeFacts(db, scope, model, newer);
  if (w.written !== 5) throw new Error(`newer facts: ${JSON.stringify(w.errors)}`);
  const { rows: cur } = await sql<{ fact_id: string }>`
    select fact_id from fact_current where data_model_id = ${model.id} and fact_id = any(${w.ids as string[]}::uuid[])`.execute(db);
  if (cur.length !== 10) throw new Error(`newer facts: ${cur.length} of 10 fact_current rows are theirs`);
  const { rows: counts } = await sql<{ n: number; e: number }>`
    select (select count(*)::int from fact_current where data_model_id = ${model.id}) as n, ${ENTITIES}::int as e`.execute(db);
  if (counts[0]!.n !== counts[0]!.e * 2) throw new Error(`fact_current has ${counts[0]!.n} rows for ${counts[0]!.e} entities`);
}

// ---------------------------------------------------------------------------------------
// The queries

interface Ctx {
  db: Db;
  ws: string;
  model: FactModel & { slug: string };
  /** The instant the measured windows end at (after every loaded fact). */
  now: Date;
}

async function latestPlan(c: Ctx): Promise<FactQueryPlan> {
  const filters = [
    { field: 'status', op: 'eq', value: 'open' },
    { field: 'region', op: 'eq', value: 'eu' },
  ];
  const args = checkArguments({ dataModelSlug: 'orders', limit: 50, filters: JSON.stringify(filters) }, c.now);
  return planFactQuery(c.db, c.ws, args);
}

/** (1) factQuery's latest page of 50 and its count, concurrently, as the resolver runs them. */
async function pageAndCount(c: Ctx, plan: FactQueryPlan): Promise<string> {
  const q = { ...plan };
  const [page, count] = await Promise.all([selectPage(c.db, q, { withData: true, extra: 1 }), selectCount(c.db, q)]);
  return `${page.length} / ${fmt(count)}`;
}

/** A factAggregate's plan, as its resolver builds it from these arguments (checkAggregateArguments, planAggregate). */
function aggregatePlan(c: Ctx, args: Record<string, unknown>): Promise<AggregatePlan> {
  return planAggregate(c.db, c.ws, checkAggregateArguments({ dataModelSlug: 'orders', ...args }, c.now));
}

/** The series window: the 366 UTC days ending with the one that holds `now`. */
function seriesWindow(now: Date): { since: Date; until: Date } {
  const end = Math.floor(now.getTime() / DAY_MS) * DAY_MS + DAY_MS;
  return { since: new Date(end - 366 * DAY_MS), until: new Date(end) };
}

/** The plans of (2) entities by current status, (3) facts per UTC day over 90 days, (4) open orders at each of 366 day ends. */
async function aggregatePlans(c: Ctx): Promise<{ grouped: AggregatePlan; daily: AggregatePlan; series: AggregatePlan }> {
  const win = seriesWindow(c.now);
  return {
    grouped: await aggregatePlan(c, { mode: 'latest', groupBy: ['status'] }),
    daily: await aggregatePlan(c, { mode: 'timeline', since: new Date(c.now.getTime() - 90 * DAY_MS), until: c.now, bucket: 'day' }),
    series: await aggregatePlan(c, {
      mode: 'latest',
      series: true,
      bucket: 'day',
      since: win.since,
      until: win.until,
      filters: JSON.stringify([{ field: 'status', op: 'eq', value: 'open' }]),
    }),
  };
}

const total = (r: AggregateResult) => r.rows.reduce((a, x) => a + (x.values[0] ?? 0), 0);

/** The series against factQuery's latest count as of a day's end (until = end - 1 ms), for two days. */
async function checkSeries(c: Ctx, plan: AggregatePlan): Promise<void> {
  const { rows } = await runAggregate(c.db, plan);
  if (rows.length !== 366) throw new Error(`series: ${rows.length} buckets`);
  for (const i of [182, 365]) {
    const until = new Date(rows[i]!.bucket!.getTime() + DAY_MS - 1);
    const args = checkArguments({ dataModelSlug: 'orders', limit: 1, until, filters: JSON.stringify([{ field: 'status', op: 'eq', value: 'open' }]) }, c.now);
    const count = await selectCount(c.db, await planFactQuery(c.db, c.ws, args));
    if (count !== rows[i]!.values[0]) throw new Error(`series day ${i}: ${rows[i]!.values[0]}, factQuery as of its end ${count}`);
  }
}

const timeRuns = (f: () => Promise<unknown>) => timedRuns(f, RUNS);

let writeSeq = 0;
/** New facts for existing orders (each replaces its entity's current row on both axes). */
function newOrders(n: number, now: Date): Array<{ observed_at: string; data: Record<string, unknown> }> {
  return Array.from({ length: n }, () => {
    const k = writeSeq++;
    return {
      observed_at: new Date(now.getTime() + 10_000 + k).toISOString(),
      data: {
        order_id: `ord-${String((k * 7919) % ENTITIES).padStart(8, '0')}`,
        status: ['open', 'paid', 'shipped', 'cancelled'][k % 4],
        region: ['eu', 'us', 'apac', 'latam', 'mea'][k % 5],
        customer_id: `cus-${String(k % CUSTOMERS).padStart(7, '0')}`,
        amount: ((k * 37) % 100000) / 100,
        placed_at: new Date(now.getTime() - k * 1000).toISOString(),
      },
    };
  });
}

/** writeFacts per fact, alone (a workflow step's write) and in batches of 500 (an import's), ms. */
async function measureWrites(c: Ctx, scope: { organizationId: string; workspaceId: string }): Promise<{ single: Stats; batch: Stats }> {
  const one: number[] = [];
  for (let i = 0; i < SINGLE_WRITES + 10; i++) {
    const t0 = performance.now();
    const r = await writeFacts(c.db, scope, c.model, newOrders(1, c.now));
    if (r.written !== 1) throw new Error(`write failed: ${JSON.stringify(r.errors)}`);
    if (i >= 10) one.push(performance.now() - t0);
  }
  const batch: number[] = [];
  for (let i = 0; i < 2 + RUNS; i++) {
    const t0 = performance.now();
    const r = await writeFacts(c.db, scope, c.model, newOrders(BATCH, c.now));
    if (r.written !== BATCH) throw new Error(`batch write failed: ${JSON.stringify(r.errors.slice(0, 3))}`);
    if (i >= 2) batch.push((performance.now() - t0) / BATCH);
  }
  return { single: stats(one), batch: stats(batch) };
}

// ---------------------------------------------------------------------------------------

interface Row {
  query: string;
  answer: string;
  s: Stats;
  unit: string;
}

async function main() {
  const started = new Date();
  const loadBefore = loadAverage();
  console.log(`bench/fact-scale: ${fmt(FACTS)} facts over ${fmt(ENTITIES)} entities into ${DB_NAME} on ${redact(serverUrl())}; load ${loadBefore}`);
  const reuse = opts.reuse && (await databaseExists());
  if (!reuse) await recreateDatabase();
  const handle = createDb({ databaseUrl: dbUrl(), poolSize: 4 });
  const db = handle.db;
  let keep = opts.keep || reuse;
  try {
    await migrate(db);
    let ids: { org: string; ws: string; orders: string };
    let endMs: number;
    let loadText: string;
    if (reuse) {
      const { rows } = await sql<{ org: string; ws: string; orders: string; entities: number; last: Date }>`
        select m.organization_id as org, m.workspace_id as ws, m.id as orders,
               (select count(*)::int from fact_current c where c.data_model_id = m.id and c.axis = 'observed_at') as entities,
               (select max(observed_at) from facts f where f.data_model_id = m.id) as last
        from data_models m where m.slug = 'orders'`.execute(db);
      if (rows.length !== 1 || rows[0]!.entities !== ENTITIES)
        throw new Error(`--reuse: ${DB_NAME} holds no orders model of ${fmt(ENTITIES)} entities (give the --facts it was loaded with)`);
      ids = rows[0]!;
      endMs = rows[0]!.last.getTime() + 1;
      loadText = `Reused the database an earlier run loaded (--reuse), with that run's and later runs' writes.`;
      console.log(`  reusing ${DB_NAME}`);
    } else {
      const { org, ws } = await seedTenant(db, ['api_read']);
      const orders = await insertBenchModel(db, org.id, ws.id, 'orders', fields(ORDERS));
      const customers = await insertBenchModel(db, org.id, ws.id, 'customers', fields(CUSTOMERS_MODEL));
      ids = { org: org.id, ws: ws.id, orders: orders.id };
      // Every generated instant is before endMs; the measured windows end at `now`, just after.
      endMs = Date.now();
      const t0 = performance.now();
      const steps = await load({ org: org.id, ws: ws.id }, { orders: orders.id, customers: customers.id }, endMs);
      const indexed = await indexFields(db, { org: org.id, ws: ws.id }, orders.id, orders.fieldIds);
      const loadSeconds = (performance.now() - t0) / 1000;
      console.log(`  field indexes (${indexed.fields.join(', ') || 'none'}): ${indexed.seconds.toFixed(1)} s; load total ${loadSeconds.toFixed(1)} s`);
      loadText = `Indexed fields (typed slots, backfilled after the load): ${indexed.fields.join(', ') || 'none'}. Load ${loadSeconds.toFixed(0)} s at nice 19 (${steps.map((x) => `${x.label} ${x.seconds.toFixed(0)} s`).join(', ')}, field indexes ${indexed.seconds.toFixed(0)} s).`;
    }
    const now = new Date(endMs + 60_000);
    const scope = { organizationId: ids.org, workspaceId: ids.ws };
    const { rows: sizes } = await sql<{ db: string; facts: string; current: string }>`
      select pg_size_pretty(pg_database_size(current_database())) as db,
             pg_size_pretty(pg_total_relation_size('facts')) as facts,
             pg_size_pretty((select sum(pg_total_relation_size(relid)) from pg_partition_tree('fact_current'))::bigint) as current`.execute(db);
    const size = sizes[0]!;
    console.log(`  database ${size.db} (facts with indexes ${size.facts}, fact_current ${size.current})`);

    const model = { id: ids.orders, slug: 'orders', fields: fields(ORDERS) };
    const c: Ctx = { db, ws: ids.ws, model, now };
    // A reused database's load was checked by the run that made it (and holds the writer's facts since).
    if (!reuse) await checkLoad(db, scope, model, endMs);
    const plans = await aggregatePlans(c);
    await checkSeries(c, plans.series);
    console.log(`  checks: ${reuse ? '' : 'sample = writer, reloaded items duplicates, newer facts current, '}series = factQuery as of day ends`);

    const plan = await latestPlan(c);
    const rows: Row[] = [];
    const run = async (query: string, f: () => Promise<string>) => {
      const answer = await f();
      const s = await timeRuns(f);
      rows.push({ query, answer, s, unit: 'ms' });
      console.log(`  ${query}: ${answer}; p50 ${s.p50.toFixed(2)} ms, p95 ${s.p95.toFixed(2)} ms (n ${s.n}); load ${loadAverage()}`);
    };
    await run('(1) latest, status = open and region = eu: page of 50 + count', () => pageAndCount(c, plan));
    await run('(2) latest, count by status', async () => `${(await runAggregate(db, plans.grouped)).rows.length} groups`);
    await run('(3) timeline, 90 daily counts', async () => {
      const r = await runAggregate(db, plans.daily);
      return `${r.rows.length} buckets / ${fmt(total(r))}`;
    });
    await run('(4) series, open at each of 366 day ends', async () => `${(await runAggregate(db, plans.series)).rows.length} buckets`);
    const w = await measureWrites(c, scope);
    rows.push({ query: '(5) writeFacts, one fact per call', answer: `${SINGLE_WRITES} calls`, s: w.single, unit: 'ms/fact' });
    rows.push({ query: `(5) writeFacts, ${BATCH} facts per call`, answer: `${RUNS} calls`, s: w.batch, unit: 'ms/fact' });
    console.log(`  writes: one ${w.single.p50.toFixed(3)} ms, batch ${w.batch.p50.toFixed(3)} ms per fact (p50); load ${loadAverage()}`);

    const table = [
      '| Query | Answer | p50 | p95 | Runs |',
      '|---|---|---:|---:|---:|',
      ...rows.map(
        (r) =>
          `| ${r.query} | ${r.answer} | ${r.s.p50.toFixed(r.unit === 'ms' ? 2 : 3)} ${r.unit} | ${r.s.p95.toFixed(r.unit === 'ms' ? 2 : 3)} ${r.unit} | ${r.s.n} |`,
      ),
    ];
    console.log(`\n${table.join('\n')}\n`);
    const { rows: ver } = await sql<{ v: string }>`select version() as v`.execute(db);
    const runText = [
      `### Run ${started.toISOString().replace(/\.\d+Z$/, 'Z')}, ${fmt(FACTS)} facts`,
      '',
      `Command: \`npm run bench:fact-scale -- --facts ${FACTS}${reuse ? ' --reuse' : ''}${RUNS !== 7 ? ` --runs ${RUNS}` : ''}\`. ${machineLine()} Load average (1/5/15 min) before: ${loadBefore}, after: ${loadAverage()}.`,
      '',
      `${ver[0]!.v.split(' on ')[0]} on loopback. ${fmt(FACTS)} orders facts over ${fmt(ENTITIES)} entities, ${fmt(CUSTOMERS)} customers facts. ${loadText} Database ${size.db} (facts with indexes ${size.facts}, fact_current ${size.current}). (2)-(4): runAggregate / runSeries.`,
      '',
      ...table,
      '',
    ].join('\n');
    if (!opts['no-write']) {
      writeSection(`${ROOT}/docs/benchmarks-facts.md`, '## At scale (bench/fact-scale.ts)', INTRO, runText, []);
    }
  } catch (err) {
    keep = true;
    console.error(`failed; ${DB_NAME} kept for a look (drop it with: psql -c 'drop database ${DB_NAME}')`);
    throw err;
  } finally {
    await db.destroy();
    if (keep) console.log(`  kept ${DB_NAME}`);
    else await dropDatabase();
  }
}

const INTRO = `## At scale (bench/fact-scale.ts)

\`npm run bench:fact-scale [-- --facts N]\` (see the header of bench/fact-scale.ts): N facts
(default 10,000,000) over N/10 \`orders\` entities, loaded with set-based SQL into a scratch
database \`tributary_scale\` (dropped at the end unless \`--keep\`), checked against the writer
(a sample validated, written again through writeFacts as duplicates, newer facts through
writeFacts made current), then the raw SQL of the issue's answers, one at a time after 2
warm-up runs. (1) is factQuery's own statements (planFactQuery, selectPage, selectCount);
(2)-(4) are factAggregate's (a plan from checkAggregateArguments and planAggregate, run by
runAggregate, which hands a series to runSeries); (4) is checked against factQuery's latest
count as of two of its day ends. (5) is writeFacts to existing entities, per fact.
`;

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
