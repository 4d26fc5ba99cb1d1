/**
 * Filtered latest reads with and without indexed fields (issue 25 item 1), and what the
 * indexes cost a writer, as ratios measured in the same run.
 *
 *   npm run bench:fact-filters        (node bench/fact-filters.ts)
 *
 * PostgreSQL by default (BENCH_ENGINES=pglite,postgres for both). A fresh database, one
 * tenant, one `invoices` model shaped like bench/facts.ts's (status, region, customer,
 * amount; the same generators), BENCH_FILTER_FACTS facts (default 1,000,000) over a tenth as
 * many entities, loaded with set-based SQL, fact_current from the history.
 *
 * Reads: a latest page (50 rows, newest observed_at first) and its count, run concurrently
 * as the resolver runs them (selectPage, selectCount), for 1 and 2 filters, equality and
 * range. "before" is the plan with no field indexed (the forms of the GIN index: containment
 * and jsonpath), "after" the plan with amount indexed (the typed
 * expressions of their btree indexes); both run on the same database with the indexes in
 * place, in alternating blocks, after checking they return the same ids and count.
 *
 * Writes: writeFacts (the one write path) of single facts (a workflow step's write) and of
 * batches of 500 (the import's), to existing entities, without and with the field
 * indexes, alternated twice (the indexes dropped and built again between rounds).
 *
 * Settings: BENCH_FILTER_FACTS, BENCH_FILTER_SECONDS (per query and side, default 3),
 * BENCH_FILTER_WRITES (single writes per round, default 200), BENCH_KEEP_DB=1.
 */
import { CompiledQuery, sql } from 'kysely';
import type { Principal } from '../src/auth/principal.ts';
import type { Db } from '../src/db/connect.ts';
import type { Deps } from '../src/deps.ts';
import { checkArguments } from '../src/graphql/fact-query.ts';
import { planFactQuery } from '../src/facts/query/plan.ts';
import { countSql, pageSql, selectCount, selectPage } from '../src/facts/query/page.sql.ts';
import type { FactQueryPlan } from '../src/facts/query/plan-types.ts';
import { writeFacts, type FactModel } from '../src/facts/write.ts';
import { patchField } from '../src/resources/data_model_fields/service.ts';
import { insertBenchModel, intEnv, loadAverage, runBench, runDeps, seedTenant, watchdog, withEngine, type Engine } from './common.ts';

const FACTS = intEnv('BENCH_FILTER_FACTS', 1_000_000, 1_000, 10_000_000);
const ENTITIES = Math.max(100, Math.floor(FACTS / 10));
const SECONDS = intEnv('BENCH_FILTER_SECONDS', 3, 1, 60);
const WRITES = intEnv('BENCH_FILTER_WRITES', 200, 10, 100_000);
const BATCH = 500;
const BLOCK = 10;
const DAY_MS = 86_400_000;
const INDEXED = ['amount'];

watchdog('bench/fact-filters', intEnv('BENCH_FILTER_WATCHDOG_SECONDS', 1800, 60, 7200) * 1000);

const FIELDS = [
  { name: 'invoice_id', type: 'string' as const, expr: `'inv-' || lpad((n % ${ENTITIES})::text, 7, '0')` },
  { name: 'status', type: 'string' as const, expr: `(array['open','paid','void','overdue'])[1 + (h % 4)]` },
  { name: 'region', type: 'string' as const, expr: `(array['eu','us','apac'])[1 + ((h / 4) % 3)]` },
  { name: 'customer', type: 'string' as const, expr: `'c-' || ((h / 12) % 5000)::text` },
  { name: 'amount', type: 'integer' as const, expr: `((h / 60000) % 10000)` },
];

interface Scenario {
  key: string;
  name: string;
  filters: { field: string; op: string; value: unknown }[];
}

const SCENARIOS: Scenario[] = [
  { key: 'eq', name: '1 filter, eq (status = open)', filters: [{ field: 'status', op: 'eq', value: 'open' }] },
  { key: 'range', name: '1 filter, range (amount >= 9000)', filters: [{ field: 'amount', op: 'gte', value: 9000 }] },
  {
    key: 'eq+range',
    name: '2 filters, eq + range (status = open, amount >= 5000)',
    filters: [
      { field: 'status', op: 'eq', value: 'open' },
      { field: 'amount', op: 'gte', value: 5000 },
    ],
  },
  {
    key: 'eq+eq',
    name: '2 filters, eq + eq (status = open, region = eu)',
    filters: [
      { field: 'status', op: 'eq', value: 'open' },
      { field: 'region', op: 'eq', value: 'eu' },
    ],
  },
  {
    key: 'range+range',
    name: '2 filters, range (2000 <= amount < 2500)',
    filters: [
      { field: 'amount', op: 'gte', value: 2000 },
      { field: 'amount', op: 'lt', value: 2500 },
    ],
  },
];

async function load(db: Db, orgId: string, wsId: string, endMs: number): Promise<{ model: FactModel; fieldIds: Map<string, string> }> {
  const fields = FIELDS.map((f) => ({ name: f.name, type: f.type, is_primary_key: f.name === 'invoice_id', is_required: f.name === 'invoice_id' }));
  const { id: modelId, fieldIds } = await insertBenchModel(db, orgId, wsId, 'invoices', fields);
  const span = 365 * DAY_MS;
  const start = endMs - span - 3_600_000;
  const cols = FIELDS.map((f) => `${f.expr} as ${f.name}`).join(', ');
  const obj = FIELDS.map((f) => `'${f.name}', g.${f.name}`).join(', ');
  const t0 = performance.now();
  // Facts as writeFacts stores them, but for the source key (unique per fact here; its form does not matter to reads).
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
  return { model: { id: modelId, fields }, fieldIds };
}

async function plan(db: Db, principal: Principal, s: Scenario, indexed: boolean): Promise<FactQueryPlan> {
  const args = checkArguments({ dataModelSlug: 'invoices', limit: 50, filters: JSON.stringify(s.filters) }, new Date());
  const p = await planFactQuery(db, principal.workspaceId, args);
  return { ...p, filters: p.filters.map((c) => ({ ...c, indexed: indexed && INDEXED.includes(c.field) })) };
}

async function pageAndCount(db: Db, p: FactQueryPlan): Promise<{ ids: string[]; count: number }> {
  // A copy per run, as bench/facts.ts does: the resolver plans each request afresh.
  const q = { ...p };
  const [page, count] = await Promise.all([selectPage(db, q, { withData: true, extra: 1 }), selectCount(db, q)]);
  return { ids: page.map((r) => r.id), count };
}

interface Stats {
  p50: number;
  p95: number;
  n: number;
}

function stats(xs: number[]): Stats {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)]!, p95: s[Math.min(s.length - 1, Math.floor(s.length * 0.95))]!, n: s.length };
}

/** Alternating blocks of BLOCK runs of each side until each has had SECONDS. */
async function alternate(sides: Array<() => Promise<unknown>>): Promise<Stats[]> {
  const samples = sides.map(() => [] as number[]);
  const spent = sides.map(() => 0);
  for (const side of sides) for (let i = 0; i < 3; i++) await side();
  while (spent.some((x) => x < SECONDS * 1000)) {
    for (const [i, side] of sides.entries()) {
      for (let k = 0; k < BLOCK; k++) {
        const t0 = performance.now();
        await side();
        const dt = performance.now() - t0;
        samples[i]!.push(dt);
        spent[i]! += dt;
      }
    }
  }
  return samples.map(stats);
}

async function explain(db: Db, q: { sql: string; parameters: readonly unknown[] }): Promise<string> {
  const r = await db.executeQuery<Record<string, string>>(CompiledQuery.raw(`explain (analyze, buffers) ${q.sql}`, [...q.parameters]));
  return r.rows.map((x) => Object.values(x)[0]).join('\n');
}

async function setIndexed(deps: Deps, principal: Principal, fieldIds: Map<string, string>, on: boolean): Promise<number> {
  const t0 = performance.now();
  for (const name of INDEXED) {
    const existing = await deps.db.selectFrom('data_model_fields').selectAll().where('id', '=', fieldIds.get(name)!).executeTakeFirstOrThrow();
    await patchField(deps.db, principal, existing, { is_indexed: on }, new Date(), deps.engine === 'postgres' ? 'concurrent' : 'plain');
  }
  if (on) await sql`analyze fact_current`.execute(deps.db);
  return (performance.now() - t0) / 1000;
}

let writeSeq = 0;
/** Facts for existing entities (each replaces its entity's current row on both axes). */
function items(n: number): Array<{ observed_at: string; data: Record<string, unknown> }> {
  return Array.from({ length: n }, () => {
    const k = writeSeq++;
    return {
      observed_at: new Date(Date.now() - (k % 1000) * 1000).toISOString(),
      data: {
        invoice_id: `inv-${String((k * 7919) % ENTITIES).padStart(7, '0')}`,
        status: ['open', 'paid', 'void', 'overdue'][k % 4],
        region: ['eu', 'us', 'apac'][k % 3],
        customer: `c-${k % 5000}`,
        amount: (k * 37) % 10000,
      },
    };
  });
}

async function measureWrites(deps: Deps, principal: Principal, model: FactModel): Promise<{ single: number; batch: number }> {
  const scope = { organizationId: principal.organizationId, workspaceId: principal.workspaceId };
  const t0 = performance.now();
  for (let i = 0; i < WRITES; i++) {
    const r = await writeFacts(deps.db, scope, model, items(1));
    if (r.written !== 1) throw new Error(`write failed: ${JSON.stringify(r.errors)}`);
  }
  const single = (performance.now() - t0) / WRITES;
  const batches = 4;
  const t1 = performance.now();
  for (let i = 0; i < batches; i++) {
    const r = await writeFacts(deps.db, scope, model, items(BATCH));
    if (r.written !== BATCH) throw new Error(`batch write failed: ${JSON.stringify(r.errors.slice(0, 3))}`);
  }
  const batch = (performance.now() - t1) / (batches * BATCH);
  return { single, batch };
}

interface Report {
  notes: string[];
}

function benchEngine(engine: Engine): Promise<Report> {
  return withEngine(engine, { prefix: 'tributary_bench_filters', skipped: (note) => ({ notes: [note] }) }, async (run) => {
    const deps = await runDeps(run);
    const { org, ws } = await seedTenant(deps.db, ['api_read']);
    const principal = { workspaceId: ws.id, organizationId: org.id } as Principal;
    const notes: string[] = [
      `${engine} ${run.version ?? ''}: ${FACTS.toLocaleString('en-US')} facts, ${ENTITIES.toLocaleString('en-US')} entities; load before: ${loadAverage()}`,
    ];
    const { model, fieldIds } = await load(deps.db, org.id, ws.id, Date.now());

    // Writes first, on the freshly loaded tables: without, with, without, with the field indexes.
    const writes: Record<'without' | 'with', Array<{ single: number; batch: number }>> = { without: [], with: [] };
    let buildSeconds = 0;
    for (let round = 0; round < 2; round++) {
      writes.without.push(await measureWrites(deps, principal, model));
      buildSeconds = await setIndexed(deps, principal, fieldIds, true);
      writes.with.push(await measureWrites(deps, principal, model));
      if (round === 0) await setIndexed(deps, principal, fieldIds, false);
    }
    await sql`vacuum (analyze) fact_current`.execute(deps.db);
    const avg = (xs: Array<{ single: number; batch: number }>, k: 'single' | 'batch') => xs.reduce((a, x) => a + x[k], 0) / xs.length;
    for (const k of ['single', 'batch'] as const) {
      const w = avg(writes.without, k);
      const i = avg(writes.with, k);
      notes.push(
        `write ${k === 'single' ? 'one fact per writeFacts' : `${BATCH} facts per writeFacts`}: ${w.toFixed(3)} -> ${i.toFixed(3)} ms per fact (x${(i / w).toFixed(2)}), rounds without ${writes.without.map((x) => x[k].toFixed(3)).join(', ')}, with ${writes.with.map((x) => x[k].toFixed(3)).join(', ')}`,
      );
    }
    notes.push(
      `index build (${INDEXED.join(', ')}, ${deps.engine === 'postgres' ? 'concurrently' : 'plain'}): ${buildSeconds.toFixed(1)} s; load now ${loadAverage()}`,
    );

    for (const s of SCENARIOS) {
      const before = await plan(deps.db, principal, s, false);
      const after = await plan(deps.db, principal, s, true);
      const a = await pageAndCount(deps.db, before);
      const b = await pageAndCount(deps.db, after);
      if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${s.key}: before and after differ (${a.count} vs ${b.count})`);
      const [sb, sa] = await alternate([() => pageAndCount(deps.db, before), () => pageAndCount(deps.db, after)]);
      notes.push(
        `${s.name}: count ${a.count}; page + count p50 ${sb!.p50.toFixed(2)} -> ${sa!.p50.toFixed(2)} ms (x${(sa!.p50 / sb!.p50).toFixed(2)}), p95 ${sb!.p95.toFixed(2)} -> ${sa!.p95.toFixed(2)} ms (n ${sb!.n}/${sa!.n}); load ${loadAverage()}`,
      );
      console.log(`  ${notes.at(-1)}`);
      if (process.env.BENCH_FILTER_EXPLAIN === '1') {
        for (const [label, p] of [
          ['before', before],
          ['after', after],
        ] as const) {
          console.log(
            `\n### ${s.name}, ${label}: page\n\n\`\`\`\n${await explain(deps.db, pageSql(p, { withData: true, extra: 1 }).compile(deps.db))}\n\`\`\``,
          );
          console.log(`\n### ${s.name}, ${label}: count\n\n\`\`\`\n${await explain(deps.db, countSql(p).compile(deps.db))}\n\`\`\``);
        }
      }
    }
    return { notes };
  });
}

runBench(benchEngine, () => undefined);
