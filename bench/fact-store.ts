/**
 * The fact store built for answers (issue 37 item 4): typed slots of indexed fields against
 * the store of before (JSONB, the GIN index on data, expression indexes over data), raw SQL on
 * PostgreSQL.
 *
 *   npm run bench:fact-store        (node bench/fact-store.ts)
 *
 * A fresh database, one tenant, an `invoices` model shaped like bench/fact-filters.ts's
 * (status, region, customer, amount), BENCH_STORE_FACTS facts (default 1,000,000) over a
 * tenth as many entities, loaded with set-based SQL; then status, region and amount indexed
 * through patchField (slot, backfill, indexes: the build's seconds are reported). Reads run on
 * that database, each query in three forms:
 *
 *   json   the plan with the slots stripped (what factQuery ran before: containment for eq,
 *          jsonpath or the number field's expression index for ranges);
 *   expr   the alternative to typed columns: a btree over the same expressions of `data`
 *          (one partial index per partition, as field-index.sql.ts built them before), built
 *          for this bench with names of its own;
 *   slots  the typed slots (what factQuery runs now).
 *
 * Figures are the median over BENCH_STORE_ROUNDS (default 7) interleaved rounds of each
 * form's p50 in that round (BENCH_STORE_RUNS runs per form and round, default 20).
 *
 * Writes: writeFacts of one fact and of 500, to existing entities of two models of
 * BENCH_STORE_WRITE_FACTS facts each (default 200,000): one with three indexed fields on the
 * store of before (expression indexes over data, no slots), one with the same three as typed
 * slots, interleaved over the same rounds.
 */
import { CompiledQuery, sql } from 'kysely';
import type { Principal } from '../src/auth/principal.ts';
import type { Db } from '../src/db/connect.ts';
import type { Deps } from '../src/deps.ts';
import { checkArguments } from '../src/graphql/fact-query.ts';
import { planFactQuery } from '../src/facts/query/plan.ts';
import { countSql, pageSql } from '../src/facts/query/page.sql.ts';
import type { FactQueryPlan, Frag } from '../src/facts/query/plan-types.ts';
import { loadModel, type ModelField } from '../src/facts/models.sql.ts';
import { dataValue, fieldValue } from '../src/facts/typed.sql.ts';
import { writeFacts, type FactModel } from '../src/facts/write.ts';
import { patchField } from '../src/resources/data_model_fields/service.ts';
import { indexedOperand } from '../src/facts/field-index.sql.ts';
import { insertBenchModel, intEnv, loadAverage, runBench, runDeps, seedTenant, watchdog, withEngine, type Engine } from './common.ts';

const FACTS = intEnv('BENCH_STORE_FACTS', 1_000_000, 1_000, 10_000_000);
const WRITE_FACTS = intEnv('BENCH_STORE_WRITE_FACTS', 200_000, 1_000, 10_000_000);
const ROUNDS = intEnv('BENCH_STORE_ROUNDS', 7, 5, 100);
const RUNS = intEnv('BENCH_STORE_RUNS', 20, 3, 1000);
const SINGLES = intEnv('BENCH_STORE_SINGLES', 40, 5, 10_000);
const BATCH = 500;
const DAY_MS = 86_400_000;
const INDEXED = ['status', 'region', 'amount'];

watchdog('bench/fact-store', intEnv('BENCH_STORE_WATCHDOG_SECONDS', 3600, 60, 7200) * 1000);

const FIELDS = (entities: number) => [
  { name: 'invoice_id', type: 'string' as const, expr: `'inv-' || lpad((n % ${entities})::text, 7, '0')` },
  { name: 'status', type: 'string' as const, expr: `(array['open','paid','void','overdue'])[1 + (h % 4)]` },
  { name: 'region', type: 'string' as const, expr: `(array['eu','us','apac'])[1 + ((h / 4) % 3)]` },
  { name: 'customer', type: 'string' as const, expr: `'c-' || ((h / 12) % 5000)::text` },
  { name: 'amount', type: 'integer' as const, expr: `((h / 60000) % 10000)` },
];

async function load(
  db: Db,
  orgId: string,
  wsId: string,
  slug: string,
  facts: number,
  endMs: number,
): Promise<{ model: FactModel; fieldIds: Map<string, string> }> {
  const entities = Math.max(100, Math.floor(facts / 10));
  const spec = FIELDS(entities);
  const fields = spec.map((f) => ({ name: f.name, type: f.type, is_primary_key: f.name === 'invoice_id', is_required: f.name === 'invoice_id' }));
  const { id: modelId, fieldIds } = await insertBenchModel(db, orgId, wsId, slug, fields);
  const span = 365 * DAY_MS;
  const start = endMs - span - 3_600_000;
  const cols = spec.map((f) => `${f.expr} as ${f.name}`).join(', ');
  const obj = spec.map((f) => `'${f.name}', g.${f.name}`).join(', ');
  const t0 = performance.now();
  await sql
    .raw(
      `insert into facts (id, organization_id, workspace_id, data_model_id, entity_id, observed_at, inserted_at, data, source_key)
    select gen_random_uuid(), '${orgId}', '${wsId}', '${modelId}', g.invoice_id, t.o, t.o + interval '1 second', jsonb_build_object(${obj}), 'k-' || g.n
    from (select n, ${cols} from (select n, (hashint8(n + 1) & 2147483647)::bigint as h from generate_series(0::bigint, ${facts - 1}::bigint) as s(n)) as x) as g
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
  console.log(
    `  ${slug}: loaded ${facts.toLocaleString('en-US')} facts, ${entities.toLocaleString('en-US')} entities in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return { model: { id: modelId, fields }, fieldIds };
}

async function setIndexed(deps: Deps, principal: Principal, fieldIds: Map<string, string>): Promise<number> {
  const t0 = performance.now();
  for (const name of INDEXED) {
    const existing = await deps.db.selectFrom('data_model_fields').selectAll().where('id', '=', fieldIds.get(name)!).executeTakeFirstOrThrow();
    await patchField(deps.db, principal, existing, { is_indexed: true }, new Date(), deps.engine === 'postgres' ? 'concurrent' : 'plain');
  }
  return (performance.now() - t0) / 1000;
}

/** The store of before for a model: a partial btree per field and partition over the typed expression of `data` (strings: ->>). */
function exprOf(field: { name: string; type: string }, data: Frag): Frag {
  return field.type === 'integer' ? indexedOperand(data, field.name) : (sql`(${data} ->> ${sql.lit(field.name)})` as Frag);
}

async function buildExprIndexes(
  db: Db,
  modelId: string,
  wsId: string,
  fields: Array<{ name: string; type: string }>,
  tag: string,
  concurrently: boolean,
): Promise<void> {
  const conc = concurrently ? sql`concurrently` : sql``;
  for (const f of fields) {
    for (const [table, axis] of [
      ['fact_current_observed', 'observed_at'],
      ['fact_current_inserted', 'inserted_at'],
    ] as const) {
      await sql`create index ${conc} ${sql.id(`bench_expr_${tag}_${f.name}_${axis}`)} on ${sql.id(table)} (${exprOf(f, sql.ref('data') as Frag)}, observed_at, fact_id)
        where data_model_id = ${sql.lit(modelId)} and workspace_id = ${sql.lit(wsId)} and axis = ${sql.lit(axis)}`.execute(db);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function timeRuns(run: () => Promise<unknown>, n: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await run();
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

/** Each form's p50 per round, forms interleaved within each round; the median over rounds. */
async function interleaved(forms: Record<string, () => Promise<unknown>>, runs = RUNS): Promise<Record<string, number>> {
  const per: Record<string, number[]> = Object.fromEntries(Object.keys(forms).map((k) => [k, []]));
  for (const f of Object.values(forms)) for (let i = 0; i < 3; i++) await f();
  for (let r = 0; r < ROUNDS; r++) for (const [k, f] of Object.entries(forms)) per[k]!.push(await timeRuns(f, runs));
  return Object.fromEntries(Object.entries(per).map(([k, xs]) => [k, median(xs)]));
}

const exec = (db: Db, q: Frag) => q.execute(db);

async function plans(db: Db, workspaceId: string, args: Record<string, unknown>): Promise<{ slots: FactQueryPlan; json: FactQueryPlan }> {
  const slots = await planFactQuery(db, workspaceId, checkArguments({ dataModelSlug: 'invoices', limit: 50, ...args }, new Date()));
  return { slots, json: { ...slots, filters: slots.filters.map((c) => ({ ...c, slot: undefined })) } };
}

async function explain(db: Db, q: Frag): Promise<string> {
  const c = q.compile(db);
  const r = await db.executeQuery<Record<string, string>>(CompiledQuery.raw(`explain (analyze, buffers) ${c.sql}`, [...c.parameters]));
  return r.rows.map((x) => Object.values(x)[0]).join('\n');
}

let writeSeq = 0;
function items(n: number, entities: number) {
  return Array.from({ length: n }, () => {
    const k = writeSeq++;
    return {
      observed_at: new Date(Date.now() - (k % 1000) * 1000).toISOString(),
      data: {
        invoice_id: `inv-${String((k * 7919) % entities).padStart(7, '0')}`,
        status: ['open', 'paid', 'void', 'overdue'][k % 4],
        region: ['eu', 'us', 'apac'][k % 3],
        customer: `c-${k % 5000}`,
        amount: (k * 37) % 10000,
      },
    };
  });
}

function benchEngine(engine: Engine): Promise<{ notes: string[] }> {
  return withEngine(engine, { prefix: 'tributary_bench_store', skipped: (note) => ({ notes: [note] }) }, async (run) => {
    const deps = await runDeps(run);
    const db = deps.db;
    const { org, ws } = await seedTenant(db, ['api_read']);
    const principal = { workspaceId: ws.id, organizationId: org.id } as Principal;
    const notes: string[] = [
      `${engine} ${run.version ?? ''}: ${FACTS.toLocaleString('en-US')} facts, ${(FACTS / 10).toLocaleString('en-US')} entities; ${ROUNDS} rounds x ${RUNS} runs; load before: ${loadAverage()}`,
    ];
    // BENCH_STORE_WRITES_ONLY=1: the write rounds alone (the 1M-fact read model is skipped).
    if (process.env.BENCH_STORE_WRITES_ONLY !== '1') await reads(deps, principal, org.id, ws.id, notes);
    await writes(deps, principal, org.id, ws.id, notes);
    return { notes };
  });
}

async function reads(deps: Deps, principal: Principal, orgId: string, wsId: string, notes: string[]): Promise<void> {
  const db = deps.db;
  const engine = deps.engine;
  const org = { id: orgId };
  const ws = { id: wsId };
  {
    const main = await load(db, org.id, ws.id, 'invoices', FACTS, Date.now());
    await sql`vacuum (analyze) facts, fact_current`.execute(db);
    const build = await setIndexed(deps, principal, main.fieldIds);
    notes.push(
      `typed storage of ${INDEXED.join(', ')} (slot, backfill in batches, indexes ${engine === 'postgres' ? 'concurrently' : 'plain'}): ${build.toFixed(1)} s`,
    );
    const exprFields = FIELDS(1).filter((f) => INDEXED.includes(f.name));
    const t0 = performance.now();
    await buildExprIndexes(db, main.model.id, ws.id, exprFields, 'main', engine === 'postgres');
    notes.push(`expression indexes of the same fields (the alternative): ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await sql`vacuum (analyze) facts, fact_current`.execute(db);
    const sizes = await sql<{ name: string; size: string }>`select c.relname as name, pg_size_pretty(pg_relation_size(c.oid)) as size from pg_class c
      where c.relname like 'fact_current_field_%' or c.relname like 'bench_expr_%' or c.relname like 'facts_field_%' order by c.relname`.execute(db);
    const byId = new Map([...main.fieldIds].map(([name, id]) => [id.replaceAll('-', ''), name]));
    const label = (n: string) => n.replace(/_([0-9a-f]{32})/, (_, id: string) => `_${byId.get(id) ?? 'other'}`);
    notes.push(`index sizes: ${sizes.rows.map((r) => `${label(r.name)} ${r.size}`).join(', ')}`);

    const model = (await loadModel(db, ws.id, 'invoices'))!;
    const field = (name: string) => model.fields.find((f) => f.name === name)! as ModelField;
    const status = field('status');
    const amount = field('amount');
    const scope = sql`b.data_model_id = ${model.id} and b.workspace_id = ${ws.id} and b.axis = 'observed_at'`;
    const explainAll = process.env.BENCH_STORE_EXPLAIN === '1';

    // 1. A filtered latest page with its count: eq on a string, a range on a number.
    const filters = JSON.stringify([
      { field: 'status', op: 'eq', value: 'open' },
      { field: 'amount', op: 'gte', value: 5000 },
    ]);
    const p = await plans(db, ws.id, { filters });
    const exprWhere = sql`${scope} and (b.data ->> 'status') = 'open' and ${indexedOperand(sql.ref('b.data') as Frag, 'amount')} >= 5000`;
    const exprPage = sql`select b.fact_id as id, b.data from fact_current b where ${exprWhere} order by b.observed_at desc, b.fact_id desc limit 51`;
    const exprCount = sql`select count(*)::int as n from fact_current b where ${exprWhere}`;
    const pageCount = (page: Frag, count: Frag) => async () => Promise.all([exec(db, page), exec(db, count)]);
    const forms1 = {
      json: pageCount(pageSql(p.json, { withData: true, extra: 1 }), countSql(p.json)),
      expr: pageCount(exprPage, exprCount),
      slots: pageCount(pageSql(p.slots, { withData: true, extra: 1 }), countSql(p.slots)),
    };
    const counts = await Promise.all([countSql(p.json), exprCount, countSql(p.slots)].map(async (q) => ((await exec(db, q)).rows[0] as { n: number }).n));
    if (new Set(counts).size !== 1) throw new Error(`page + count: the forms differ (${counts.join(', ')})`);
    const r1 = await interleaved(forms1);
    notes.push(
      `filtered latest page (50) + count, status = open and amount >= 5000 (count ${counts[0]}): json ${r1.json!.toFixed(2)} ms, expr ${r1.expr!.toFixed(2)} ms, slots ${r1.slots!.toFixed(2)} ms (target <= 5)`,
    );
    console.log(`  ${notes.at(-1)}`);
    if (explainAll)
      console.log(
        `\n${await explain(db, countSql(p.slots))}\n\n${await explain(db, pageSql(p.slots, { withData: true, extra: 1 }))}\n\n${await explain(db, exprCount)}`,
      );

    // 2. A count grouped by a string field over latest.
    const grouped = (v: Frag) => sql`select ${v} as k, count(*)::int as n from fact_current b where ${scope} group by 1 order by 1`;
    const g = {
      json: grouped(dataValue('b', status)),
      expr: grouped(sql`(b.data ->> 'status')` as Frag),
      slots: grouped(fieldValue('b', status)),
    };
    const answers = await Promise.all(Object.values(g).map(async (q) => JSON.stringify((await exec(db, q)).rows)));
    if (new Set(answers).size !== 1) throw new Error(`grouped count: the forms differ ${answers.join(' / ')}`);
    const r2 = await interleaved(Object.fromEntries(Object.entries(g).map(([k, q]) => [k, () => exec(db, q)])), Math.max(3, Math.floor(RUNS / 4)));
    notes.push(
      `count grouped by status over latest: json ${r2.json!.toFixed(2)} ms, expr ${r2.expr!.toFixed(2)} ms, slots ${r2.slots!.toFixed(2)} ms (target <= 20)`,
    );
    console.log(`  ${notes.at(-1)}`);
    if (explainAll) console.log(`\n${await explain(db, g.slots)}`);

    // 3. A timeline window of 90 days filtered on an indexed field: its count, and its daily counts.
    const until = new Date();
    const since = new Date(until.getTime() - 90 * DAY_MS);
    const tp = await plans(db, ws.id, { mode: 'timeline', since, until, filters: JSON.stringify([{ field: 'status', op: 'eq', value: 'open' }]) });
    const daily = (v: Frag) => sql`select date_trunc('day', b.observed_at at time zone 'UTC') as d, count(*)::int as n from facts b
      where b.data_model_id = ${model.id} and b.workspace_id = ${ws.id} and b.observed_at >= ${since} and b.observed_at < ${until} and ${v} = 'open' group by 1 order by 1`;
    const r3 = await interleaved(
      {
        'json count': () => exec(db, countSql(tp.json)),
        'slots count': () => exec(db, countSql(tp.slots)),
        'json daily': () => exec(db, daily(dataValue('b', status))),
        'slots daily': () => exec(db, daily(fieldValue('b', status))),
      },
      Math.max(3, Math.floor(RUNS / 4)),
    );
    notes.push(
      `timeline 90 days, status = open: count json ${r3['json count']!.toFixed(2)} ms, slots ${r3['slots count']!.toFixed(2)} ms; daily counts json ${r3['json daily']!.toFixed(2)} ms, slots ${r3['slots daily']!.toFixed(2)} ms`,
    );
    console.log(`  ${notes.at(-1)}`);
    if (explainAll) console.log(`\n${await explain(db, countSql(tp.slots))}`);
    void amount;
  }
}

async function writes(deps: Deps, principal: Principal, orgId: string, wsId: string, notes: string[]): Promise<void> {
  const db = deps.db;
  const engine = deps.engine;
  const org = { id: orgId };
  const ws = { id: wsId };
  const exprFields = FIELDS(1).filter((f) => INDEXED.includes(f.name));
  {
    // 4. Writes with three indexed fields: the store of before against typed slots.
    const before = await load(db, org.id, ws.id, 'w-before', WRITE_FACTS, Date.now());
    await sql`vacuum (analyze) facts, fact_current`.execute(db);
    await buildExprIndexes(db, before.model.id, ws.id, exprFields, 'before', engine === 'postgres');
    const after = await load(db, org.id, ws.id, 'w-after', WRITE_FACTS, Date.now());
    await setIndexed(deps, principal, after.fieldIds);
    await sql`vacuum (analyze) facts, fact_current`.execute(db);
    const afterModel = (await loadModel(db, ws.id, 'w-after'))!;
    const beforeModel = (await loadModel(db, ws.id, 'w-before'))!;
    const scopeW = { organizationId: org.id, workspaceId: ws.id };
    const entities = Math.floor(WRITE_FACTS / 10);
    const single = (m: FactModel) => async () => {
      for (let i = 0; i < SINGLES; i++) await writeFacts(db, scopeW, m, items(1, entities));
    };
    const batch = (m: FactModel) => async () => writeFacts(db, scopeW, m, items(BATCH, entities));
    const w1 = await interleaved({ before: single(beforeModel), after: single(afterModel) }, 1);
    const w2 = await interleaved({ before: batch(beforeModel), after: batch(afterModel) }, 2);
    const perFact = (ms: number, n: number) => (ms / n).toFixed(3);
    notes.push(
      `write one fact per writeFacts, 3 indexed fields: before ${perFact(w1.before!, SINGLES)} ms, slots ${perFact(w1.after!, SINGLES)} ms per fact (x${(w1.after! / w1.before!).toFixed(2)}, target <= 1.3)`,
      `write ${BATCH} facts per writeFacts, 3 indexed fields: before ${perFact(w2.before!, BATCH)} ms, slots ${perFact(w2.after!, BATCH)} ms per fact (x${(w2.after! / w2.before!).toFixed(2)}, target <= 1.3)`,
      `load after: ${loadAverage()}`,
    );
  }
}

runBench(benchEngine, () => undefined);
