/**
 * A checked factAggregate becomes an AggregatePlan: the query part (models, filters, join,
 * window) planned exactly as factQuery's, then groupBy paths and measure fields resolved
 * against the models' fields, orderBy names against the groups and measures, and the time
 * zone against PostgreSQL's own list.
 */
import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';
import { badArgument } from '../query/filters.ts';
import { planFactQuery, type FactQueryArgs, type PrefetchedModels } from '../query/plan.ts';
import type { DataModelWithFields } from '../models.sql.ts';
import type { AggregateBucket, AggregateField, AggregateMeasure, AggregateOrder, AggregatePlan, BucketUnit, MeasureOp } from './plan-types.ts';

export const MAX_GROUP_BY = 3;
export const MAX_MEASURES = 10;
export const MAX_GROUPS = 10_000;
export const DEFAULT_GROUPS = 1000;
/** Buckets a series may have (series.sql.ts walks them all). */
export const MAX_SERIES_BUCKETS = 1000;

export interface RawMeasure {
  op: string;
  field?: string | null | undefined;
  as?: string | null | undefined;
}

export interface RawOrder {
  by: string;
  direction: 'asc' | 'desc';
}

/** The arguments of a factAggregate, checked for everything that needs no database. */
export interface AggregateArgs {
  query: FactQueryArgs;
  groupBy: string[];
  bucket: AggregateBucket | undefined;
  /** The zone buckets are cut in (also checked without a bucket, where it changes nothing). */
  timezone: string;
  series: boolean;
  measures: RawMeasure[];
  orderBy: RawOrder[];
  limit: number;
  /** The request's now: a series window's default end. */
  now: Date;
}

const NUMERIC_OPS: ReadonlySet<MeasureOp> = new Set<MeasureOp>(['sum', 'avg', 'min', 'max']);
export const MEASURE_OPS: readonly MeasureOp[] = ['count', 'count_distinct_entities', 'sum', 'avg', 'min', 'max'];
/** A measure's name as `as` gives it: the names orderBy uses, so kept to a plain shape. */
const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function resolveField(path: string, model: DataModelWithFields, join: DataModelWithFields | undefined, argument: string): AggregateField {
  const dot = path.indexOf('.');
  if (dot > 0 && join !== undefined && path.slice(0, dot) === join.slug) {
    const name = path.slice(dot + 1);
    const field = join.fields.find((f) => f.name === name);
    if (field) return { source: 'join', field, path };
    throw badArgument(`${argument}: ${JSON.stringify(path)} names no field of the joined data model ${join.slug}`, argument);
  }
  const field = model.fields.find((f) => f.name === path);
  if (field) return { source: 'model', field, path };
  const hint = join === undefined ? '' : ` (fields of the joined model are named ${join.slug}.<field>)`;
  throw badArgument(`${argument}: ${JSON.stringify(path)} names no field of the data model ${model.slug}${hint}`, argument);
}

function resolveMeasures(raw: RawMeasure[], model: DataModelWithFields, join: DataModelWithFields | undefined): AggregateMeasure[] {
  const measures = raw.map((m, i): AggregateMeasure => {
    const at = `measures[${i}]`;
    if (!(MEASURE_OPS as readonly string[]).includes(m.op)) throw badArgument(`${at}.op must be one of ${MEASURE_OPS.join(', ')}`, 'measures');
    const op = m.op as MeasureOp;
    let field: AggregateField | undefined;
    if (NUMERIC_OPS.has(op)) {
      if (typeof m.field !== 'string') throw badArgument(`${at}: ${op} needs a field`, 'measures');
      field = resolveField(m.field, model, join, 'measures');
      if (field.field.type !== 'integer' && field.field.type !== 'float')
        throw badArgument(`${at}: ${op} needs an integer or float field; ${m.field} is ${field.field.type ?? 'untyped'}`, 'measures');
    } else if (m.field !== null && m.field !== undefined) {
      throw badArgument(`${at}: ${op} takes no field`, 'measures');
    }
    if (m.as !== null && m.as !== undefined && !NAME_RE.test(m.as)) throw badArgument(`${at}.as must match ${NAME_RE.source}`, 'measures');
    const name = m.as ?? (field ? `${op}_${field.path.replaceAll('.', '_')}` : op);
    return field ? { name, op, field } : { name, op };
  });
  const seen = new Set<string>();
  for (const m of measures) {
    if (seen.has(m.name)) throw badArgument(`measures: two measures are named ${m.name}; name one with as`, 'measures');
    seen.add(m.name);
  }
  return measures;
}

function resolveOrder(raw: RawOrder[], groupBy: AggregateField[], measures: AggregateMeasure[], bucketed: boolean): AggregateOrder[] {
  const orders = raw.map((o): AggregateOrder => {
    if (o.by === 'bucket') {
      if (!bucketed) throw badArgument('orderBy: bucket needs the bucket argument', 'orderBy');
      return { by: { kind: 'bucket' }, direction: o.direction };
    }
    const measure = measures.findIndex((m) => m.name === o.by);
    if (measure >= 0) return { by: { kind: 'measure', index: measure }, direction: o.direction };
    const group = groupBy.findIndex((g) => g.path === o.by);
    if (group >= 0) return { by: { kind: 'group', index: group }, direction: o.direction };
    throw badArgument(`orderBy: ${JSON.stringify(o.by)} is neither a measure's name, a groupBy path nor bucket`, 'orderBy');
  });
  // The default: time first when bucketed, else the largest first measure.
  if (orders.length > 0) return orders;
  return bucketed ? [{ by: { kind: 'bucket' }, direction: 'asc' }] : [{ by: { kind: 'measure', index: 0 }, direction: 'desc' }];
}

// PostgreSQL's zone names, read once per database (a few hundred rows).
const zoneNames = new WeakMap<Db, Promise<ReadonlySet<string>>>();

async function knownZones(db: Db): Promise<ReadonlySet<string>> {
  let zones = zoneNames.get(db);
  if (zones === undefined) {
    zones = sql<{ name: string }>`select name from pg_timezone_names`.execute(db).then((r) => new Set(r.rows.map((x) => x.name)));
    // A failed read is not remembered: the next request reads again.
    zones.catch(() => zoneNames.delete(db));
    zoneNames.set(db, zones);
  }
  return zones;
}

const UNIT_MS: Record<Exclude<BucketUnit, 'month'>, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000 };

/**
 * The buckets of a series window, counted on the local wall clock of the zone (the way the
 * buckets are cut): from the bucket holding `since` to the one holding the last instant
 * before `until`.
 */
export function seriesBucketCount(b: AggregateBucket, since: Date, until: Date): number {
  const wall = (d: Date) => {
    const parts = new Intl.DateTimeFormat('en-US', {
      timeZone: b.timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    }).formatToParts(d);
    const n = (type: string) => Number(parts.find((p) => p.type === type)!.value);
    return Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'));
  };
  let from: number;
  let to: number;
  try {
    from = wall(since);
    to = wall(new Date(until.getTime() - 1));
  } catch {
    // A zone PostgreSQL knows and this runtime does not: count in UTC, off by at most one.
    from = since.getTime();
    to = until.getTime() - 1;
  }
  if (to < from) return 0;
  if (b.unit === 'month') {
    const f = new Date(from);
    const t = new Date(to);
    return (t.getUTCFullYear() - f.getUTCFullYear()) * 12 + t.getUTCMonth() - f.getUTCMonth() + 1;
  }
  const size = UNIT_MS[b.unit];
  // Weeks start on Monday or Sunday: 1970-01-01 was a Thursday.
  const shift = b.unit === 'week' ? (b.weekStart === 'monday' ? 3 : 4) * UNIT_MS.day : 0;
  return Math.floor((to + shift) / size) - Math.floor((from + shift) / size) + 1;
}

export async function planAggregate(db: Db, workspaceId: string, a: AggregateArgs, prefetched?: PrefetchedModels): Promise<AggregatePlan> {
  const q = await planFactQuery(db, workspaceId, a.query, prefetched);
  const joinModel = q.join?.model;
  const groupBy = a.groupBy.map((path) => resolveField(path, q.model, joinModel, 'groupBy'));
  if (new Set(a.groupBy).size !== a.groupBy.length) throw badArgument('groupBy names a field twice', 'groupBy');
  const measures = resolveMeasures(a.measures, q.model, joinModel);
  const orderBy = resolveOrder(a.orderBy, groupBy, measures, a.bucket !== undefined);
  if (a.timezone !== 'UTC' && !(await knownZones(db)).has(a.timezone))
    throw badArgument(`timezone ${JSON.stringify(a.timezone)} is not a time zone name PostgreSQL knows (IANA, such as Europe/Berlin)`, 'timezone');
  let until = q.until;
  if (a.series) {
    until ??= a.now;
    if (q.since!.getTime() >= until.getTime()) throw badArgument('since must be before until in a series', 'since');
    const n = seriesBucketCount(a.bucket!, q.since!, until);
    if (n > MAX_SERIES_BUCKETS)
      throw badArgument(`the series window holds ${n} ${a.bucket!.unit} buckets; at most ${MAX_SERIES_BUCKETS} are allowed`, 'bucket');
  }
  return {
    workspaceId,
    model: q.model,
    mode: q.mode,
    axis: q.axis,
    since: q.since,
    until,
    filters: q.filters,
    join: q.join,
    groupBy,
    bucket: a.bucket,
    series: a.series,
    measures,
    orderBy,
    limit: a.limit,
  };
}
