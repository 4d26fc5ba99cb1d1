/**
 * factQuery as SQL: one statement for the page, one for the count when a selected field
 * needs it. Which table answers depends on the mode:
 *
 * - latest without `until` reads fact_current (one row per entity and axis, kept on write),
 *   never the history, so a page costs an index scan whatever the history's size;
 * - latest with `until` (as of) takes, per entity, the newest fact at or before `until`
 *   (facts without an entity id are each their own entity). A newest-first page walks the
 *   history back from `until` and keeps each fact that no newer one of its entity
 *   precedes; the rest (counts, oldest-first pages, and pages the walk cannot fill) read
 *   one of two equivalent sources picked per query: the history up to `until` (DISTINCT
 *   ON), or the current state, probing the history only for the entities changed since;
 * - timeline reads facts in [since, until) over the (model, axis, id) index.
 *
 * Every value that came from the caller is a bound parameter; identifiers (columns,
 * directions) are picked from fixed lists, never built from the caller's text.
 */
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/connect.ts';
import type { FieldType, TimeAxis } from '../db/schema.ts';
import type { FilterClause } from './filters.ts';

type Frag = RawBuilder<unknown>;

export interface ModelRef {
  id: string;
  slug: string;
  fields: { name: string; type: FieldType | null }[];
}

export interface FactQueryPlan {
  workspaceId: string;
  model: ModelRef;
  mode: 'latest' | 'timeline';
  axis: TimeAxis;
  /** Latest: entities whose latest row is older are dropped. Timeline: inclusive start. */
  since: Date | undefined;
  /** Latest: as-of instant (inclusive), absent for the current state. Timeline: exclusive end, always set. */
  until: Date | undefined;
  sort: 'observed_at' | 'inserted_at' | 'entity_id';
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
  filters: FilterClause[];
  join: { model: ModelRef; type: 'left' | 'inner'; filters: FilterClause[] } | undefined;
  /** As of `until` only: which source finds the rows (chooseAsOf); the history when absent. */
  asOf?: AsOfSource;
}

/**
 * Two ways to the newest fact per entity at or before `until`, same rows:
 * - 'history': DISTINCT ON over every fact up to `until`; its cost follows their number;
 * - 'current': the current state where it is older than `until`, and one probe of the
 *   history per entity changed since; its cost follows the entities and those changed.
 */
export type AsOfSource = 'history' | 'current';

export interface FactSqlRow {
  id: string;
  entity_id: string | null;
  observed_at: Date;
  inserted_at: Date;
  data?: unknown;
  /** The joined fact's data; null when nothing matched (left join). */
  joined?: Record<string, unknown> | null;
}

const AXIS_COLUMN: Record<TimeAxis, string> = { observed_at: 'observed_at', inserted_at: 'inserted_at' };
const DIRECTION: Record<'asc' | 'desc', Frag> = { asc: sql.raw('asc'), desc: sql.raw('desc') };

// Stored datetimes are ISO 8601 strings. A field whose type was changed after facts were
// written may hold other strings: the guard keeps out those of another shape (and what
// PostgreSQL would read besides ISO, such as 'now'), and tributary_timestamptz_or_null
// (migration 0004) makes null of those of ISO shape that are no instant ('2026-02-30').
const ISO_GUARD = '^\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?([Zz]|[+-]\\d{2}(:?\\d{2})?)$';

const ref = (alias: string, column: string): Frag => sql.ref(`${alias}.${column}`) as Frag;

/** The newest-first order that defines "latest" on an axis (decisions.md 5: ties by inserted_at, then id). */
function latestOrder(alias: string, axis: TimeAxis): Frag {
  return axis === 'observed_at'
    ? sql`${ref(alias, 'observed_at')} desc, ${ref(alias, 'inserted_at')} desc, ${ref(alias, 'id')} desc`
    : sql`${ref(alias, 'inserted_at')} desc, ${ref(alias, 'id')} desc`;
}

/** The SQL value a clause compares, typed by the field: numeric, timestamptz, text or jsonb. */
function operand(data: Frag, c: FilterClause): Frag {
  const member = sql`(${data} -> ${c.field}::text)`;
  const text = sql`(${data} ->> ${c.field}::text)`;
  if (c.type === 'integer' || c.type === 'float') return sql`(case when jsonb_typeof(${member}) = 'number' then ${text}::numeric end)`;
  if (c.type === 'datetime') return sql`(case when jsonb_typeof(${member}) = 'string' and ${text} ~ ${ISO_GUARD} then tributary_timestamptz_or_null(${text}) end)`;
  if (c.op === 'contains') return sql`(case when jsonb_typeof(${member}) = 'string' then ${text} end)`;
  return member;
}

/** The value a SQL comparison compares with (numbers never get here: see scalarEquality and pathPredicate). */
function bound(c: FilterClause, v: unknown): Frag {
  if (c.type === 'datetime') return sql`${v as string}::timestamptz`;
  return sql`${JSON.stringify(v)}::jsonb`;
}

function boundList(c: FilterClause, values: unknown[]): Frag {
  const elements = sql`jsonb_array_elements(${JSON.stringify(values)}::jsonb) as e(v)`;
  if (c.type === 'integer' || c.type === 'float') return sql`(select (e.v #>> '{}')::numeric from ${elements})`;
  if (c.type === 'datetime') return sql`(select (e.v #>> '{}')::timestamptz from ${elements})`;
  return sql`(select e.v from ${elements})`;
}

/** Field types whose values are JSON scalars compared by value (datetime compares instants). */
const SCALAR_TYPES: ReadonlySet<FilterClause['type']> = new Set<FilterClause['type']>(['string', 'integer', 'float', 'boolean', null]);

type Scalar = string | number | boolean;
const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/**
 * eq on a scalar value as containment: `data @> {"field": value}` holds exactly when the
 * member is that scalar (numbers compare as numbers: 5.0 matches 5). The GIN index on
 * fact_current.data answers it, so a latest page or count filtered on a rare value reads
 * only the rows that have it; where it is tested row by row, it reads the stored jsonb in
 * place, where `data -> field = value` first copies the member out. Objects and arrays (map
 * and untyped fields) keep `->` equality, since containment of those is not equality.
 */
function scalarEquality(data: Frag, c: FilterClause): Frag | undefined {
  const v = c.value;
  if (!SCALAR_TYPES.has(c.type) || !isScalar(v)) return undefined;
  return sql`${data} @> ${JSON.stringify({ [c.field]: v })}::jsonb`;
}

const COMPARISON = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/**
 * A strict-mode jsonpath predicate (`data @@ 'strict <predicate>'`), for numeric ranges,
 * string prefixes and short `in` lists: it tests the stored jsonb in one call, where the
 * SQL form copies the member out (twice for a range, which also round-trips the number
 * through text: 0.27 instead of 0.39 us per row). A member that is missing or of another
 * JSON type makes a comparison unknown, which `@@` answers with null: the row does not
 * match, as with the SQL form. Literals are JSON (numbers, booleans, and strings that
 * filters.ts checked are well-formed), which is jsonpath's literal syntax as well.
 */
function pathPredicate(data: Frag, predicate: string): Frag {
  return sql`${data} @@ ${`strict ${predicate}`}::jsonpath`;
}

const pathMember = (field: string): string => `$.${JSON.stringify(field)}`;

/**
 * PostgreSQL's own `= ANY(array)` switches to a hash table at 9 elements; a jsonpath
 * disjunction is tested element by element, so longer lists keep the hashed form.
 */
const MAX_PATH_IN = 8;

/**
 * `in` over a few scalars as a jsonpath disjunction (`$."f" == a || $."f" == b`), which the
 * GIN index on fact_current.data answers like eq: "these two customers" reads their
 * entities' rows (0.2 ms at 100k entities, page or count) instead of testing every current
 * row (34 ms for the count; 114 ms for a page, which walks the whole model in order).
 * Equality is by type and value as for eq (5.0 is 5; "5" is not 5). Longer lists, and
 * lists holding objects or arrays, keep the hashed subquery, whose cost per row does not
 * grow with the list (a disjunction of 32 tested on every row costs 9x as much).
 */
function scalarMembership(data: Frag, c: FilterClause): Frag | undefined {
  const values = c.value as unknown[];
  if (!SCALAR_TYPES.has(c.type) || values.length === 0 || values.length > MAX_PATH_IN || !values.every(isScalar)) return undefined;
  const member = pathMember(c.field);
  return pathPredicate(data, values.map((v) => `${member} == ${JSON.stringify(v)}`).join(' || '));
}

export function clauseSql(data: Frag, c: FilterClause): Frag {
  const x = operand(data, c);
  const containment = c.op === 'eq' || c.op === 'ne' ? scalarEquality(data, c) : undefined;
  switch (c.op) {
    case 'eq':
      return containment ?? sql`${x} = ${bound(c, c.value)}`;
    // ne and nin are the complements of eq and in: a missing or null member matches them.
    case 'ne':
      return containment ? sql`not (${containment})` : sql`${x} is distinct from ${bound(c, c.value)}`;
    case 'in':
      return scalarMembership(data, c) ?? sql`${x} in ${boundList(c, c.value as unknown[])}`;
    case 'nin':
      return sql`(${x} is null or ${x} not in ${boundList(c, c.value as unknown[])})`;
    case 'is_null':
      return c.value ? sql`(${data} ->> ${c.field}::text) is null` : sql`(${data} ->> ${c.field}::text) is not null`;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return c.type === 'integer' || c.type === 'float'
        ? pathPredicate(data, `${pathMember(c.field)} ${COMPARISON[c.op]} ${JSON.stringify(c.value)}`)
        : sql`${x} ${sql.raw(COMPARISON[c.op])} ${bound(c, c.value)}`;
    case 'contains':
      return sql`strpos(${x}, ${c.value as string}::text) > 0`;
    case 'starts_with':
      return pathPredicate(data, `${pathMember(c.field)} starts with ${JSON.stringify(c.value)}`);
  }
}

const FACT_COLUMNS = sql`f.id, f.entity_id, f.observed_at, f.inserted_at, f.data`;

/** Facts of the plan's model and workspace at or before `until`, under `alias`. */
function upToUntil(p: FactQueryPlan, alias = 'f'): Frag {
  return sql`${ref(alias, 'data_model_id')} = ${p.model.id} and ${ref(alias, 'workspace_id')} = ${p.workspaceId} and ${ref(alias, AXIS_COLUMN[p.axis])} <= ${p.until!}`;
}

/** fact_current rows of the plan's model, workspace and axis, as alias c. */
function currentOfPlan(p: FactQueryPlan): Frag {
  return sql`c.data_model_id = ${p.model.id} and c.workspace_id = ${p.workspaceId} and c.axis = ${p.axis}`;
}

/** Per entity the newest fact up to `until`, over the (model, entity, axis desc) index. */
function asOfFromHistory(p: FactQueryPlan): Frag {
  return sql`(select distinct on (f.entity_id) ${FACT_COLUMNS}
        from facts as f where ${upToUntil(p)} and f.entity_id is not null
        order by f.entity_id, ${latestOrder('f', p.axis)})
      union all
      (select ${FACT_COLUMNS} from facts as f where ${upToUntil(p)} and f.entity_id is null)`;
}

/**
 * An entity's current fact is its newest up to `until` unless it is newer than `until`;
 * only then is the history probed (facts without an entity id are their own current
 * fact, which a probe by entity id never finds: they are in or out by their own time).
 */
function asOfFromCurrent(p: FactQueryPlan): Frag {
  const axis = AXIS_COLUMN[p.axis];
  const current = currentOfPlan(p);
  return sql`(select c.fact_id as id, c.entity_id, c.observed_at, c.inserted_at, c.data
        from fact_current as c where ${current} and ${ref('c', axis)} <= ${p.until!})
      union all
      (select h.id, h.entity_id, h.observed_at, h.inserted_at, h.data from fact_current as c
        cross join lateral (select ${FACT_COLUMNS} from facts as f
          where ${upToUntil(p)} and f.entity_id = c.entity_id order by ${latestOrder('f', p.axis)} limit 1) as h
        where ${current} and ${ref('c', axis)} > ${p.until!})`;
}

interface Source {
  /** FROM item, aliased b. */
  from: Frag;
  where: Frag[];
  /** The fact id column of b. */
  id: string;
}

function baseSource(p: FactQueryPlan): Source {
  const axis = AXIS_COLUMN[p.axis];
  const where: Frag[] = [];
  let source: Source;
  if (p.mode === 'timeline') {
    source = {
      from: sql`facts as b`,
      where: [sql`b.data_model_id = ${p.model.id}`, sql`b.workspace_id = ${p.workspaceId}`, sql`${ref('b', axis)} >= ${p.since!}`, sql`${ref('b', axis)} < ${p.until!}`],
      id: 'id',
    };
  } else if (p.until === undefined) {
    source = { from: sql`fact_current as b`, where: [sql`b.data_model_id = ${p.model.id}`, sql`b.workspace_id = ${p.workspaceId}`, sql`b.axis = ${p.axis}`], id: 'fact_id' };
  } else {
    source = { from: sql`(${p.asOf === 'current' ? asOfFromCurrent(p) : asOfFromHistory(p)}) as b`, where: [], id: 'id' };
  }
  if (p.mode === 'latest' && p.since !== undefined) where.push(sql`${ref('b', axis)} >= ${p.since}`);
  for (const c of p.filters) where.push(clauseSql(sql.ref('b.data') as Frag, c));
  return { ...source, where: [...source.where, ...where] };
}

function whereClause(conditions: Frag[]): Frag {
  return conditions.length > 0 ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
}

function orderBy(p: FactQueryPlan, alias: string, idColumn: string): Frag {
  const dir = DIRECTION[p.direction];
  const id = ref(alias, idColumn);
  if (p.mode === 'timeline' && p.sort === 'entity_id') {
    // Byte order, so the order is the same on every server whatever its default collation.
    return sql`${ref(alias, 'entity_id')} collate "C" ${dir} nulls last, ${id} ${dir}`;
  }
  const column = p.mode === 'timeline' ? AXIS_COLUMN[p.sort as TimeAxis] : 'observed_at';
  return sql`${ref(alias, column)} ${dir}, ${id} ${dir}`;
}

/** The joined model's newest fact for the entity of `outer`, among those passing joinFilters. */
function joinLateral(p: FactQueryPlan, outer: string): Frag {
  const join = p.join!;
  const entity = ref(outer, 'entity_id');
  if (join.filters.length === 0 && p.until === undefined) {
    // Without joinFilters the newest fact is the current state: a primary-key lookup.
    return sql`(select jc.data from fact_current as jc
      where jc.data_model_id = ${join.model.id} and jc.workspace_id = ${p.workspaceId} and jc.axis = ${p.axis}
        and jc.entity_key = ${entity} and jc.entity_id = ${entity})`;
  }
  const conds: Frag[] = [sql`jf.data_model_id = ${join.model.id}`, sql`jf.workspace_id = ${p.workspaceId}`, sql`jf.entity_id = ${entity}`];
  if (p.until !== undefined) conds.push(sql`${ref('jf', AXIS_COLUMN[p.axis])} <= ${p.until}`);
  for (const c of join.filters) conds.push(clauseSql(sql.ref('jf.data') as Frag, c));
  return sql`(select jf.data from facts as jf where ${sql.join(conds, sql` and `)} order by ${latestOrder('jf', p.axis)} limit 1)`;
}

function columns(alias: string, idColumn: string, withData: boolean): Frag {
  const base = sql`${ref(alias, idColumn)} as id, ${ref(alias, 'entity_id')} as entity_id, ${ref(alias, 'observed_at')} as observed_at, ${ref(alias, 'inserted_at')} as inserted_at`;
  return withData ? sql`${base}, ${ref(alias, 'data')} as data` : base;
}

/** A left join never changes which rows are on the page: the joined facts are looked up for the page's rows only, after the limit. */
function withLeftJoin(p: FactQueryPlan, page: Frag, opts: { withData: boolean }): Frag {
  if (p.join?.type !== 'left' || !opts.withData) return page;
  return sql`select pg.*, j.data as joined from (${page}) as pg
    left join lateral ${joinLateral(p, 'pg')} as j on true
    order by ${orderBy(p, 'pg', 'id')}`;
}

/** The page statement; `extra` rows beyond the limit are fetched to learn whether a next page exists. */
export function pageSql(p: FactQueryPlan, opts: { withData: boolean; extra: number }): Frag {
  const src = baseSource(p);
  const where = whereClause(src.where);
  const limit = p.limit + opts.extra;
  if (p.join?.type === 'inner') {
    return sql`select ${columns('b', src.id, opts.withData)}${opts.withData ? sql`, j.data as joined` : sql``}
      from ${src.from} join lateral ${joinLateral(p, 'b')} as j on true
      ${where} order by ${orderBy(p, 'b', src.id)} limit ${limit} offset ${p.offset}`;
  }
  const page = sql`select ${columns('b', src.id, opts.withData)} from ${src.from} ${where}
    order by ${orderBy(p, 'b', src.id)} limit ${limit} offset ${p.offset}`;
  return withLeftJoin(p, page, opts);
}

export function countSql(p: FactQueryPlan): Frag {
  const src = baseSource(p);
  // An inner join's count needs only whether each row has a match. As EXISTS (whose ORDER
  // BY and LIMIT the planner drops) the joined side can be read once and hashed, a
  // semi-join, where the lateral form probes it once per row: with joinFilters at 100k
  // entities, 316 ms -> 37 ms.
  const conditions = p.join?.type === 'inner' ? [...src.where, sql`exists ${joinLateral(p, 'b')}`] : src.where;
  return sql`select count(*)::int as n from ${src.from} ${whereClause(conditions)}`;
}

/**
 * How many facts a newest-first as-of page walks back from `until` before it gives up and
 * reads a source instead. A fact is on the page when no newer fact of its entity (up to
 * `until`) exists; walking newest first, most facts near `until` are their entity's newest,
 * so a page fills after a few dozen. Oldest first it would not (the oldest facts are the
 * ones superseded), nor with a filter that the newest facts fail: the window bounds what
 * such a walk costs (about 1,000 probes, a few ms) before the fallback.
 */
export const AS_OF_WALK_WINDOW = 1000;

/**
 * Whether an as-of page can be walked: newest first, on the observed_at axis (the page's
 * order, so the window is a range of the (model, observed_at, id) index; as of an
 * inserted_at the walk would read facts out of that order to find the window's), within
 * the window, and no inner join (which would drop rows the walk counted).
 */
export function walkable(p: FactQueryPlan, window: number): boolean {
  return (
    p.mode === 'latest' && p.until !== undefined && p.axis === 'observed_at' && p.direction === 'desc' && p.join?.type !== 'inner' && p.offset + p.limit < window
  );
}

/**
 * The as-of page by walking: the `window` newest facts up to `until` (and from `since`),
 * in page order (observed_at, id), keep those passing the filters that no newer fact of
 * their entity up to `until` supersedes. Each row also says how many facts were walked.
 */
export function asOfWalkSql(p: FactQueryPlan, opts: { withData: boolean; extra: number }, window: number): Frag {
  const axis = AXIS_COLUMN[p.axis];
  const walk = [upToUntil(p)];
  if (p.since !== undefined) walk.push(sql`${ref('f', axis)} >= ${p.since}`);
  const newer =
    p.axis === 'observed_at'
      ? sql`(g.observed_at, g.inserted_at, g.id) > (b.observed_at, b.inserted_at, b.id)`
      : sql`(g.inserted_at, g.id) > (b.inserted_at, b.id)`;
  const kept = [
    ...p.filters.map((c) => clauseSql(sql.ref('b.data') as Frag, c)),
    sql`not exists (select 1 from facts as g where ${upToUntil(p, 'g')} and g.entity_id = b.entity_id and ${newer})`,
  ];
  const page = sql`select ${columns('b', 'id', opts.withData)} from w as b ${whereClause(kept)}
    order by ${orderBy(p, 'b', 'id')} limit ${p.limit + opts.extra} offset ${p.offset}`;
  return sql`with w as materialized (select ${FACT_COLUMNS} from facts as f where ${sql.join(walk, sql` and `)}
      order by ${orderBy(p, 'f', 'id')} limit ${window})
    select n.walked, pg.* from (select count(*)::int as walked from w) as n
      left join lateral (${withLeftJoin(p, page, opts)}) as pg on true
    order by ${orderBy(p, 'pg', 'id')}`;
}

/** The walked page, or undefined when the window held too few of its rows (the page continues beyond it). */
async function walkPage(db: Db, p: FactQueryPlan, opts: { withData: boolean; extra: number }, window: number): Promise<FactSqlRow[] | undefined> {
  const { rows } = await asOfWalkSql(p, opts, window).execute(db);
  const walked = (rows[0] as { walked: number }).walked;
  const page = (rows as (FactSqlRow & { walked?: number; id: string | null })[]).filter((r) => r.id !== null);
  for (const r of page) delete r.walked;
  return page.length === p.limit + opts.extra || walked < window ? page : undefined;
}

/**
 * chooseAsOf's measure: entities changed since `until` (up to a cap), and, only when there
 * are fewer, facts up to `until` (counted up to HISTORY_PER_PROBE times as many). Both are
 * index-only range counts whose cost is bounded by what the cheaper source would cost.
 */
const CHANGED_CAP = 32_768;
/** A probe of the history costs about as much as reading this many facts of it in DISTINCT ON (bench, 1M facts: 5.6 us against 0.3 us). */
const HISTORY_PER_PROBE = 16;

export function asOfGateSql(p: FactQueryPlan): Frag {
  const axis = AXIS_COLUMN[p.axis];
  return sql`select c.n as changed,
      case when c.n < ${CHANGED_CAP} then (select count(*)::int from (select 1 from facts as f where ${upToUntil(p)}
        limit ${HISTORY_PER_PROBE} * c.n + 1) as h) end as before
    from (select count(*)::int as n from (select 1 from fact_current as c
      where ${currentOfPlan(p)} and ${ref('c', axis)} > ${p.until!}
      limit ${CHANGED_CAP}) as s) as c`;
}

/** The cheaper as-of source for this plan: the current state when few entities changed since `until` against the facts before it. */
export async function chooseAsOf(db: Db, p: FactQueryPlan): Promise<AsOfSource> {
  const { rows } = await asOfGateSql(p).execute(db);
  const { changed, before } = rows[0] as { changed: number; before: number | null };
  return before !== null && before > HISTORY_PER_PROBE * changed ? 'current' : 'history';
}

// One choice per plan: a page that falls back and the count of the same query share it.
const chosen = new WeakMap<FactQueryPlan, Promise<AsOfSource>>();

async function withAsOfSource(db: Db, p: FactQueryPlan): Promise<FactQueryPlan> {
  if (p.mode !== 'latest' || p.until === undefined || p.asOf !== undefined) return p;
  let choice = chosen.get(p);
  if (choice === undefined) {
    choice = chooseAsOf(db, p);
    chosen.set(p, choice);
  }
  return { ...p, asOf: await choice };
}

export async function selectPage(db: Db, p: FactQueryPlan, opts: { withData: boolean; extra: number }, window = AS_OF_WALK_WINDOW): Promise<FactSqlRow[]> {
  if (walkable(p, window)) {
    const walked = await walkPage(db, p, opts, window);
    if (walked !== undefined) return walked;
  }
  const { rows } = await pageSql(await withAsOfSource(db, p), opts).execute(db);
  return rows as FactSqlRow[];
}

export async function selectCount(db: Db, p: FactQueryPlan): Promise<number> {
  const { rows } = await countSql(await withAsOfSource(db, p)).execute(db);
  return (rows[0] as { n: number }).n;
}

/**
 * The models of these slugs in one workspace, with their fields, as one row holding a JSON
 * array (a slug of another workspace is simply absent). One fixed text whatever the number
 * of slugs, so that it can run inside the account re-check's statement (loadAccountWithRow)
 * as well as on its own.
 */
export function modelsQuery(db: Db, workspaceId: string, slugs: string[]) {
  const fields = sql`(select coalesce(json_agg(json_build_object('name', f.name, 'type', f.type) order by f.name), '[]'::json)
    from data_model_fields as f where f.data_model_id = m.id)`;
  return db
    .selectFrom('data_models as m')
    .where('m.workspace_id', '=', workspaceId)
    .where(sql<boolean>`m.slug = any(${slugs}::text[])`)
    .select([
      // loadAccountWithRow tells "no row" by a null id; an aggregate always has its one row.
      sql<string>`'models'`.as('id'),
      sql<ModelRef[]>`coalesce(json_agg(json_build_object('id', m.id, 'slug', m.slug, 'fields', ${fields})), '[]'::json)`.as('models'),
    ]);
}

export function modelMap(models: readonly ModelRef[]): Map<string, ModelRef> {
  return new Map(models.map((m) => [m.slug, m]));
}

export async function loadModels(db: Db, workspaceId: string, slugs: string[]): Promise<Map<string, ModelRef>> {
  const row = await modelsQuery(db, workspaceId, slugs).executeTakeFirstOrThrow();
  return modelMap(row.models);
}
