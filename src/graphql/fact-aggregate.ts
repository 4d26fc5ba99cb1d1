/**
 * factAggregate: its GraphQL types, its argument checks and its resolver. The query part of
 * the arguments (slug, mode, axis, window, filters, join) is checked by factQuery's own
 * checks; the rest here, then facts/aggregate plans and runs it in the caller's workspace.
 */
import {
  GraphQLBoolean,
  GraphQLError,
  GraphQLFloat,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfig,
  type GraphQLInputType,
  type GraphQLNullableType,
} from 'graphql';
import { performance } from 'node:perf_hooks';
import { AppError } from '../errors.ts';
import { invalidArgument } from './errors.ts';
import { DateTimeScalar, JsonScalar } from './scalars.ts';
import { checkArguments, recheck, type GraphqlContext } from './fact-query.ts';
import {
  DEFAULT_GROUPS,
  MAX_GROUP_BY,
  MAX_GROUPS,
  MAX_MEASURES,
  planAggregate,
  type AggregateArgs,
  type RawMeasure,
  type RawOrder,
} from '../facts/aggregate/plan.ts';
import { runAggregate } from '../facts/aggregate/aggregate.sql.ts';
import type { AggregateBucket, AggregatePlan, AggregateResult, BucketUnit } from '../facts/aggregate/plan-types.ts';

export interface FactGroupKey {
  field: string;
  string: string | null;
  number: number | null;
  boolean: boolean | null;
  dateTime: Date | null;
  json: unknown;
}

export interface FactAggregate {
  groupBy: string[];
  measures: string[];
  groups: { keys: FactGroupKey[]; bucket: Date | null; values: { name: string; value: number | null }[] }[];
  groupsCut: boolean;
}

const UNITS: readonly BucketUnit[] = ['minute', 'hour', 'day', 'week', 'month'];
const WEEK_STARTS = ['monday', 'sunday'] as const;
const DIRECTIONS = ['asc', 'desc'] as const;

function oneOf<T extends string>(value: unknown, allowed: readonly T[], def: T | undefined, argument: string): T | undefined {
  if (value === null || value === undefined) return def;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidArgument(`${argument} must be one of ${allowed.join(', ')}`, argument);
}

const list = (value: unknown): unknown[] | undefined => (value === null || value === undefined ? undefined : (value as unknown[]));

/** Checks every argument that needs no database. */
export function checkAggregateArguments(args: Record<string, unknown>, now: Date): AggregateArgs {
  const query = checkArguments(
    {
      dataModelSlug: args.dataModelSlug,
      mode: args.mode,
      timeAxis: args.timeAxis,
      since: args.since,
      until: args.until,
      filters: args.filters,
      joinDataModelSlug: args.joinDataModelSlug,
      joinType: args.joinType,
      joinFilters: args.joinFilters,
    },
    now,
  );
  const groupBy = (list(args.groupBy) ?? []) as string[];
  if (groupBy.length > MAX_GROUP_BY) throw invalidArgument(`groupBy takes at most ${MAX_GROUP_BY} fields`, 'groupBy');

  const unit = oneOf(args.bucket, UNITS, undefined, 'bucket');
  const weekStart = oneOf(args.weekStart, WEEK_STARTS, 'monday', 'weekStart')!;
  const timezone = typeof args.timezone === 'string' ? args.timezone : 'UTC';
  const bucket: AggregateBucket | undefined = unit === undefined ? undefined : { unit, timezone, weekStart };

  const series = args.series === true;
  if (series) {
    if (query.mode !== 'latest') throw invalidArgument('series is a latest-mode aggregate (the latest state as of each bucket end)', 'series');
    if (bucket === undefined) throw invalidArgument('series needs bucket', 'bucket');
    if (query.since === undefined) throw invalidArgument('series needs since, the start of its window', 'since');
    if (query.joinSlug !== undefined) throw invalidArgument('joinDataModelSlug is not available with series', 'joinDataModelSlug');
  }

  const measures = (list(args.measures) ?? [{ op: 'count' }]) as RawMeasure[];
  if (measures.length === 0 || measures.length > MAX_MEASURES) throw invalidArgument(`measures takes 1 to ${MAX_MEASURES} measures`, 'measures');
  const orderBy = ((list(args.orderBy) ?? []) as { by: string; direction?: unknown }[]).map((o): RawOrder => ({
    by: o.by,
    direction: oneOf(o.direction, DIRECTIONS, 'desc', 'orderBy')!,
  }));
  if (orderBy.length > MAX_GROUP_BY + MAX_MEASURES + 1) throw invalidArgument('orderBy names more keys than a group has', 'orderBy');

  const limit = typeof args.limit === 'number' ? args.limit : DEFAULT_GROUPS;
  if (limit < 1 || limit > MAX_GROUPS) throw invalidArgument(`limit must be between 1 and ${MAX_GROUPS}`, 'limit');
  return { query, groupBy, bucket, timezone, series, measures, orderBy, limit, now };
}

function keyOf(field: AggregatePlan['groupBy'][number], value: unknown): FactGroupKey {
  const key: FactGroupKey = { field: field.path, string: null, number: null, boolean: null, dateTime: null, json: null };
  if (value === null || value === undefined) return key;
  switch (field.field.type) {
    case 'string':
      key.string = value as string;
      break;
    case 'integer':
    case 'float':
      key.number = Number(value);
      break;
    case 'boolean':
      key.boolean = value as boolean;
      break;
    case 'datetime':
      key.dateTime = value instanceof Date ? value : new Date(value as string);
      break;
    default:
      key.json = value;
  }
  return key;
}

export function shapeAggregate(plan: AggregatePlan, result: AggregateResult): FactAggregate {
  return {
    groupBy: plan.groupBy.map((g) => g.path),
    measures: plan.measures.map((m) => m.name),
    groups: result.rows.map((r) => ({
      keys: plan.groupBy.map((g, i) => keyOf(g, r.keys[i])),
      bucket: r.bucket,
      values: plan.measures.map((m, i) => ({ name: m.name, value: r.values[i] ?? null })),
    })),
    groupsCut: result.cut,
  };
}

type Mode = 'latest' | 'timeline' | 'series';

/** The mode a request asks for, when its arguments say so plainly: the metric's label. */
function modeOf(args: Record<string, unknown>): Mode | undefined {
  if (args.series === true) return 'series';
  const mode = args.mode ?? 'latest';
  return mode === 'latest' || mode === 'timeline' ? mode : undefined;
}

export async function resolveFactAggregate(args: Record<string, unknown>, context: GraphqlContext): Promise<FactAggregate> {
  const { db, metrics } = context.deps;
  const workspaceId = context.principal?.workspaceId ?? context.deferred?.claims.ws;
  if (workspaceId === undefined) throw invalidArgument('factAggregate requires a bearer token');
  const started = performance.now();
  const mode = modeOf(args);
  const span = context.span?.child('graphql.factAggregate', 'internal', { 'tributary.aggregate.mode': mode });
  try {
    let models = context.models;
    // Remembered models: the account is re-checked here, before any argument is answered.
    if (context.deferred !== undefined && !context.deferred.checked) models = await recheck(db, context.deferred);
    const plan = await planAggregate(db, workspaceId, checkAggregateArguments(args, context.now), models);
    const result = await runAggregate(db, plan);
    span?.set({ 'tributary.aggregate.groups': result.rows.length, 'tributary.aggregate.groups_cut': result.cut });
    return shapeAggregate(plan, result);
  } catch (err) {
    // A refused argument is the caller's: the span records it but does not fail.
    if (err instanceof GraphQLError || (err instanceof AppError && err.status < 500)) span?.set({ 'tributary.aggregate.outcome': 'refused' });
    else span?.fail('unexpected', 'factAggregate failed');
    throw err;
  } finally {
    if (mode !== undefined) metrics.graphqlAggregate(mode, (performance.now() - started) / 1000);
    span?.end();
  }
}

const FactGroupKeyType = new GraphQLObjectType({
  name: 'FactGroupKey',
  description: "One groupBy key of a group: exactly the member of the field's type is set; all are null for a null key (the fact lacks the field).",
  fields: {
    field: { type: new GraphQLNonNull(GraphQLString), description: 'The groupBy path.' },
    string: { type: GraphQLString },
    number: { type: GraphQLFloat },
    boolean: { type: GraphQLBoolean },
    dateTime: { type: DateTimeScalar },
    json: { type: JsonScalar, description: 'Map and untyped fields.' },
  },
});

const FactMeasureValueType = new GraphQLObjectType({
  name: 'FactMeasureValue',
  fields: {
    name: { type: new GraphQLNonNull(GraphQLString) },
    value: { type: GraphQLFloat, description: 'Null for sum, avg, min and max when no fact of the group had a number in the field.' },
  },
});

const FactGroupType = new GraphQLObjectType({
  name: 'FactGroup',
  fields: {
    keys: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(FactGroupKeyType))), description: 'One per groupBy path, in order.' },
    bucket: { type: DateTimeScalar, description: "The bucket's start (an instant); null without bucket." },
    values: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(FactMeasureValueType))), description: 'One per measure, in order.' },
  },
});

const FactAggregateType = new GraphQLObjectType({
  name: 'FactAggregate',
  description: 'Groups of facts (timeline) or of entities (latest), each with its keys, bucket and measures.',
  fields: {
    groupBy: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(GraphQLString))), description: 'The groupBy paths, in order.' },
    measures: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(GraphQLString))), description: "The measures' names, in order." },
    groups: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(FactGroupType))) },
    groupsCut: { type: new GraphQLNonNull(GraphQLBoolean), description: 'More groups matched than limit.' },
  },
});

const FactMeasureInputType = new GraphQLInputObjectType({
  name: 'FactMeasureInput',
  fields: {
    op: { type: new GraphQLNonNull(GraphQLString), description: 'count, count_distinct_entities, sum, avg, min or max.' },
    field: { type: GraphQLString, description: 'sum, avg, min, max: an integer or float field, of the model or <joinSlug>.<field>.' },
    as: { type: GraphQLString, description: 'The name in the answer; default op, or op_field (sum_amount).' },
  },
});

const FactAggregateOrderInputType = new GraphQLInputObjectType({
  name: 'FactAggregateOrderInput',
  fields: {
    by: { type: new GraphQLNonNull(GraphQLString), description: "A measure's name, a groupBy path, or bucket." },
    direction: { type: GraphQLString, defaultValue: 'desc', description: 'asc or desc.' },
  },
});

const nonNullList = (t: GraphQLInputType & GraphQLNullableType) => new GraphQLList(new GraphQLNonNull(t));

export const factAggregateField: GraphQLFieldConfig<unknown, GraphqlContext> = {
  type: FactAggregateType,
  description: "Aggregates over the facts of one data model of the caller's workspace: groups, buckets and measures.",
  args: {
    dataModelSlug: { type: new GraphQLNonNull(GraphQLString), description: "Slug of a data model of the caller's workspace." },
    mode: { type: GraphQLString, defaultValue: 'latest', description: 'latest: groups of entities by their current fact; timeline: groups of facts.' },
    timeAxis: { type: GraphQLString, defaultValue: 'observed_at', description: 'observed_at or inserted_at: the axis of since, until, "latest" and buckets.' },
    since: { type: DateTimeScalar, description: "As factQuery's; with series, the window's start (required)." },
    until: { type: DateTimeScalar, description: "As factQuery's (latest: as of; timeline: exclusive end); with series, the window's end, default now." },
    filters: { type: GraphQLString, description: "factQuery's JSON array of at most 20 {field, op, value} clauses." },
    joinDataModelSlug: { type: GraphQLString, description: "Latest mode only, as factQuery's; its fields are named <joinSlug>.<field>." },
    joinType: { type: GraphQLString, defaultValue: 'left', description: 'left or inner, as factQuery.' },
    joinFilters: { type: GraphQLString, description: 'Like filters, on the joined data model.' },
    groupBy: { type: nonNullList(GraphQLString), description: 'Up to 3 fields: status, or <joinSlug>.region.' },
    bucket: { type: GraphQLString, description: 'minute, hour, day, week or month: the axis time cut in timezone.' },
    timezone: { type: GraphQLString, defaultValue: 'UTC', description: 'IANA time zone of the buckets.' },
    weekStart: { type: GraphQLString, defaultValue: 'monday', description: 'monday or sunday.' },
    series: { type: GraphQLBoolean, defaultValue: false, description: "Latest mode with bucket: the latest state as of each bucket's end." },
    measures: { type: nonNullList(FactMeasureInputType), description: 'Default [{op: "count"}].' },
    orderBy: {
      type: nonNullList(FactAggregateOrderInputType),
      description: 'Default: bucket ascending when bucketed, else the first measure descending; ties by keys ascending.',
    },
    limit: { type: GraphQLInt, defaultValue: DEFAULT_GROUPS, description: `Groups, 1 to ${MAX_GROUPS}; groupsCut says when more matched.` },
  },
  resolve: (_root, args, context) => resolveFactAggregate(args, context),
};
