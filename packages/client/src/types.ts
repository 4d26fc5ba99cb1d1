/**
 * Types of the JSON:API operations, derived from the generated schema (schema.d.ts) by the
 * collection name in the path (`workflow_runs`, `data_models`...): nothing hand-copied.
 */
import type { components, paths } from './schema.d.ts';

export type { components, operations, paths } from './schema.d.ts';

export const API_PREFIX = '/api/json/v1';
type Prefix = typeof API_PREFIX;
type JsonApi = 'application/vnd.api+json';

type Content<R> = R extends { content: { [K in JsonApi]: infer D } } ? D : never;

/** Every collection served under /api/json/v1 that can be listed: `workflow_runs`, `data_models`... */
export type Collection = {
  [P in keyof paths]: P extends `${Prefix}/${infer C}`
    ? C extends `${string}/${string}` | `${string}.${string}`
      ? never
      : paths[P] extends { get: unknown }
        ? C
        : never
    : never;
}[keyof paths];

type ListOp<C extends Collection> = paths[`${Prefix}/${C}`] extends { get: infer O } ? O : never;
type ListResponse<C extends Collection> = ListOp<C> extends { responses: { 200: infer R } } ? Content<R> : never;

/** One resource object of collection C, as the server answers it. */
export type ResourceOf<C extends Collection> = ListResponse<C> extends { data: Array<infer R> } ? R : never;
/** Its attributes. */
export type AttributesOf<C extends Collection> = NonNullable<ResourceOf<C> extends { attributes?: infer A } ? A : never>;

/** A list answer of collection C. */
export type ListDocument<C extends Collection> = ListResponse<C>;

/** The collections that take POST /{collection}. */
export type Creatable = {
  [C in Collection]: paths[`${Prefix}/${C}`] extends { post: unknown } ? C : never;
}[Collection];
/** The collections that take PATCH /{collection}/{id}. */
export type Updatable = {
  [C in Collection]: `${Prefix}/${C}/{id}` extends keyof paths ? (paths[`${Prefix}/${C}/{id}`] extends { patch: unknown } ? C : never) : never;
}[Collection];
/** The collections that take DELETE /{collection}/{id}. */
export type Deletable = {
  [C in Collection]: `${Prefix}/${C}/{id}` extends keyof paths ? (paths[`${Prefix}/${C}/{id}`] extends { delete: unknown } ? C : never) : never;
}[Collection];

type Body<O> = O extends { requestBody?: infer B } ? Content<NonNullable<B>> : never;
type Data<D> = D extends { data: infer X } ? X : never;

/** The `data` member of a create document of C: `{type, attributes, relationships?}`. */
export type CreateData<C extends Creatable> = Data<Body<paths[`${Prefix}/${C}`] extends { post: infer O } ? O : never>>;
/** The `data` member of an update document of C, without its id (given apart). */
export type UpdateData<C extends Updatable> = Omit<Data<Body<paths[`${Prefix}/${C}/{id}`] extends { patch: infer O } ? O : never>>, 'id'>;

type QueryOf<C extends Collection> = ListOp<C> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
/** The attributes collection C can be filtered on (from its filter[...] parameters). */
export type FilterField<C extends Collection> = {
  [K in keyof QueryOf<C>]: K extends `filter[${infer F}]` ? (F extends `${string}]${string}` ? never : F) : never;
}[keyof QueryOf<C>];

type Scalar = string | number | boolean;
/** filter[field]=value, or filter[field][op]=value (`{status: 'failed'}`, `{inserted_at: {gte: '2026-01-01T00:00:00Z'}}`). */
export type Filter<C extends Collection> = Partial<Record<FilterField<C>, Scalar | readonly Scalar[] | Partial<Record<string, Scalar | readonly Scalar[]>>>>;

export interface ListOptions<C extends Collection> {
  filter?: Filter<C>;
  /** Attribute names, `-` first for descending: `['-inserted_at']` or `'-inserted_at,id'`. */
  sort?: string | readonly string[];
  include?: string | readonly string[];
  /** Sparse fieldsets per type: `{workflow_run: ['status', 'outcome']}`. */
  fields?: Record<string, string | readonly string[]>;
  /** page[limit] and page[after] (the cursor links.next carries) or page[number]/page[size]. */
  page?: Record<string, string | number>;
}

/** One page of a list: its resources, the included ones, and where the next page is. */
export interface Page<C extends Collection> {
  data: ResourceOf<C>[];
  included: components['schemas']['any_resource'][];
  meta: Record<string, unknown>;
  links: Record<string, string | null | undefined>;
  /** The next page, or undefined on the last one. */
  next(): Promise<Page<C> | undefined>;
}

/** A document of one resource of C. */
export interface One<C extends Collection> {
  data: ResourceOf<C>;
  included?: components['schemas']['any_resource'][];
  meta?: Record<string, unknown>;
}

type OpBody<P extends keyof paths, M extends string> = paths[P] extends { [K in M]: infer O } ? Body<O> : never;
/** The body of POST /workflows/{id}/test_run. */
export type TestRunData = Data<OpBody<`${Prefix}/workflows/{id}/test_run`, 'post'>>;
export type TestRunAttributes = NonNullable<TestRunData extends { attributes?: infer A } ? A : never>;
export type ReplayVersion = NonNullable<NonNullable<OpBody<`${Prefix}/workflow_runs/{id}/replay`, 'post'>['meta']>['version']>;
export type BulkReplayMeta = NonNullable<OpBody<`${Prefix}/workflow_runs/replay`, 'post'>['meta']>;

type Answer<P extends keyof paths, M extends string, S extends number> = paths[P] extends { [K in M]: { responses: { [X in S]: infer R } } } ? R : never;
export type TestRunDocument = Content<Answer<`${Prefix}/workflows/{id}/test_run`, 'post', 200>>;
export type BulkReplayDocument = Content<Answer<`${Prefix}/workflow_runs/replay`, 'post', 200>>;
/** GET /external_connectors/{id}/rate_limit: the connector's rate budget and its use in the current window. */
export type ConnectorRateLimitDocument = Content<Answer<`${Prefix}/external_connectors/{id}/rate_limit`, 'get', 200>>;

type JsonContent<R> = R extends { content: { 'application/json': infer D } } ? D : never;
/** The 202 answer of POST /api/v1/webhooks/{token}: accepted with the run's id, or a duplicate. */
export type WebhookAccepted = JsonContent<Answer<'/api/v1/webhooks/{token}', 'post', 202>>;
export type TokenAnswer = JsonContent<Answer<'/api/v1/oauth/token', 'post', 200>>;

/** One clause of factQuery's `filters` and `joinFilters`. */
export interface FactFilterClause {
  field: string;
  op: string;
  value?: unknown;
}

/**
 * Which facts a query reads: the arguments factQuery, factAggregate and the fact iterators
 * share (schema.graphql).
 */
export interface FactSelection {
  dataModelSlug: string;
  mode?: 'latest' | 'timeline';
  timeAxis?: 'observed_at' | 'inserted_at';
  /** ISO 8601 date-time. Timeline: inclusive start. Latest: entities whose latest fact is older are left out. */
  since?: string;
  /** ISO 8601 date-time. Timeline: exclusive end. Latest: as of this instant (inclusive). */
  until?: string;
  /** At most 20 {field, op, value} clauses; given as an array, sent as the JSON string the API takes. */
  filters?: string | ReadonlyArray<FactFilterClause>;
  /** Latest mode only: a second data model matched on entityId. */
  joinDataModelSlug?: string;
  joinType?: 'left' | 'inner';
  joinFilters?: string | ReadonlyArray<FactFilterClause>;
}

/** Variables of factQuery (schema.graphql: Query.factQuery). */
export interface FactQueryVariables extends FactSelection {
  sort?: 'observed_at' | 'inserted_at' | 'entity_id';
  sortDirection?: 'asc' | 'desc';
  limit?: number;
  offset?: number;
}

/**
 * What `facts` and `factPages` read: factQuery's selection without its paging (sort,
 * sortDirection, limit and offset are the iterator's own). A timeline without `since`
 * starts at the model's earliest fact (not factQuery's 90 days before `until`); without
 * `until` it ends at the instant the iteration starts.
 */
export interface FactExportVariables extends FactSelection {
  /** Facts per request, 1 to 250 (default 250). */
  pageSize?: number;
}

/**
 * Variables of factAggregate (schema.graphql: Query.factAggregate). With `series`, `since`
 * is the window's start (required) and `until` its end (default now).
 */
export interface FactAggregateVariables extends FactSelection {
  /** Up to 3 paths: `status`, or `<joinSlug>.region`. */
  groupBy?: readonly string[];
  bucket?: 'minute' | 'hour' | 'day' | 'week' | 'month';
  /** IANA time zone of the buckets (default UTC). */
  timezone?: string;
  weekStart?: 'monday' | 'sunday';
  /** Latest mode with a bucket: the latest state as of each bucket's end. */
  series?: boolean;
  /** Default `[{op: 'count'}]`. */
  measures?: ReadonlyArray<FactMeasureInput>;
  orderBy?: ReadonlyArray<FactAggregateOrderInput>;
  /** Groups, 1 to 10 000 (default 1 000); `groupsCut` says when more matched. */
  limit?: number;
}

export interface FactMeasureInput {
  op: 'count' | 'count_distinct_entities' | 'sum' | 'avg' | 'min' | 'max';
  /** The integer or float field of sum, avg, min and max (of the model, or `<joinSlug>.field`). */
  field?: string;
  /** The measure's name; default op, or op_field (`sum_amount`). */
  as?: string;
}

export interface FactAggregateOrderInput {
  /** A measure's name, a groupBy path, or `bucket`. */
  by: string;
  direction?: 'asc' | 'desc';
}

/** factAggregate's answer. */
export interface FactAggregate {
  /** The groupBy paths, in order. */
  groupBy: string[];
  /** The measures' names, in order. */
  measures: string[];
  groups: FactGroup[];
  /** More groups matched than `limit`. */
  groupsCut: boolean;
}

export interface FactGroup {
  /** One per groupBy path, in order. */
  keys: FactGroupKey[];
  /** The bucket's start (ISO 8601), null without a bucket. */
  bucket: string | null;
  /** One per measure, in order. */
  values: FactMeasureValue[];
}

/** Exactly the member of the field's type is set; all null for a null key (the fact lacks the field). */
export interface FactGroupKey {
  field: string;
  string: string | null;
  number: number | null;
  boolean: boolean | null;
  dateTime: string | null;
  /** JSON text (the Json scalar), for map fields. */
  json: string | null;
}

export interface FactMeasureValue {
  name: string;
  /** Null when no fact had a number in the field (sum, avg, min, max). */
  value: number | null;
}
