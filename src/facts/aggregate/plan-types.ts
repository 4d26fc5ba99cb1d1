/**
 * Glossary of factAggregate.
 * - AggregatePlan: a checked factAggregate, its models resolved in the caller's workspace,
 *   every value checked and every identifier picked from a fixed list, ready to become SQL.
 * - group: the facts (timeline) or entities (latest) sharing the values of `groupBy` and,
 *   with a bucket, the bucket; each group has one value per measure.
 * - series: latest mode with a bucket: the latest-state aggregate as of each bucket's end.
 */
import type { TimeAxis } from '../../db/tables.ts';
import type { DataModelWithFields, ModelField } from '../models.sql.ts';
import type { FactFilter } from '../query/filters.ts';

/** A field of the model or of the joined model, as groupBy and measures name it. */
export interface AggregateField {
  /** 'model': the queried data model; 'join': the joined one (named `<joinSlug>.<field>`). */
  source: 'model' | 'join';
  field: ModelField;
  /** As the caller wrote it: `status` or `customers.region`. */
  path: string;
}

export type MeasureOp = 'count' | 'count_distinct_entities' | 'sum' | 'avg' | 'min' | 'max';

export interface AggregateMeasure {
  /** The result's name: `as`, else `count`, `count_distinct_entities`, `sum_amount`, ... */
  name: string;
  op: MeasureOp;
  /** sum, avg, min, max: an integer or float field. */
  field?: AggregateField;
}

export type BucketUnit = 'minute' | 'hour' | 'day' | 'week' | 'month';

export interface AggregateBucket {
  unit: BucketUnit;
  /** IANA name, checked against PostgreSQL's pg_timezone_names; default 'UTC'. */
  timezone: string;
  /** Week buckets only; default 'monday'. */
  weekStart: 'monday' | 'sunday';
}

export interface AggregateOrder {
  /** A measure's name, a groupBy path, or 'bucket'. */
  by: { kind: 'measure'; index: number } | { kind: 'group'; index: number } | { kind: 'bucket' };
  direction: 'asc' | 'desc';
}

export interface AggregatePlan {
  workspaceId: string;
  model: DataModelWithFields;
  mode: 'latest' | 'timeline';
  axis: TimeAxis;
  /** As in FactQueryPlan. Series: the window's start (required with series). */
  since: Date | undefined;
  /** As in FactQueryPlan (latest: as of; timeline: exclusive end). Series: the window's end, default now. */
  until: Date | undefined;
  filters: FactFilter[];
  join: { model: DataModelWithFields; type: 'left' | 'inner'; filters: FactFilter[] } | undefined;
  groupBy: AggregateField[];
  bucket: AggregateBucket | undefined;
  series: boolean;
  measures: AggregateMeasure[];
  orderBy: AggregateOrder[];
  /** Groups returned, 1..MAX_GROUPS; one more is read to tell whether groups were cut. */
  limit: number;
}

/** One group as SQL returns it: keys in groupBy's order, the bucket start, values in measures' order. */
export interface AggregateRow {
  keys: unknown[];
  bucket: Date | null;
  values: (number | null)[];
}

export interface AggregateResult {
  rows: AggregateRow[];
  /** More groups matched than `limit`. */
  cut: boolean;
}
