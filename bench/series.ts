/**
 * factAggregate's `series` (issue 37 item 2): the latest state as of the end of each of 366
 * daily buckets, over a history of BENCH_SERIES_FACTS facts (default 1,000,000) over a tenth
 * as many entities, as runSeries runs it (the bucket statement, then the sweep), raw SQL
 * without GraphQL.
 *
 *   npm run bench:series        (node bench/series.ts)
 *
 * PostgreSQL by default (BENCH_ENGINES=pglite,postgres for both). A fresh database, one
 * tenant, one `invoices` model shaped like bench/fact-filters.ts's (status, region,
 * customer, amount; the same generators, observed_at spread over the last 365 days),
 * loaded with set-based SQL, fact_current from the history, `vacuum (analyze)`.
 *
 * Scenarios: count with no filter; count of status = open (the "open at the end of
 * each day"); that count grouped by region; sum and avg of amount; min and max of amount
 * (the join of intervals with bucket ends). Each is checked once against factQuery's as-of
 * count at three bucket ends (first, middle, last), then run BENCH_SERIES_RUNS times
 * (default 7) after one warm-up; the median and the spread are reported.
 *
 * Settings: BENCH_SERIES_FACTS, BENCH_SERIES_RUNS, BENCH_NO_WRITE=1, BENCH_KEEP_DB=1,
 * BENCH_SERIES_EXPLAIN=1 (the sweep's plan for the filtered count).
 */
import path from 'node:path';
import { CompiledQuery, sql } from 'kysely';
import type { Db } from '../src/db/connect.ts';
import { loadModel, type DataModelWithFields } from '../src/facts/models.sql.ts';
import { planFactQuery } from '../src/facts/query/plan.ts';
import { selectCount } from '../src/facts/query/page.sql.ts';
import type { RawClause } from '../src/facts/query/filters.ts';
import { runSeries, seriesBucketStarts, seriesSql } from '../src/facts/aggregate/series.sql.ts';
import type { AggregateMeasure, AggregatePlan } from '../src/facts/aggregate/plan-types.ts';
import {
  insertBenchModel,
  intEnv,
  loadAverage,
  machineLine,
  ROOT,
  runBench,
  runDeps,
  runHeading,
  seedTenant,
  watchdog,
  withEngine,
  writeSection,
  type Engine,
} from './common.ts';

const FACTS = intEnv('BENCH_SERIES_FACTS', 1_000_000, 1_000, 10_000_000);
const ENTITIES = Math.max(100, Math.floor(FACTS / 10));
const RUNS = intEnv('BENCH_SERIES_RUNS', 7, 5, 1000);
const DAY_MS = 86_400_000;
const BUCKETS = 366;

watchdog('bench/series', intEnv('BENCH_SERIES_WATCHDOG_SECONDS', 1800, 60, 7200) * 1000);

const FIELDS = [
  { name: 'invoice_id', type: 'string' as const, expr: `'inv-' || lpad((n % ${ENTITIES})::text, 7, '0')` },
  { name: 'status', type: 'string' as const, expr: `(array['open','paid','void','overdue'])[1 + (h % 4)]` },
  { name: 'region', type: 'string' as const, expr: `(array['eu','us','apac'])[1 + ((h / 4) % 3)]` },
  { name: 'customer', type: 'string' as const, expr: `'c-' || ((h / 12) % 5000)::text` },
  { name: 'amount', type: 'integer' as const, expr: `((h / 60000) % 10000)` },
];

interface Scenario {
  name: string;
  filters: RawClause[];
  groupBy: string[];
  measures: Array<{ op: AggregateMeasure['op']; field?: string }>;
}

const OPEN: RawClause[] = [{ field: 'status', op: 'eq', value: 'open' }];
const SCENARIOS: Scenario[] = [
  { name: 'count, no filter', filters: [], groupBy: [], measures: [{ op: 'count' }] },
  { name: 'count of status = open', filters: OPEN, groupBy: [], measures: [{ op: 'count' }] },
  { name: 'count of status = open, by region', filters: OPEN, groupBy: ['region'], measures: [{ op: 'count' }] },
  {
    name: 'count, sum and avg of amount, status = open',
    filters: OPEN,
    groupBy: [],
    measures: [{ op: 'count' }, { op: 'sum', field: 'amount' }, { op: 'avg', field: 'amount' }],
  },
  {
    name: 'min and max of amount, status = open',
    filters: OPEN,
    groupBy: [],
    measures: [
      { op: 'min', field: 'amount' },
      { op: 'max', field: 'amount' },
    ],
  },
];

async function load(db: Db, orgId: string, wsId: string, endMs: number): Promise<string> {
  const fields = FIELDS.map((f) => ({ name: f.name, type: f.type, is_primary_key: f.name === 'invoice_id', is_required: f.name === 'invoice_id' }));
  const { id: modelId } = await insertBenchModel(db, orgId, wsId, 'invoices', fields);
  const span = 365 * DAY_MS;
  const start = endMs - span - 3_600_000;
  const cols = FIELDS.map((f) => `${f.expr} as ${f.name}`).join(', ');
  const obj = FIELDS.map((f) => `'${f.name}', g.${f.name}`).join(', ');
  const t0 = performance.now();
  await sql
    .raw(
      `insert into facts (id, organization_id, workspace_id, data_model_id, entity_id, observed_at, inserted_at, data, source_key)
    select gen_random_uuid(), '${orgId}', '${wsId}', '${modelId}', g.invoice_id, t.o, t.o + interval '1 second', jsonb_build_object(${obj}), 'k-' || g.n
    from (select n, ${cols} from (select n, (hashint8(n + 1) & 2147483647)::bigint as h from generate_series(0::bigint, ${FACTS - 1}::bigint) as s(n)) as x) as g
    cross join lateral (select timestamptz 'epoch' + (${start} + ((g.n * 2654435761 + 1) % ${span})) * interval '1 millisecond' as o) as t`,
    )
    .execute(db);
  for (const axis of ['observed_at', 'inserted_at'] as const) {
    const order = axis === 'observed_at' ? 'f.observed_at desc, f.inserted_at desc, f.id desc' : 'f.inserted_at desc, f.id desc';
    await sql
      .raw(
        `insert into fact_current (data_model_id, axis, entity_key, fact_id, workspace_id, entity_id, observed_at, inserted_at, data)
      select distinct on (f.entity_id) f.data_model_id, '${axis}', f.entity_id, f.id, f.workspace_id, f.entity_id, f.observed_at, f.inserted_at, f.data
      from facts f where f.data_model_id = '${modelId}' order by f.entity_id, ${order}`,
      )
      .execute(db);
  }
  await sql`vacuum (analyze) facts, fact_current`.execute(db);
  console.log(
    `  loaded ${FACTS.toLocaleString('en-US')} facts, ${ENTITIES.toLocaleString('en-US')} entities in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return modelId;
}

async function seriesPlan(db: Db, model: DataModelWithFields, wsId: string, s: Scenario, since: Date, until: Date): Promise<AggregatePlan> {
  const q = await planFactQuery(db, wsId, {
    ...{ slug: model.slug, mode: 'latest', axis: 'observed_at', sort: 'observed_at', direction: 'desc', limit: 1, offset: 0 },
    ...{ since: undefined, until: undefined, joinSlug: undefined, joinType: 'left', joinFilters: [] },
    filters: s.filters,
  });
  const field = (name: string) => ({ source: 'model' as const, field: model.fields.find((f) => f.name === name)!, path: name });
  return {
    workspaceId: wsId,
    model,
    mode: 'latest',
    axis: 'observed_at',
    since,
    until,
    filters: q.filters,
    join: undefined,
    groupBy: s.groupBy.map(field),
    bucket: { unit: 'day', timezone: 'UTC', weekStart: 'monday' },
    series: true,
    measures: s.measures.map((m) => (m.field === undefined ? { name: m.op, op: m.op } : { name: `${m.op}_${m.field}`, op: m.op, field: field(m.field) })),
    orderBy: [],
    limit: 10_000,
  };
}

/** The series' count at a bucket equals factQuery's as-of count at that bucket's end (ungrouped count scenarios). */
async function check(db: Db, p: AggregatePlan, s: Scenario, starts: Date[]): Promise<void> {
  if (s.groupBy.length > 0 || s.measures[0]!.op !== 'count') return;
  const r = await runSeries(db, p);
  if (r.rows.length !== BUCKETS) throw new Error(`${s.name}: ${r.rows.length} buckets, expected ${BUCKETS}`);
  for (const i of [0, BUCKETS >> 1, BUCKETS - 1]) {
    const q = await planFactQuery(db, p.workspaceId, {
      ...{ slug: p.model.slug, mode: 'latest', axis: 'observed_at', sort: 'observed_at', direction: 'desc', limit: 1, offset: 0 },
      ...{ since: undefined, until: new Date(starts[i + 1]!.getTime() - 1), joinSlug: undefined, joinType: 'left', joinFilters: [] },
      filters: s.filters,
    });
    const want = await selectCount(db, q);
    if (r.rows[i]!.values[0] !== want) throw new Error(`${s.name}: bucket ${i} counts ${r.rows[i]!.values[0]}, factQuery as of its end ${want}`);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Report {
  engine: Engine;
  notes: string[];
}

function benchEngine(engine: Engine): Promise<Report> {
  return withEngine(engine, { prefix: 'tributary_bench_series', skipped: (note) => ({ engine, notes: [note] }) }, async (run) => {
    const deps = await runDeps(run);
    const { org, ws } = await seedTenant(deps.db, ['api_read']);
    const notes: string[] = [
      `${engine} ${run.version ?? ''}: ${FACTS.toLocaleString('en-US')} facts, ${ENTITIES.toLocaleString('en-US')} entities; load before: ${loadAverage()}`,
    ];
    const now = Date.now();
    await load(deps.db, org.id, ws.id, now);
    const model = (await loadModel(deps.db, ws.id, 'invoices'))!;
    // 366 UTC days ending with today's.
    const until = new Date(Math.floor(now / DAY_MS) * DAY_MS + DAY_MS);
    const since = new Date(until.getTime() - BUCKETS * DAY_MS);
    const starts = await seriesBucketStarts(deps.db, { unit: 'day', timezone: 'UTC', weekStart: 'monday' }, since, until);
    for (const s of SCENARIOS) {
      const p = await seriesPlan(deps.db, model, ws.id, s, since, until);
      await check(deps.db, p, s, starts);
      await runSeries(deps.db, p);
      const times: number[] = [];
      let rows = 0;
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        rows = (await runSeries(deps.db, p)).rows.length;
        times.push(performance.now() - t0);
      }
      notes.push(
        `${s.name}: ${rows} rows; median ${median(times).toFixed(0)} ms of ${RUNS} runs (min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}); load ${loadAverage()}`,
      );
      if (process.env.BENCH_SERIES_EXPLAIN === '1') {
        const q = seriesSql(p, starts).compile(deps.db);
        const r = await deps.db.executeQuery<Record<string, string>>(CompiledQuery.raw(`explain (analyze, buffers) ${q.sql}`, [...q.parameters]));
        console.log(`\n### ${s.name}\n\n\`\`\`\n${r.rows.map((x) => Object.values(x)[0]).join('\n')}\n\`\`\``);
      }
    }
    return { engine, notes };
  });
}

runBench(benchEngine, (reports, started, loadBefore) => {
  const file = path.join(ROOT, 'docs/benchmarks-facts.md');
  const intro = `## Series (factAggregate \`series\`)

\`npm run bench:series\` (bench/series.ts; its header has the settings). A fresh database per engine,
one \`invoices\` model shaped like bench/fact-filters.ts's, ${FACTS.toLocaleString('en-US')} facts over
${ENTITIES.toLocaleString('en-US')} entities spread over 365 days, loaded set-based. Each scenario is a
${BUCKETS}-bucket daily series (UTC) over the whole year as runSeries runs it (its bucket statement and
the sweep, raw SQL, no GraphQL), checked against factQuery's as-of count at three bucket ends, one
warm-up, then the median of ${RUNS} runs. Target (issue 37): <= 500 ms p50 on PostgreSQL.
`;
  const lines = [runHeading(3, started), '', machineLine(), `Load average before: ${loadBefore}.`, ''];
  for (const r of reports) lines.push(`${r.engine === 'postgres' ? 'PostgreSQL' : 'PGlite'}:`, '', ...r.notes.map((n) => `- ${n}`), '');
  writeSection(file, '## Series (factAggregate `series`)', intro, lines.join('\n'), []);
});
